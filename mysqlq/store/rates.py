"""Rate limits' statements (``mysqlq/store/sql/rates.sql``): admitting claimed jobs of limited
buckets, setting aside those over the limit until their turn, and what operators set.

An admission works bucket by bucket, in bucket order, each bucket's row locked first, so the starts
and waiting jobs of a bucket change one transaction at a time whoever changes them. Every start is
stamped with the server's clock (``NOW(6)``, read under that lock), which makes the limit exact: a
job is admitted only while fewer than N starts of its bucket lie in the window ending now, so no
window of the period's length ever holds more than N.
"""

from __future__ import annotations

import datetime
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from mysqlq.core.rates import RateLimit, plan_turns
from mysqlq.store import execute, execute_in, expand
from mysqlq.store.db import Cursor, transaction
from mysqlq.store.sql import query

LISTED = 1000  # buckets `mysqlq limits` lists at most
SWEEP = 1000  # rows the leader's sweep deletes at a time
KEPT = 60.0  # seconds a start is kept at least, whatever the period: `mysqlq limits` and /metrics show the last minute


@dataclass(frozen=True)
class Limited:
    """A claimed job whose start counts in ``bucket``, limited to ``limit``."""

    job_id: int
    bucket: str
    limit: RateLimit


@dataclass
class RateAdmission:
    """What admission did with a batch's limited jobs: may start now, set aside until a time (seconds
    from now, by job), or no longer ours."""

    admitted: set[int] = field(default_factory=set)
    deferred: dict[int, float] = field(default_factory=dict)
    lost: list[int] = field(default_factory=list)


def _rows(name: str, rows: Sequence[Sequence[Any]]) -> str:
    marks = "(" + ", ".join(["%s"] * len(rows[0])) + ")"
    return query(name).replace("{rows}", ", ".join([marks] * len(rows)))


def admit(cur: Cursor, batch_id: int, limited: Sequence[Limited]) -> RateAdmission:
    """In one transaction, for a just-claimed batch: each limited job still ours starts now if its
    bucket has room and no job waits ahead of it, or is set aside as a scheduled job until its turn."""
    by_bucket: dict[str, list[Limited]] = {}
    for job in sorted(limited, key=lambda job: job.job_id):
        by_bucket.setdefault(job.bucket, []).append(job)
    result = RateAdmission()
    with transaction(cur.connection):
        for bucket in sorted(by_bucket):
            execute(cur, "lock_bucket", {"bucket": bucket})
        execute_in(cur, "lock_batch_limited", [job.job_id for job in limited], before=(batch_id,))
        ours = {int(row[0]) for row in cur.fetchall()}
        for bucket in sorted(by_bucket):
            jobs = [job for job in by_bucket[bucket] if job.job_id in ours]
            result.lost += [job.job_id for job in by_bucket[bucket] if job.job_id not in ours]
            if jobs:
                _admit_bucket(cur, batch_id, bucket, jobs, result)
    return result


def _admit_bucket(cur: Cursor, batch_id: int, bucket: str, jobs: list[Limited], result: RateAdmission) -> None:
    limit = jobs[0].limit
    params = {"bucket": bucket, "period_us": round(limit.period * 1e6)}
    execute(cur, "bucket_state", params)
    now, next_at, count, oldest = cur.fetchone()
    count = int(count)
    execute(cur, "forget_starts", {"bucket": bucket, "now": now, "keep_us": round(max(limit.period, KEPT) * 1e6)})
    ids = [job.job_id for job in jobs]
    execute_in(cur, "returning_jobs", ids, before=(bucket,))
    returning = {int(row[0]) for row in cur.fetchall()}
    execute_in(cur, "first_waiting", ids, before=(bucket,))
    queue_ahead = cur.fetchone() is not None  # a job set aside before and not in this batch goes first
    starts = [oldest] if oldest is not None else []
    passing = min(count, count + len(ids) - limit.starts)  # starts whose leaving the window these may wait for
    if passing > 1:
        execute(cur, "oldest_starts", {**params, "now": now, "limit": passing})
        starts = [row[0] for row in cur.fetchall()]
    turns = plan_turns(limit, now, count, starts, next_at, ids, returning, queue_ahead)
    if turns.deferred:
        _set_aside(cur, batch_id, turns.deferred)
        result.deferred.update((job_id, max(0.0, (at - now).total_seconds())) for job_id, at in turns.deferred.items())
    admitted = turns.admitted
    if admitted:
        cur.execute(_rows("record_starts", [(bucket, now, job_id) for job_id in admitted]),
                    [value for job_id in admitted for value in (bucket, now, job_id)])
        execute_in(cur, "restamp_started", admitted, before=(now, batch_id))
        if returning & set(admitted):
            execute_in(cur, "stop_waiting", sorted(returning & set(admitted)), before=(bucket,))
        result.admitted.update(admitted)
    if turns.waiting:
        cur.execute(_rows("add_waiting", [(bucket, job_id) for job_id in turns.waiting]),
                    [value for job_id in turns.waiting for value in (bucket, job_id)])
        execute(cur, "set_next_at", {"bucket": bucket, "next_at": turns.next_at})


def _set_aside(cur: Cursor, batch_id: int, deferred: dict[int, datetime.datetime]) -> None:
    """One statement for a bucket's jobs over the limit: each a scheduled job until its turn."""
    ids = sorted(deferred)
    turns = [value for job_id in ids for value in (job_id, deferred[job_id])]
    sql = expand("set_aside_jobs", len(ids)).replace("{turns}", " ".join(["WHEN %s THEN %s"] * len(ids)))
    cur.execute(sql, [*turns, *turns, batch_id, *ids])


@dataclass(frozen=True)
class Override:
    """A limit an operator set: for a handler or a queue; ``limit`` None: lifted."""

    scope: str
    name: str
    limit: RateLimit | None


def overrides(cur: Cursor) -> list[Override]:
    execute(cur, "rate_overrides")
    return [Override(str(scope), str(name),
                     RateLimit(int(starts), int(period_us) / 1e6) if starts is not None else None)
            for scope, name, starts, period_us in cur.fetchall()]


def set_limit(cur: Cursor, scope: str, name: str, limit: RateLimit | None) -> None:
    execute(cur, "set_rate_limit", {"scope": scope, "name": name,
                                    "max_starts": limit.starts if limit else None,
                                    "period_us": round(limit.period * 1e6) if limit else None})


def reset_limit(cur: Cursor, scope: str, name: str) -> int:
    return execute(cur, "reset_rate_limit", {"scope": scope, "name": name})


@dataclass(frozen=True)
class BucketUse:
    """A bucket in use: its starts in the window asked for, and the jobs waiting for their turn."""

    bucket: str
    recent: int
    waiting: int
    next_at: datetime.datetime | None


def buckets(cur: Cursor, window: float) -> list[BucketUse]:
    execute(cur, "bucket_listing", {"window_us": round(window * 1e6), "limit": LISTED})
    return [BucketUse(str(bucket), int(recent), int(waiting), next_at)
            for bucket, next_at, recent, waiting in cur.fetchall()]


def recent_starts(cur: Cursor, bucket: str, period: float) -> int:
    """How many jobs of a bucket started in the last ``period`` seconds."""
    execute(cur, "recent_starts", {"bucket": bucket, "period_us": round(period * 1e6)})
    return int(cur.fetchone()[0])


def sweep(cur: Cursor) -> int:
    """The leader's tidying: old starts, jobs no longer waiting, buckets no longer in use."""
    removed = execute(cur, "sweep_rate_starts", {"limit": SWEEP})
    removed += execute(cur, "sweep_rate_waiting")
    return removed + execute(cur, "sweep_rate_buckets", {"limit": SWEEP})
