"""W1, drain: N jobs enqueued in bulk, then K workers started (K=2 and 4), until every job is done; the
bare-SQL loop and its ceiling (mysqlq's own statements in it) beside each; K=2 with ``--log-level
warning`` and with ``--concurrency 1``. Every figure has the server's CPU per job (``server_us_job``,
from ``/proc``: the private server's own, whatever else the machine runs), mysqlq's also its
ceiling's (``ceiling_server_us_job``) and the bare loop's (``bare_server_us_job``).

The bare loop runs at the worker's default batch size (the workload's "same K and batch size"); while
that default is not 100, the bare loop at batch 100, the reference loop's own batch, runs beside it
(``ratio_bare100``, ``bare100_server_us_job``).
"""

from __future__ import annotations

from benchmark.common import Bench, Figure, emit, note
from benchmark.shared import BATCH, Sizes, drain_bare, drain_mysqlq

REFERENCE_BATCH = 100  # the reference loop's own batch


def w1(bench: Bench, sizes: Sizes) -> list[Figure]:
    n = sizes.w1_jobs
    mq = {k: Figure("W1", {"k": str(k), "batch": BATCH, "n": str(n)}, spread=("jobs_s",)) for k in (2, 4)}
    bare = {k: Figure("W1", {"k": str(k), "batch": BATCH, "n": str(n), "loop": "bare"},
                      spread=("jobs_s", "server_us_job"))
            for k in (2, 4)}
    quiet = Figure("W1", {"k": "2", "batch": BATCH, "n": str(n), "log_level": "warning"}, spread=("jobs_s",))
    # One slot is the loop as it was before workers had slots: the default must not be slower.
    one = Figure("W1", {"k": "2", "batch": BATCH, "n": str(n), "concurrency": "1"}, spread=("jobs_s",))
    ratios: dict[int, list[tuple[float, float]]] = {2: [], 4: []}
    quiet_ratio: list[float] = []
    for run in range(bench.runs):
        for k in (2, 4):
            note(f"W1 run {run + 1}: K={k} mysqlq, then bare")
            d = drain_mysqlq(bench, f"w1_k{k}_r{run}", k, n)
            if k == 2:  # right after the default, so that both see the same load
                note(f"W1 run {run + 1}: K=2 mysqlq --concurrency 1")
                o = drain_mysqlq(bench, f"w1_one_r{run}", 2, n, options=["--concurrency", "1"])
                one.add(jobs_s=o.jobs_s, steady_jobs_s=o.steady_jobs_s, startup_s=o.startup,
                        cpu_us_job=o.cpu_us_job, server_us_job=o.server_us_job)
            b = drain_bare(bench, f"w1b_k{k}_r{run}", k, n)
            c = drain_bare(bench, f"w1c_k{k}_r{run}", k, n, ceiling=True)
            if int(BATCH) != REFERENCE_BATCH:
                r = drain_bare(bench, f"w1r_k{k}_r{run}", k, n, batch=REFERENCE_BATCH)
                mq[k].add(ratio_bare100=d.jobs_s / r.jobs_s, bare100_jobs_s=r.jobs_s,
                          bare100_server_us_job=r.server_us_job, server_vs_bare100=d.server_us_job / r.server_us_job)
            mq[k].add(jobs_s=d.jobs_s, steady_jobs_s=d.steady_jobs_s, startup_s=d.startup, cpu_us_job=d.cpu_us_job,
                      server_us_job=d.server_us_job, ceiling_ratio_bare=c.jobs_s / b.jobs_s,
                      ceiling_ratio_bare_steady=c.steady_jobs_s / b.steady_jobs_s,
                      ceiling_server_us_job=c.server_us_job, bare_server_us_job=b.server_us_job)
            bare[k].add(jobs_s=b.jobs_s, steady_jobs_s=b.steady_jobs_s, cpu_us_job=b.cpu_us_job,
                        server_us_job=b.server_us_job)
            ratios[k].append((d.jobs_s / b.jobs_s, d.steady_jobs_s / b.steady_jobs_s))
        note(f"W1 run {run + 1}: K=2 mysqlq --log-level warning")
        q = drain_mysqlq(bench, f"w1_quiet_r{run}", 2, n, global_options=["--log-level", "warning"])
        quiet.add(jobs_s=q.jobs_s, steady_jobs_s=q.steady_jobs_s, startup_s=q.startup, server_us_job=q.server_us_job)
        quiet_ratio.append(q.jobs_s / bare[2].values["jobs_s"][-1])
    for k in (2, 4):
        mq[k].add_list("bare_jobs_s", bare[k].values["jobs_s"])
        mq[k].add_list("ratio_bare", [r[0] for r in ratios[k]])
        mq[k].add_list("ratio_bare_steady", [r[1] for r in ratios[k]])
        mq[k].spread = ("jobs_s", "ratio_bare", "server_us_job")
    quiet.add_list("ratio_bare", quiet_ratio)
    quiet.add_list("ratio_default_logging", [a / b for a, b in zip(quiet.values["jobs_s"], mq[2].values["jobs_s"],
                                                                    strict=True)])
    one.add_list("ratio_bare", [a / b for a, b in zip(one.values["jobs_s"], bare[2].values["jobs_s"], strict=True)])
    one.add_list("cpu_default_vs_one_slot", [a / b for a, b in zip(mq[2].values["cpu_us_job"],
                                                                     one.values["cpu_us_job"], strict=True)])
    one.add_list("default_vs_one_slot", [a / b for a, b in zip(mq[2].values["jobs_s"], one.values["jobs_s"],
                                                                 strict=True)])
    return [emit(f) for f in (mq[2], bare[2], mq[4], bare[4], quiet, one)]


def w1_no_history(bench: Bench, sizes: Sizes) -> list[Figure]:
    """W1nohistory: W1 with the installation's history off (every done job deleted by its completion),
    beside W1 as it is and the bare loop at batch 100, alternating run by run, at K = 2 and 4: jobs/s
    and the server's CPU per job of each, and the ratios (``server_vs_kept``, ``server_vs_bare100``,
    ``ratio_bare100``)."""
    n = sizes.w1_jobs
    figs = {k: Figure("W1nohistory", {"k": str(k), "batch": BATCH, "n": str(n)},
                      spread=("jobs_s", "server_us_job", "server_vs_kept", "server_vs_bare100"))
            for k in (2, 4)}
    for run in range(bench.runs):
        for k in (2, 4):
            note(f"W1nohistory run {run + 1}: K={k} history off, history kept, bare at batch {REFERENCE_BATCH}")
            off = drain_mysqlq(bench, f"w1n_off_k{k}_r{run}", k, n, history=False)
            kept = drain_mysqlq(bench, f"w1n_kept_k{k}_r{run}", k, n)
            bare = drain_bare(bench, f"w1n_bare_k{k}_r{run}", k, n, batch=REFERENCE_BATCH)
            figs[k].add(jobs_s=off.jobs_s, server_us_job=off.server_us_job, kept_jobs_s=kept.jobs_s,
                        kept_server_us_job=kept.server_us_job, bare100_jobs_s=bare.jobs_s,
                        bare100_server_us_job=bare.server_us_job,
                        server_vs_kept=off.server_us_job / kept.server_us_job,
                        server_vs_bare100=off.server_us_job / bare.server_us_job,
                        kept_server_vs_bare100=kept.server_us_job / bare.server_us_job,
                        ratio_bare100=off.jobs_s / bare.jobs_s, kept_ratio_bare100=kept.jobs_s / bare.jobs_s)
    return [emit(figs[k]) for k in (2, 4)]
