"""Operator statements (``mysqlq/sql/ops.sql``): inspect jobs, retry, cancel, pause, throughput, retention."""

from __future__ import annotations

import datetime as dt
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from ..db import Cursor
from . import execute, execute_in
from . import limits as limits_store

# The smallest run_at there is: where a walk of (status, run_at) starts.
START = dt.datetime(1000, 1, 1)


def _rows(cur: Cursor) -> list[dict[str, Any]]:
    names = [d[0] for d in cur.description or ()]
    return [dict(zip(names, row, strict=True)) for row in cur.fetchall()]


def list_jobs(cur: Cursor, *, queue: str | None, status: str | None, handler: str | None,
              limit: int) -> list[dict[str, Any]]:
    execute(cur, "list_jobs", {"queue": queue, "status": status, "handler": handler, "limit": limit})
    return _rows(cur)


def get_job(cur: Cursor, job_id: int) -> dict[str, Any] | None:
    execute(cur, "get_job", {"id": job_id})
    rows = _rows(cur)
    return rows[0] if rows else None


@dataclass(frozen=True)
class Change:
    """What an operator's change to named jobs did: how many changed, and the queues they are in."""

    changed: int
    queues: frozenset[str]


def change_jobs(cur: Cursor, statement: str, ids: Sequence[int], allowed: Sequence[str],
                check: Any) -> Change:
    """In one short transaction: lock the named jobs, let ``check(found)`` refuse (by raising), then
    run ``statement`` over them. ``found`` maps each existing id to (status, queue)."""
    conn = cur.connection
    conn.begin()
    try:
        execute_in(cur, "lock_jobs", ids)
        found = {int(row[0]): (str(row[1]), str(row[2])) for row in cur.fetchall()}
        check(found)
        changed = execute_in(cur, statement, ids)
        if statement == "cancel_jobs":  # jobs with a concurrency key: slots given back, waits ended
            limits_store.settle_keys(cur, limits_store.keys_of(cur, ids))
        conn.commit()
    except BaseException:
        conn.rollback()
        raise
    queues = frozenset(queue for status, queue in found.values() if status in allowed)
    return Change(changed, queues)


def dead_jobs(cur: Cursor, queue: str | None, limit: int) -> list[tuple[int, str]]:
    execute(cur, "dead_jobs", {"queue": queue, "limit": limit})
    return [(int(row[0]), str(row[1])) for row in cur.fetchall()]


def retry_jobs(cur: Cursor, ids: Sequence[int]) -> int:
    """Bring these jobs back to ready if they are (still) dead; returns how many were."""
    return execute_in(cur, "retry_jobs", ids) if ids else 0


def queue_paused(cur: Cursor, name: str) -> bool | None:
    """True or False, or None when the queue was never paused or resumed."""
    execute(cur, "queue_paused", {"name": name})
    row = cur.fetchone()
    return None if row is None else bool(row[0])


def queue_has_jobs(cur: Cursor, name: str) -> bool:
    execute(cur, "queue_has_jobs", {"name": name})
    row = cur.fetchone()
    return bool(row and row[0])


def set_paused(cur: Cursor, name: str, paused: bool) -> None:
    execute(cur, "set_paused", {"name": name, "paused": paused})


def paused_queues(cur: Cursor) -> list[str]:
    execute(cur, "paused_queues")
    return [str(row[0]) for row in cur.fetchall()]


def throughput(cur: Cursor, window: float) -> dict[str, tuple[int, int]]:
    """Per queue: (done, dead) jobs that ended in the last ``window`` seconds."""
    execute(cur, "throughput", {"window_us": round(window * 1e6)})
    return {str(row[0]): (int(row[1] or 0), int(row[2] or 0)) for row in cur.fetchall()}


def cutoff(cur: Cursor, age: float) -> dt.datetime:
    """The server's time ``age`` seconds ago."""
    execute(cur, "cutoff", {"age_us": round(age * 1e6)})
    row = cur.fetchone()
    assert row is not None and isinstance(row[0], dt.datetime)
    return row[0]


def count_expired(cur: Cursor, status: str, before: dt.datetime, queue: str | None = None) -> int:
    execute(cur, "count_expired", {"status": status, "cutoff": before, "queue": queue})
    row = cur.fetchone()
    return int(row[0]) if row else 0


@dataclass
class Walk:
    """Where a retention walk of one status stands: the last (run_at, id) it went past."""

    status: str
    before: dt.datetime
    queue: str | None = None
    after_run_at: dt.datetime = START
    after_id: int = 0
    done: bool = False


def delete_expired(cur: Cursor, walk: Walk, limit: int) -> int:
    """Delete the next ``limit`` expired jobs of the walk: one plain read on (status, run_at), then one
    short autocommit DELETE by primary key. Returns how many were deleted; sets ``walk.done`` at the end."""
    params = {"status": walk.status, "cutoff": walk.before, "queue": walk.queue, "limit": limit,
              "after_run_at": walk.after_run_at, "after_id": walk.after_id}
    execute(cur, "expired_jobs", params)
    rows = cur.fetchall()
    if len(rows) < limit:
        walk.done = True
    if not rows:
        return 0
    walk.after_id, walk.after_run_at = int(rows[-1][0]), rows[-1][1]
    return execute_in(cur, "delete_jobs", [int(row[0]) for row in rows], walk.status, walk.before)


def claim_turn(cur: Cursor, task: str, interval: float) -> bool:
    """True when a periodic task was due and this caller now has its turn (for ``interval`` seconds)."""
    return execute(cur, "claim_maintenance", {"task": task, "interval_us": round(interval * 1e6)}) > 0


def due_again(cur: Cursor, task: str) -> None:
    execute(cur, "maintenance_due", {"task": task})
