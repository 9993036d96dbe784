"""W5, history: the W1 drain on an empty table, on one holding done jobs, and after a purge."""

from __future__ import annotations

import subprocess
from typing import Any

from mysqlq_harness.jobs import COLUMNS, every_job

import mysqlq
from benchmark.common import MYSQLQ, Bench, Figure, clean_env, dsn_url, emit, note, payload_bytes, timer
from benchmark.shared import Sizes, drain_mysqlq

HISTORY_COLUMNS = ("queue, handler, payload, status, priority, run_at, attempts, max_attempts, batch_id, worker_id,"
                   " worker, enqueued_at, started_at, finished_at")


def fill_history(cur: Any, rows: int) -> None:
    """``rows`` done jobs, by INSERT … SELECT doubling; ids and timestamps rise together (1 ms apart)."""
    cur.execute(f"INSERT INTO mysqlq_jobs ({HISTORY_COLUMNS}) VALUES ('default', 'bench.noop', %s, 'done', 0,"
                " NOW(6) - INTERVAL 2 HOUR, 1, 5, 1, 1, 'bench-history', NOW(6) - INTERVAL 2 HOUR,"
                " NOW(6) - INTERVAL 2 HOUR, NOW(6) - INTERVAL 2 HOUR)", (payload_bytes(0),))
    count = 1
    while count < rows:
        step = min(count, rows - count, 250_000)
        shift = f"INTERVAL {count * 1000} MICROSECOND"
        cur.execute(
            f"INSERT INTO mysqlq_jobs ({HISTORY_COLUMNS}) SELECT queue, handler, payload, status, priority,"
            f" run_at + {shift}, attempts, max_attempts, FLOOR(RAND() * 9000000000000000000), worker_id, worker,"
            f" enqueued_at + {shift}, started_at + {shift}, finished_at + {shift}"
            f" FROM mysqlq_jobs ORDER BY id LIMIT {step}")
        count += step
    move_into_history(cur)


def move_into_history(cur: Any, step: int = 250_000) -> None:
    """Where the schema has mysqlq_jobs_history (17 on), the done jobs just filled move there, as
    the worker moves each job that ends done: the live table then holds only what is live."""
    cur.execute("SELECT COUNT(*) FROM information_schema.tables WHERE table_schema = DATABASE()"
                " AND table_name = 'mysqlq_jobs_history'")
    if not int(cur.fetchone()[0]):
        return
    cur.execute("SELECT COALESCE(MIN(id), 0), COALESCE(MAX(id), 0) FROM mysqlq_jobs")
    low, high = (int(v) for v in cur.fetchone())
    while low <= high:
        cur.execute(f"INSERT INTO mysqlq_jobs_history SELECT {COLUMNS} FROM mysqlq_jobs"
                    " WHERE id >= %s AND id < %s AND status = 'done'", (low, low + step))
        cur.execute("DELETE FROM mysqlq_jobs WHERE id >= %s AND id < %s AND status = 'done'", (low, low + step))
        low += step


def purge(bench: Bench, dsn: mysqlq.Dsn, cur: Any) -> tuple[str, int]:
    """Delete every done job: ``mysqlq purge`` when this mysqlq has it, else chunked DELETEs."""
    cur.execute(f"SELECT COUNT(*) FROM {every_job('status')} WHERE status = 'done'")
    before = int(cur.fetchone()[0])
    help_text = subprocess.run([MYSQLQ, "purge", "--help"], capture_output=True, text=True, check=False)
    if help_text.returncode == 0 and "--done-older-than" in help_text.stdout:
        subprocess.run([MYSQLQ, "--dsn", dsn_url(dsn), "purge", "--done-older-than", "0"], check=True,
                       stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, env=clean_env({}))
        how = "mysqlq-purge"
    else:
        while cur.execute("DELETE FROM mysqlq_jobs WHERE status = 'done' LIMIT 10000"):
            pass
        how = "delete-chunks-10000"
    cur.execute(f"SELECT COUNT(*) FROM {every_job('status')} WHERE status = 'done'")
    return how, before - int(cur.fetchone()[0])


def w5(bench: Bench, sizes: Sizes, k: int = 2) -> list[Figure]:
    n = sizes.w1_jobs
    history = sizes.w5_history
    empty = Figure("W5", {"history": "0", "k": str(k), "n": str(n)}, spread=("jobs_s",))
    full = Figure("W5", {"history": str(history), "k": str(k), "n": str(n)}, spread=("jobs_s", "ratio_empty"))
    purged = Figure("W5", {"history": "purged", "k": str(k), "n": str(n)}, spread=("jobs_s", "ratio_empty"))
    dsn = bench.fresh("w5_history")
    conn = bench.connect(dsn)
    cur = conn.cursor()
    note(f"W5: filling {history} done rows")
    with timer() as tf:
        fill_history(cur, history)
    fill_fig = Figure("W5", {"step": "fill", "rows": str(history)})
    fill_fig.add(seconds=tf[0])
    for run in range(bench.runs):
        note(f"W5 run {run + 1}: K={k} drain on an empty table, then with {history} done rows")
        e = drain_mysqlq(bench, f"w5_empty_r{run}", k, n)
        f = drain_mysqlq(bench, f"w5_full_r{run}", k, n, dsn=dsn)
        empty.add(jobs_s=e.jobs_s, steady_jobs_s=e.steady_jobs_s)
        full.add(jobs_s=f.jobs_s, steady_jobs_s=f.steady_jobs_s, ratio_empty=f.jobs_s / e.jobs_s,
                 ratio_empty_steady=f.steady_jobs_s / e.steady_jobs_s)
    note("W5: purging the done rows")
    with timer() as tp:
        how, deleted = purge(bench, dsn, cur)
    purge_fig = Figure("W5", {"step": "purge", "how": how, "rows": str(deleted)})
    purge_fig.add(seconds=tp[0], rows_s=deleted / tp[0])
    for run in range(bench.runs):
        note(f"W5 run {run + 1}: K={k} drain after the purge")
        p = drain_mysqlq(bench, f"w5_purged_r{run}", k, n, dsn=dsn)
        base = empty.values["jobs_s"][run]
        purged.add(jobs_s=p.jobs_s, steady_jobs_s=p.steady_jobs_s, ratio_empty=p.jobs_s / base,
                   ratio_empty_steady=p.steady_jobs_s / empty.values["steady_jobs_s"][run])
    conn.close()
    bench.drop(dsn.database)
    return [emit(f) for f in (fill_fig, empty, full, purge_fig, purged)]
