"""W7, I/O-bound: jobs that wait 50 ms (``def`` and ``async def``) against the ideal workers × slots /
0.05 s; W7sweep, the same at several concurrencies.
"""

from __future__ import annotations

import json

from benchmark.common import Bench, Figure, emit, note
from benchmark.shared import DEFAULTS, Sizes, drain_waiting


def w7(bench: Bench, sizes: Sizes, k: int = 2, seconds: float = 0.05) -> list[Figure]:
    """2,000 jobs that wait 50 ms, ``def`` and ``async def``, K=2 workers at the default concurrency."""
    n, slots = sizes.w7_jobs, DEFAULTS.concurrency
    ideal = k * slots / seconds
    figures = []
    for handler in ("bench.sleep", "bench.asleep"):
        fig = Figure("W7", {"handler": handler, "k": str(k), "concurrency": str(slots), "n": str(n)},
                     spread=("jobs_s", "ratio_ideal"))
        for run in range(bench.runs):
            note(f"W7 run {run + 1}: {n} × {handler} ({seconds * 1000:g} ms), K={k}, concurrency {slots}")
            d = drain_waiting(bench, f"w7_{handler.split('.')[1]}_r{run}", k,
                              [json.dumps({"s": seconds}).encode()] * n, handler)
            fig.add(jobs_s=d.jobs / d.wall, ratio_ideal=d.jobs / d.wall / ideal,
                    steady_jobs_s=d.jobs / d.steady, ratio_ideal_steady=d.jobs / d.steady / ideal,
                    ideal_jobs_s=ideal, rss_mib_per_worker=d.rss_mib)
        figures.append(emit(fig))
    return figures


def w7_sweep(bench: Bench, sizes: Sizes, k: int = 2, seconds: float = 0.05) -> list[Figure]:
    """W7 (``def`` handler) at several concurrencies: throughput against memory, to choose the default."""
    figures = []
    for slots in (1, 3, 5, 8, 10, 16):
        n = min(sizes.w7_jobs, max(200, slots * 100))
        ideal = k * slots / seconds
        fig = Figure("W7", {"handler": "bench.sleep", "k": str(k), "concurrency": str(slots), "n": str(n)},
                     spread=("ratio_ideal_steady",))
        for run in range(bench.runs):
            note(f"W7 sweep run {run + 1}: concurrency {slots}, {n} jobs")
            d = drain_waiting(bench, f"w7s_{slots}_r{run}", k, [json.dumps({"s": seconds}).encode()] * n,
                              "bench.sleep", ["--concurrency", str(slots)])
            fig.add(jobs_s=d.jobs / d.wall, ratio_ideal=d.jobs / d.wall / ideal,
                    steady_jobs_s=d.jobs / d.steady, ratio_ideal_steady=d.jobs / d.steady / ideal,
                    rss_mib_per_worker=d.rss_mib)
        figures.append(emit(fig))
    return figures
