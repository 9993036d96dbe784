"""W9, workflows: a group's callback and a chain's steps with workers already running.

- group: N no-op members and a no-op callback enqueued in one transaction while K workers are idle;
  the members' drain rate against a plain drain of N no-op jobs run the same way just before, and
  the callback's delay (its start minus the last member's finish, on the server's clock);
- chain: S no-op steps, one after the other; the hand-off from a step's finish to the next one's start.
"""

from __future__ import annotations

import itertools
import time
from typing import Any

from mysqlq_harness.jobs import EVERY_JOB, every_job

import mysqlq
from benchmark.common import (
    Bench,
    Figure,
    Workers,
    emit,
    fill_jobs,
    median,
    note,
    percentile,
    status_counts,
    wait_drained,
)

K = 2
IDLE = 1.0  # seconds the workers idle before the jobs appear (past start-up)


def w9(bench: Bench, sizes: Any) -> list[Figure]:
    quick = bench.quick
    n = 2000 if quick else 10_000
    steps = 50 if quick else 200
    group = Figure("W9group", {"k": str(K), "members": str(n)}, spread=("ratio_plain", "callback_ms"))
    chain = Figure("W9chain", {"k": str(K), "steps": str(steps)}, spread=("handoff_ms_p50",))
    for run in range(bench.runs):
        note(f"W9 run {run + 1}: a plain drain of {n} jobs, a group of {n} members, a chain of {steps} steps")
        plain_s = _plain(bench, f"w9p_r{run}", n)
        members_s, callback_ms, enqueue_s = _group(bench, f"w9g_r{run}", n)
        group.add(members_jobs_s=members_s, plain_jobs_s=plain_s, ratio_plain=members_s / plain_s,
                  callback_ms=callback_ms, enqueue_s=enqueue_s)
        handoffs = _chain(bench, f"w9c_r{run}", steps)
        chain.add(handoff_ms_p50=median(handoffs), handoff_ms_p99=percentile(handoffs, 99))
    return [emit(group), emit(chain)]


def _start(bench: Bench, name: str) -> tuple[mysqlq.Dsn, Any, Any, Workers]:
    dsn = bench.fresh(name)
    conn = bench.connect(dsn)
    cur = conn.cursor()
    cur.execute("SET time_zone = '+00:00'")
    workers = bench.workers(dsn, K, tag=name)
    workers.wait_registered(cur, K)
    time.sleep(IDLE)
    return dsn, conn, cur, workers


def _finish(bench: Bench, dsn: mysqlq.Dsn, conn: Any, workers: Workers) -> None:
    conn.close()
    bench.drop(dsn.database)
    workers.log.unlink(missing_ok=True)


def _plain(bench: Bench, name: str, n: int) -> float:
    """Jobs per second of N plain no-op jobs, from the first start to the last finish."""
    dsn, conn, cur, workers = _start(bench, name)
    try:
        cur.execute("BEGIN")
        fill_jobs(cur, n)
        cur.execute("COMMIT")
        mysqlq.notify(bench.settings(dsn), ["default"])
        wait_drained(cur, workers, timeout=max(120.0, n / 50))
    finally:
        workers.stop()
    rate = _rate(cur, "1 = 1")
    _finish(bench, dsn, conn, workers)
    return rate


def _rate(cur: Any, where: str) -> float:
    cur.execute("SELECT COUNT(*), TIMESTAMPDIFF(MICROSECOND, MIN(started_at), MAX(finished_at))"
                f" FROM {every_job('id, started_at, finished_at')} WHERE {where}")
    count, span_us = cur.fetchone()
    return int(count) / (int(span_us) / 1e6)


def _group(bench: Bench, name: str, n: int) -> tuple[float, float, float]:
    """Members per second, the callback's delay after the last member (ms), and the enqueue's seconds."""
    dsn, conn, cur, workers = _start(bench, name)
    try:
        with mysqlq.Producer(bench.settings(dsn)) as producer:
            t0 = time.perf_counter()
            group = producer.group([mysqlq.Job("bench.noop", {"n": i}) for i in range(n)],
                                   then=mysqlq.Job("bench.noop"))
            enqueue_s = time.perf_counter() - t0
        wait_drained(cur, workers, timeout=max(120.0, n / 50))
    finally:
        workers.stop()
    done = status_counts(cur).get("done", 0)
    if done != n + 1:
        raise RuntimeError(f"{name}: expected {n + 1} done jobs, found {status_counts(cur)}")
    rate = _rate(cur, f"id <> {int(group.callback)}")
    cur.execute(f"SELECT TIMESTAMPDIFF(MICROSECOND, (SELECT MAX(finished_at) FROM {every_job('id, finished_at')}"
                f" WHERE id <> %s), started_at) FROM {EVERY_JOB} WHERE id = %s", (group.callback, group.callback))
    callback_ms = int(cur.fetchone()[0]) / 1000
    _finish(bench, dsn, conn, workers)
    return rate, callback_ms, enqueue_s


def _chain(bench: Bench, name: str, steps: int) -> list[float]:
    """Milliseconds from each step's finish to the next step's start."""
    dsn, conn, cur, workers = _start(bench, name)
    try:
        with mysqlq.Producer(bench.settings(dsn)) as producer:
            ids = producer.chain(*[mysqlq.Job("bench.noop") for _ in range(steps)])
        wait_drained(cur, workers, timeout=120.0)
    finally:
        workers.stop()
    cur.execute(f"SELECT id, started_at, finished_at FROM {every_job('id, started_at, finished_at')} ORDER BY id")
    rows = {int(job_id): (started, finished) for job_id, started, finished in cur.fetchall()}
    _finish(bench, dsn, conn, workers)
    return [(rows[b][0] - rows[a][1]).total_seconds() * 1000 for a, b in itertools.pairwise(ids)]
