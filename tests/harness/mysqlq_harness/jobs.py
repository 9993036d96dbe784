"""Every job, wherever it is: since schema 17 a job that ended done may have moved from the live table
``mysqlq_jobs`` into ``mysqlq_jobs_history`` (the same columns in the same order; a job id is in
exactly one of the two), so a look at finished jobs, or at all of them, reads both. Reads of live rows
only (ready, scheduled, running, claims, leases) and writes keep ``mysqlq_jobs``."""

from __future__ import annotations


def every_job(columns: str = "*", database: str = "") -> str:
    """A derived table of every job, live or moved to the history, to put where ``mysqlq_jobs`` would
    stand in a SELECT (``f"SELECT COUNT(*) FROM {EVERY_JOB} WHERE status = 'done'"``); its rows are
    named ``every_job``.

    ``columns``: only those the query reads (``every_job("id, status")``), for a look over many jobs,
    polled or in a benchmark: the server writes a derived table of a UNION out whole before reading
    it, payloads and all for ``*`` (several µs a job), while a few indexed columns come off the
    indexes. ``database``: the tables' database, for a connection that uses none."""
    prefix = f"`{database}`." if database else ""
    return (f"(SELECT {columns} FROM {prefix}mysqlq_jobs UNION ALL SELECT {columns} FROM {prefix}mysqlq_jobs_history)"
            " AS every_job")


EVERY_JOB = every_job()
"""Every job of the connection's database, every column (see every_job)."""
