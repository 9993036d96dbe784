"""Every job, wherever it is: since schema 17 a job that ended done may have moved from the live table
``mysqlq_jobs`` into ``mysqlq_jobs_history`` (the same columns in the same order, but for the live
table's last two, a queued job's fairness key and turn, since schema 19; a job id is in exactly one of
the two), so a look at finished jobs, or at all of them, reads both. Reads of live rows only (ready,
scheduled, running, claims, leases) and writes keep ``mysqlq_jobs``."""

from __future__ import annotations

# The columns both tables have, in their order.
COLUMNS = ("id, queue, handler, payload, status, priority, run_at, attempts, max_attempts, time_limit, batch_id, "
           "worker_id, worker, lease_until, enqueued_at, started_at, finished_at, dedupe_key, last_error, "
           "dedupe_scope, running_batch, scheduled_at, concurrency_key, result, dependents, waiting_for, snoozes, "
           "progress, progress_note, tags, trace_context, run_trace_context")


def every_job(columns: str = COLUMNS, database: str = "") -> str:
    """A derived table of every job, live or moved to the history, to put where ``mysqlq_jobs`` would
    stand in a SELECT (``f"SELECT COUNT(*) FROM {EVERY_JOB} WHERE status = 'done'"``); its rows are
    named ``every_job``.

    ``columns``: every column both tables have by default; only those the query reads
    (``every_job("id, status")``), for a look over many jobs,
    polled or in a benchmark: the server writes a derived table of a UNION out whole before reading
    it, payloads and all for ``*`` (several µs a job), while a few indexed columns come off the
    indexes. ``database``: the tables' database, for a connection that uses none."""
    prefix = f"`{database}`." if database else ""
    return (f"(SELECT {columns} FROM {prefix}mysqlq_jobs UNION ALL SELECT {columns} FROM {prefix}mysqlq_jobs_history)"
            " AS every_job")


EVERY_JOB = every_job()
"""Every job of the connection's database, every column (see every_job)."""
