"""Concurrency limits' statements (``mysqlq/store/sql/limits.sql``): admitting claimed jobs that carry a
key, and settling keys: slots given back by jobs that moved on, the oldest waiting jobs made ready.

Every function here works key by key, in key order, each key's row in ``mysqlq_semaphores`` locked
first, so that the holders and waiters of a key change one transaction at a time whoever changes
them (workers admitting, workers giving slots back, the leader's sweep, an operator's cancel).
"""

from __future__ import annotations

from collections.abc import Collection, Sequence
from dataclasses import dataclass, field

from mysqlq.store import execute, execute_in
from mysqlq.store.db import Cursor, transaction

SCAN = 100  # waiting jobs read at a time when making jobs ready
SWEEP = 100  # keys the leader settles per sweep


@dataclass(frozen=True)
class Keyed:
    """A claimed job that carries a key, and the limit of its handler."""

    job_id: int
    key: str
    limit: int


@dataclass
class Admission:
    """What admission did with a batch's keyed jobs: may run, set aside (blocked), or no longer ours."""

    admitted: set[int] = field(default_factory=set)
    blocked: list[Keyed] = field(default_factory=list)
    lost: list[int] = field(default_factory=list)


def _lock(cur: Cursor, key: str) -> set[int]:
    """Lock a key and return the jobs holding its slots, after giving back the slots of holders that
    no longer need them (ended, waiting to retry, deleted)."""
    execute(cur, "lock_semaphore", {"key": key})
    execute(cur, "semaphore_holders", {"key": key})
    holders = {int(row[0]) for row in cur.fetchall()}
    if holders:
        execute_in(cur, "live_holders", sorted(holders))
        live = {int(row[0]) for row in cur.fetchall()}
        if live != holders:
            execute_in(cur, "drop_holders", sorted(holders - live), before=(key,))
        holders = live
    return holders


def _unblock(cur: Cursor, key: str, holders: set[int]) -> list[int]:
    """Make the oldest waiting jobs of a key ready while fewer than each one's limit hold the key;
    they take their slots now. Returns their ids."""
    promoted: list[int] = []
    while True:
        execute(cur, "first_blocked", {"key": key, "limit": SCAN})
        rows = [(int(job_id), int(limit)) for job_id, limit in cur.fetchall()]
        if not rows:
            return promoted
        execute_in(cur, "still_blocked", [job_id for job_id, _ in rows])
        waiting = {int(row[0]) for row in cur.fetchall()}
        settled: list[int] = []
        full = False
        for job_id, limit in rows:
            if job_id in waiting:
                if len(holders) >= limit:
                    full = True  # first in, first out: a later job never passes the oldest
                    break
                holders.add(job_id)
                promoted.append(job_id)
                execute(cur, "add_holder", {"key": key, "job_id": job_id})
            settled.append(job_id)  # given a slot, or cancelled meanwhile: it waits no more
        if settled:
            execute_in(cur, "drop_blocked", settled, before=(key,))
        if full or len(rows) < SCAN:
            break
    if promoted:
        execute_in(cur, "unblock_jobs", promoted)
    return promoted


def admit(cur: Cursor, batch_id: int, keyed: Sequence[Keyed]) -> Admission:
    """In one transaction, for a just-claimed batch: each keyed job still ours takes a slot of its
    key (or keeps the one it holds), or, when fewer than its limit are free, is set aside as blocked."""
    by_key: dict[str, list[Keyed]] = {}
    for job in keyed:
        by_key.setdefault(job.key, []).append(job)
    result = Admission()
    with transaction(cur.connection):
        holders = {key: _lock(cur, key) for key in sorted(by_key)}
        execute_in(cur, "lock_batch_keyed", [job.job_id for job in keyed], before=(batch_id,))
        ours = {int(row[0]) for row in cur.fetchall()}
        for key in sorted(by_key):
            held = holders[key]
            for job in by_key[key]:
                if job.job_id not in ours:
                    result.lost.append(job.job_id)
                elif job.job_id in held:
                    result.admitted.add(job.job_id)
                elif len(held) < job.limit:
                    execute(cur, "add_holder", {"key": key, "job_id": job.job_id})
                    held.add(job.job_id)
                    result.admitted.add(job.job_id)
                elif execute(cur, "block_job", {"id": job.job_id, "batch_id": batch_id}):
                    execute(cur, "add_blocked", {"key": key, "job_id": job.job_id, "limit": job.limit})
                    result.blocked.append(job)
                else:
                    result.lost.append(job.job_id)
            execute(cur, "tidy_semaphore", {"key": key})
    return result


def settle_keys(cur: Cursor, keys: Collection[str]) -> set[str]:
    """Settle keys inside the caller's transaction; returns the queues of the jobs made ready."""
    promoted: list[int] = []
    for key in sorted(set(keys)):
        promoted += _unblock(cur, key, _lock(cur, key))
        execute(cur, "tidy_semaphore", {"key": key})
    if not promoted:
        return set()
    execute_in(cur, "ready_queues", promoted)
    return {str(row[0]) for row in cur.fetchall()}


def settle(cur: Cursor, keys: Collection[str]) -> set[str]:
    """In one transaction: give back the slots of these keys' holders that moved on (done, dead,
    waiting to retry...) and make the oldest waiting jobs ready in their place. Safe to repeat, and
    whoever runs it: it reads what each job is now, not what the caller believes."""
    with transaction(cur.connection):
        queues = settle_keys(cur, keys)
    return queues


def keys_of(cur: Cursor, ids: Sequence[int]) -> list[str]:
    """The concurrency keys the listed jobs carry."""
    if not ids:
        return []
    execute_in(cur, "keys_of_jobs", ids)
    return [str(row[0]) for row in cur.fetchall()]


@dataclass(frozen=True)
class Unsettled:
    """What the leader's look at the keys found: the keys to settle, and whether any slot is held or
    any job waits for one (when none is, concurrency limits are not in use right now)."""

    keys: list[str]
    in_use: bool


def unsettled_keys(cur: Cursor, starved: bool) -> Unsettled:
    """Keys the leader should settle: a slot held by a job that moved on, and (``starved``, the
    slower check) a waiting job that could run now. One statement, which also says whether the
    limits are in use."""
    execute(cur, "stale_or_starved_keys" if starved else "stale_holder_keys", {"limit": SWEEP})
    keys = [row[0] for row in cur.fetchall()]
    return Unsettled(sorted({str(key) for key in keys if key is not None}), in_use=None not in keys)
