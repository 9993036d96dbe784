"""W8, fairness: 20 jobs of 0.5 s, two workers started together (long-running, then ``--burst``)."""

from __future__ import annotations

import json

from benchmark.common import Bench, Figure, emit, note
from benchmark.shared import DEFAULTS, Sizes, drain_waiting


def w8(bench: Bench, sizes: Sizes, k: int = 2, jobs: int = 20, seconds: float = 0.5) -> list[Figure]:
    """20 jobs of 0.5 s enqueued at once, two workers started together: makespan against the ideal;
    long-running workers, then ``--burst`` ones (mode=burst), which leave once they find nothing to
    do: one must not leave while another's claim holds jobs it could run."""
    slots = DEFAULTS.concurrency
    ideal = jobs * seconds / (k * slots)
    labels = {"jobs": str(jobs), "seconds": f"{seconds:g}", "k": str(k), "concurrency": str(slots)}
    modes: list[tuple[str, list[str], Figure]] = [
        ("", [], Figure("W8", labels, spread=("ratio_ideal",))),
        ("burst", ["--burst"], Figure("W8", {"mode": "burst", **labels}, spread=("ratio_ideal",))),
    ]
    for run in range(bench.runs):
        for mode, options, fig in modes:
            note(f"W8 run {run + 1}: {jobs} × {seconds:g} s on {k} {mode + ' ' if mode else ''}workers of {slots} "
                 f"slots (ideal {ideal:g} s)")
            d = drain_waiting(bench, f"w8_{mode + '_' if mode else ''}r{run}", k,
                              [json.dumps({"s": seconds}).encode()] * jobs, "bench.sleep", options)
            counts = list(d.per_worker.values()) + [0] * (k - len(d.per_worker))  # a worker that ran none: 0
            fig.add(makespan_s=d.steady, ideal_s=ideal, ratio_ideal=d.steady / ideal, wall_s=d.wall,
                    jobs_per_worker_min=min(counts), jobs_per_worker_max=max(counts))
    return [emit(fig) for _, _, fig in modes]
