"""Dedupe keys held for a period (``mysqlq/store/sql/dedupe_periods.sql``): taking one in the enqueue's
transaction, naming the job it was taken for, and forgetting the keys whose period has ended.

A key of this scope is a row of ``mysqlq_dedupe_periods``, apart from the job: the job may end,
move into the history or be deleted within the period, and the key stays taken until the period
ends; a job still live when it ends does not keep the next enqueue of its key from making a new one.
"""

from __future__ import annotations

from mysqlq.core.jobs import DedupePeriod
from mysqlq.store import execute
from mysqlq.store.db import Cursor


def take(cur: Cursor, period: DedupePeriod) -> int | None:
    """Take ``period.key`` for the period, in the caller's transaction (its row stays locked until it
    ends); None when taken, else the id of the job that holds it. Once taken, insert the job and
    :func:`hold` the key for it in the same transaction."""
    execute(cur, "take_dedupe_period", {"key": period.key, "period_us": period.microseconds})
    # The statement's insert id: LAST_INSERT_ID(job_id) when the key is held, 0 when it was taken.
    return int(cur.lastrowid or cur.connection.insert_id()) or None


def hold(cur: Cursor, period: DedupePeriod, job_id: int) -> None:
    """Name the job a key was just taken for (:func:`take`), in the same transaction."""
    execute(cur, "hold_dedupe_period", {"key": period.key, "job_id": job_id})


def holder(cur: Cursor, key: str) -> int | None:
    """The job holding ``key`` for a period that has not ended (None: no such key, or ended)."""
    execute(cur, "dedupe_period_job", {"key": key})
    row = cur.fetchone()
    return None if row is None else int(row[0])


def forget_expired(cur: Cursor, limit: int) -> int:
    """Delete up to ``limit`` keys whose period has ended (retention); returns how many."""
    return execute(cur, "delete_expired_dedupe_periods", {"limit": limit})
