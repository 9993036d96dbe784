"""wholejob: a job's whole life on the server, with its history kept and with it off (``mysqlq history
off --all``): N jobs enqueued (one ``enqueue`` each, or one ``enqueue_many``), drained by two workers
with default settings, then, where the history is kept, deleted by retention (``mysqlq purge``'s
walk, every done job); each stage's server CPU per job (``/proc``, the private server's own, counted
until the server is idle again so that InnoDB's purge of what the stage deleted counts too), and the
whole life's as a ratio of history off to kept (``life_vs_kept``), run by run in alternation::

    .venv/bin/python scripts/bench --only wholejob [--runs 3]
"""

from __future__ import annotations

import time

from mysqlq_harness.jobs import every_job

import mysqlq
from benchmark.common import Bench, Figure, emit, note, payload, wait_drained
from benchmark.shared import Sizes, cpu_since, server_cpu
from mysqlq.leader.retention import Purge
from mysqlq.store.db import Database

WORKERS = 2
IDLE = 0.02  # CPU seconds per half second under which the server counts as idle (its purge done)
SETTLE_MAX = 20.0  # seconds to wait for that at most


def _idle(bench: Bench) -> None:
    """Until the server has used under IDLE of CPU in half a second (or SETTLE_MAX passed)."""
    deadline = time.monotonic() + SETTLE_MAX
    while time.monotonic() < deadline:
        start = server_cpu(bench)
        time.sleep(0.5)
        if not cpu_since(server_cpu(bench), start) >= IDLE:
            return


def _settled(bench: Bench, before: float | None) -> float:
    """The server's CPU seconds since ``before``, read once it is idle again."""
    _idle(bench)
    return cpu_since(server_cpu(bench), before)


def _life(bench: Bench, name: str, n: int, bulk: bool, history: bool) -> dict[str, float]:
    """One life of ``n`` jobs; the server's CPU µs per job of each stage, and of the whole."""
    dsn = bench.fresh(name)
    conn = bench.connect(dsn)
    cur = conn.cursor()
    cur.execute("SET time_zone = '+00:00'")
    if not history:
        cur.execute("INSERT INTO mysqlq_queues (name, keep_done) VALUES ('', 0)")
    with mysqlq.Producer(bench.settings(dsn)) as producer:
        producer.enqueue("bench.noop", payload(0))  # connected before timing: this job is the n-th
        _idle(bench)
        before = server_cpu(bench)
        if bulk:
            producer.enqueue_many([mysqlq.Job("bench.noop", payload(i)) for i in range(1, n)])
        else:
            for i in range(1, n):
                producer.enqueue("bench.noop", payload(i))
        enqueue = _settled(bench, before)
    before = server_cpu(bench)
    workers = bench.workers(dsn, WORKERS, tag=name)
    try:
        wait_drained(cur, workers, timeout=max(120.0, n / 50))
    finally:
        workers.stop()
    drain = _settled(bench, before)
    cur.execute(f"SELECT COUNT(*) FROM {every_job('id')}")
    left = int(cur.fetchone()[0])
    if left != (n if history else 0):
        raise RuntimeError(f"{name}: {left} jobs left of {n} (history {'kept' if history else 'off'})")
    purge = 0.0
    if history:
        before = server_cpu(bench)
        walk = Purge(Database(dsn), [("done", 0.0)])
        while not walk.finished:
            walk.step()
        purge = _settled(bench, before)
    conn.close()
    bench.drop(dsn.database)
    per = 1e6 / n
    return {"enqueue_us_job": enqueue * per, "drain_us_job": drain * per, "purge_us_job": purge * per,
            "life_us_job": (enqueue + drain + purge) * per}


def whole_job(bench: Bench, sizes: Sizes) -> list[Figure]:
    figures = []
    for bulk, n in ((False, sizes.w4_singles), (True, sizes.w1_jobs)):
        mode = "bulk" if bulk else "single"
        off = Figure("wholejob", {"enqueue": mode, "history": "off", "n": str(n)},
                     spread=("life_us_job", "life_vs_kept"))
        kept = Figure("wholejob", {"enqueue": mode, "history": "kept", "n": str(n)}, spread=("life_us_job",))
        for run in range(bench.runs):
            note(f"wholejob run {run + 1}: {n} jobs enqueued {mode}, drained, purged; history off, then kept")
            o = _life(bench, f"wj_{mode}_off_r{run}", n, bulk, history=False)
            k = _life(bench, f"wj_{mode}_kept_r{run}", n, bulk, history=True)
            off.add(**o, life_vs_kept=o["life_us_job"] / k["life_us_job"])
            kept.add(**k)
        figures += [emit(off), emit(kept)]
    return figures
