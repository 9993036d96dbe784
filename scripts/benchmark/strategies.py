"""The claim-strategy comparison: W1 K=2 for each claim strategy, isolation level, outcome-write mode
and batch size, each against the bare loop alike.
"""

from __future__ import annotations

import json
from typing import Any

from benchmark.common import Bench, Figure, emit, note
from benchmark.shared import BATCH, Drain, Sizes, drain_bare, drain_mysqlq


def strategies(bench: Bench, sizes: Sizes, k: int = 2) -> list[Figure]:
    """W1 K=2 for each claim strategy, isolation level, outcome-write mode and batch size."""
    n, n1 = sizes.strategy_jobs, sizes.strategy_jobs_batch1
    server = bench.server_isolation
    other = "READ COMMITTED" if server == "REPEATABLE READ" else "REPEATABLE READ"
    rr = server.lower().replace(" ", "-")
    rc = other.lower().replace(" ", "-")
    # (dimensions, worker options, jobs, bare-loop variant)
    configs: list[tuple[dict[str, str], list[str], int, dict[str, Any]]] = [
        ({"claim": "update", "isolation": rr, "flush": "grouped", "batch": BATCH}, [], n, {}),
        ({"claim": "skip-locked", "isolation": rr, "flush": "grouped", "batch": BATCH}, ["--claim", "skip-locked"], n,
         {"claim": "skip-locked"}),
        ({"claim": "update", "isolation": rc, "flush": "grouped", "batch": BATCH}, ["--isolation", other], n,
         {"isolation": other}),
        ({"claim": "update", "isolation": rr, "flush": "per-job", "batch": BATCH}, ["--flush-interval", "0"], n, {}),
        ({"claim": "update", "isolation": rr, "flush": "grouped", "batch": "500"}, ["--batch-size", "500"], n,
         {"batch": 500}),
        ({"claim": "update", "isolation": rr, "flush": "grouped", "batch": "200"}, ["--batch-size", "200"], n,
         {"batch": 200}),
        ({"claim": "update", "isolation": rr, "flush": "grouped", "batch": "10"}, ["--batch-size", "10"], n,
         {"batch": 10}),
        ({"claim": "update", "isolation": rr, "flush": "grouped", "batch": "1"}, ["--batch-size", "1"], n1,
         {"batch": 1}),
    ]
    figures = [Figure("S", {**dims, "k": str(k), "n": str(jobs)}, spread=("steady_jobs_s",))
               for dims, _, jobs, _ in configs]
    bare_runs: dict[str, list[Drain]] = {}
    for run in range(bench.runs):
        for index, (dims, options, jobs, bare) in enumerate(configs):
            note(f"strategies run {run + 1}: {' '.join(f'{k}={v}' for k, v in dims.items())}")
            d = drain_mysqlq(bench, f"s{index}_r{run}", k, jobs, options)
            bare_key = json.dumps(bare, sort_keys=True)
            done = bare_runs.setdefault(bare_key, [])
            if len(done) <= run:  # one bare run per distinct bare configuration and run
                done.append(drain_bare(bench, f"s{index}b_r{run}", k, jobs, **bare))
            b = done[run]
            figures[index].add(jobs_s=d.jobs_s, steady_jobs_s=d.steady_jobs_s, bare_steady_jobs_s=b.steady_jobs_s,
                               ratio_bare_steady=d.steady_jobs_s / b.steady_jobs_s)
    out = [emit(fig) for fig in figures]
    return out
