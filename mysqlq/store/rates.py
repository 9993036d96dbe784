"""Rate limits' statements (``mysqlq/store/sql/rates.sql``): admitting claimed jobs of limited
buckets, setting aside those over the limit until their turn, and what operators set.

An admission first locks the rows of its batch's buckets, in order of name, so the starts and
waiting jobs of a bucket change one transaction at a time whoever changes them; then it works on
all of them at once, in a dozen statements. Every start is stamped with the server's clock
(``NOW(6)``, read under those locks), which makes the limit exact: a job is admitted only while
fewer than N starts of its bucket lie in the window ending now, so no window of the period's length
ever holds more than N. A window is the period and the grace within which an admitted job's handler
is entered (RateLimit.counted), so that holds for the handlers' entries too. Which jobs start and
when the others come back is mysqlq.core.rates.plan_turns.
"""

from __future__ import annotations

import datetime
import time
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
    from now, by job), held (their turn comes within the hold: still claimed, to be admitted again
    then; seconds from now, by job), or no longer ours; ``stamped``: the worker's monotonic time just
    before the server read the clock it stamped the starts with (no later than their stamp);
    ``stamps``: each admitted job's stamp as the server gave it, its start's started_at in
    mysqlq_rate_starts (:func:`wait_again` deletes that row if its handler is not entered in time)."""

    admitted: set[int] = field(default_factory=set)
    deferred: dict[int, float] = field(default_factory=dict)
    held: dict[int, float] = field(default_factory=dict)
    lost: list[int] = field(default_factory=list)
    stamped: float = 0.0
    stamps: dict[int, datetime.datetime] = field(default_factory=dict)


def _rows(name: str, rows: Sequence[Sequence[Any]]) -> str:
    marks = "(" + ", ".join(["%s"] * len(rows[0])) + ")"
    return query(name).replace("{rows}", ", ".join([marks] * len(rows)))


def _marks(count: int) -> str:
    return ", ".join(["%s"] * count)


def admit(cur: Cursor, batch_id: int, limited: Sequence[Limited], hold: float = 0.0) -> RateAdmission:
    """In one transaction, for a just-claimed batch: each limited job still ours starts now if its
    bucket has room and no job waits ahead of it, or is set aside as a scheduled job until its turn;
    when none starts now, one whose turn comes within ``hold`` seconds stays claimed (in the waiting
    list like the others), for its worker to admit again then (a job admitted now must not wait for
    it: its handler is entered within its limit's grace or not at all). Starts are counted over their
    limit's period and grace (RateLimit.counted). A dozen statements, whatever the number of buckets and jobs
    (one per bucket only to read the oldest starts of a bucket whose window is full)."""
    by_bucket: dict[str, list[Limited]] = {}
    for job in sorted(limited, key=lambda job: job.job_id):
        by_bucket.setdefault(job.bucket, []).append(job)
    names = sorted(by_bucket)
    result = RateAdmission()
    with transaction(cur.connection):
        cur.execute(_rows("lock_buckets", [(bucket,) for bucket in names]), names)  # in order: no deadlock
        execute_in(cur, "lock_batch_limited", [job.job_id for job in limited], before=(batch_id,))
        ours = {int(row[0]) for row in cur.fetchall()}
        live: dict[str, list[Limited]] = {}
        for bucket in names:
            jobs = [job for job in by_bucket[bucket] if job.job_id in ours]
            result.lost += [job.job_id for job in by_bucket[bucket] if job.job_id not in ours]
            if jobs:
                live[bucket] = jobs
        if live:
            _admit_buckets(cur, batch_id, live, result, hold)
    return result


@dataclass(frozen=True)
class _State:
    """A bucket's state under its lock: the server's time, the waiting list's tail, the window's
    starts (how many, the oldest), and whether a job set aside before waits ahead of this batch's."""

    now: datetime.datetime
    next_at: datetime.datetime | None
    count: int
    oldest: datetime.datetime | None
    queue_ahead: bool


def _admit_buckets(cur: Cursor, batch_id: int, live: dict[str, list[Limited]], result: RateAdmission,
                   hold: float) -> None:
    names = sorted(live)
    ids = [job.job_id for bucket in names for job in live[bucket]]
    states = _states(cur, live, ids)
    now = states[names[0]].now  # one statement's NOW(6), read under every bucket's lock
    keep = max([KEPT, *(jobs[0].limit.counted.period for jobs in live.values())])
    cur.execute(query("forget_starts").replace("{buckets}", _marks(len(names))),
                [*names, now, round(keep * 1e6)])
    pairs = [(bucket, job.job_id) for bucket in names for job in live[bucket]]
    _pairs(cur, "returning_jobs", pairs)
    returning = {(str(bucket), int(job_id)) for bucket, job_id in cur.fetchall()}
    deferred: dict[int, datetime.datetime] = {}
    admitted: list[tuple[str, int]] = []
    waiting: list[tuple[str, int]] = []
    tails: dict[str, datetime.datetime] = {}
    for bucket in names:
        limit, state = live[bucket][0].limit.counted, states[bucket]
        bucket_ids = [job.job_id for job in live[bucket]]
        starts = [state.oldest] if state.oldest is not None else []
        passing = min(state.count, state.count + len(bucket_ids) - limit.starts)  # starts these may wait for
        if passing > 1:
            execute(cur, "oldest_starts", {"bucket": bucket, "now": now, "period_us": round(limit.period * 1e6),
                                           "limit": passing})
            starts = [row[0] for row in cur.fetchall()]
        back = {job_id for job_id in bucket_ids if (bucket, job_id) in returning}
        turns = plan_turns(limit, now, state.count, starts, state.next_at, bucket_ids, back, state.queue_ahead)
        deferred.update(turns.deferred)
        admitted += [(bucket, job_id) for job_id in turns.admitted]
        waiting += [(bucket, job_id) for job_id in turns.waiting]
        if turns.next_at is not None:
            tails[bucket] = turns.next_at
    waits = {job_id: max(0.0, (at - now).total_seconds()) for job_id, at in deferred.items()}
    if not admitted:
        result.held.update((job_id, wait) for job_id, wait in waits.items() if wait <= hold)
    deferred = {job_id: at for job_id, at in deferred.items() if job_id not in result.held}
    if deferred:
        _set_aside(cur, batch_id, deferred)
        result.deferred.update((job_id, waits[job_id]) for job_id in deferred)
    if waiting:
        cur.execute(_rows("add_waiting", waiting), [value for pair in waiting for value in pair])
        cur.execute(query("set_next_at").replace("{turns}", " ".join(["WHEN %s THEN %s"] * len(tails)))
                    .replace("{buckets}", _marks(len(tails))),
                    [*(value for bucket in sorted(tails) for value in (bucket, tails[bucket])), *sorted(tails)])
    if admitted:  # last, and stamped as late as it can be: the handlers' grace runs from the stamp
        back_now = [pair for pair in admitted if pair in returning]
        if back_now:
            _pairs(cur, "stop_waiting", back_now)
        result.stamped = time.monotonic()  # before the server reads its clock for the stamp
        execute(cur, "start_stamp")
        stamp = cur.fetchone()[0]  # no later than commit: still under the buckets' locks, so no start came between
        stamped = [(bucket, stamp, job_id) for bucket, job_id in admitted]
        cur.execute(_rows("record_starts", stamped), [value for row in stamped for value in row])
        execute_in(cur, "restamp_started", [job_id for _, job_id in admitted], before=(stamp, batch_id))
        result.admitted.update(job_id for _, job_id in admitted)
        result.stamps.update((job_id, stamp) for _, job_id in admitted)


@dataclass(frozen=True)
class GivenBack:
    """An admitted job given back unrun: the bucket its start counts in and the start's stamp, as
    its admission had it from the server (RateAdmission.stamps)."""

    job_id: int
    bucket: str
    started_at: datetime.datetime


def wait_again(cur: Cursor, late: Sequence[GivenBack]) -> None:
    """Admitted jobs given back unrun (their handler was not entered within the grace) wait in their
    buckets again, so their next admission takes them as jobs that waited, ahead of new ones; and
    their starts count no more, since no handler was entered for them: each row deleted by its bucket,
    stamp and job, so that any other start of the job stays counted. Run it in the transaction that
    gives the jobs back."""
    if not late:
        return
    rows = [(given.bucket, given.started_at, given.job_id) for given in late]
    buckets, stamps = sorted({row[0] for row in rows}), sorted({row[1] for row in rows})
    sql = (query("uncount_starts").replace("{buckets}", _marks(len(buckets)))
           .replace("{stamps}", _marks(len(stamps))).replace("{rows}", ", ".join(["(%s, %s, %s)"] * len(rows))))
    cur.execute(sql, [*buckets, *stamps, *(value for row in rows for value in row)])
    pairs = [(bucket, job_id) for bucket, _, job_id in rows]
    cur.execute(_rows("add_waiting", pairs), [value for pair in pairs for value in pair])


def _pairs(cur: Cursor, name: str, pairs: Sequence[tuple[str, int]]) -> None:
    """Run a statement over (bucket, job id) pairs: ``{buckets}``, ``{ids}`` and ``{rows}``, in that order."""
    names, ids = sorted({bucket for bucket, _ in pairs}), sorted({job_id for _, job_id in pairs})
    sql = expand(name, len(ids)).replace("{buckets}", _marks(len(names)))
    cur.execute(sql.replace("{rows}", ", ".join(["(%s, %s)"] * len(pairs))),
                [*names, *ids, *(value for pair in pairs for value in pair)])


def _states(cur: Cursor, live: dict[str, list[Limited]], ids: list[int]) -> dict[str, _State]:
    """Every bucket's state in one statement (their rows are locked, so it is theirs until commit)."""
    names = sorted(live)
    periods = [value for bucket in names for value in (bucket, round(live[bucket][0].limit.counted.period * 1e6))]
    sql = (expand("bucket_states", len(ids)).replace("{periods}", " ".join(["WHEN %s THEN %s"] * len(names)))
           .replace("{buckets}", _marks(len(names))))
    cur.execute(sql, [*periods, *periods, *ids, *names])
    return {str(bucket): _State(now, next_at, int(count), oldest, bool(ahead))
            for bucket, now, next_at, count, oldest, ahead in cur.fetchall()}


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
