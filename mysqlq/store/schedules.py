"""Schedule state (``mysqlq/store/sql/schedules.sql``): per entry, the tick enqueued last and the one due next."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

from mysqlq.store import execute, execute_in, jobs
from mysqlq.store.db import Cursor, transaction


@dataclass(frozen=True)
class State:
    """What the database remembers of one entry (aware UTC datetimes)."""

    name: str
    timing: str
    last_tick: datetime | None
    next_tick: datetime
    enqueued_at: datetime | None
    last_job_id: int | None
    paused: bool = False


def _aware(moment: datetime | None) -> datetime | None:
    return None if moment is None else moment.replace(tzinfo=UTC)


def _naive(moment: datetime) -> datetime:
    """What a DATETIME column takes: the UTC wall time (sessions run in UTC, see mysqlq.store.db.connect)."""
    return moment.astimezone(UTC).replace(tzinfo=None)


def now(cur: Cursor) -> datetime:
    execute(cur, "schedule_now")
    row = cur.fetchone()
    assert row is not None and isinstance(row[0], datetime)
    return row[0].replace(tzinfo=UTC)


def _states(cur: Cursor) -> dict[str, State]:
    found = {}
    for name, timing, last_tick, next_tick, enqueued_at, last_job_id, paused in cur.fetchall():
        found[str(name)] = State(str(name), str(timing), _aware(last_tick), next_tick.replace(tzinfo=UTC),
                                 _aware(enqueued_at), None if last_job_id is None else int(last_job_id), bool(paused))
    return found


def states(cur: Cursor) -> dict[str, State]:
    execute(cur, "schedule_states")
    return _states(cur)


def states_page(cur: Cursor, limit: int) -> list[State]:
    """The first ``limit`` entries by name (the dashboard's page)."""
    execute(cur, "schedule_states_page", {"limit": limit})
    return list(_states(cur).values())


def set_paused(cur: Cursor, name: str, paused: bool) -> bool | None:
    """Pause or resume an entry; None when it has no state yet, else whether it was paused before."""
    execute(cur, "schedule_known", {"name": name})
    row = cur.fetchone()
    if row is None:
        return None
    execute(cur, "schedule_set_paused", {"name": name, "paused": int(paused)})
    return bool(row[0])


def skip(cur: Cursor, name: str, due: datetime, next_tick: datetime) -> bool:
    """A paused entry's tick passes unenqueued; False when another worker moved it first."""
    return execute(cur, "schedule_skip", {"name": name, "due": _naive(due), "next_tick": _naive(next_tick)}) == 1


def add(cur: Cursor, name: str, timing: str, next_tick: datetime) -> bool:
    """Start remembering an entry; False when another worker did so first."""
    return execute(cur, "schedule_add", {"name": name, "timing": timing, "next_tick": _naive(next_tick)}) == 1


def retime(cur: Cursor, name: str, old_timing: str, timing: str, next_tick: datetime) -> bool:
    params = {"name": name, "old_timing": old_timing, "timing": timing, "next_tick": _naive(next_tick)}
    return execute(cur, "schedule_retime", params) == 1


def enqueue_tick(cur: Cursor, name: str, row: Sequence[Any], due: datetime, tick: datetime,
                 next_tick: datetime) -> tuple[int, bool]:
    """In one transaction: enqueue a tick's job (``row`` as for insert_job, keyed by entry and tick) and
    advance the entry from ``due`` to ``next_tick``. Returns the job's id (the existing one when the tick
    was enqueued before) and whether this call advanced the entry (False: another worker did)."""
    with transaction(cur.connection):
        job_id = jobs.insert_job(cur, row)
        params = {"name": name, "due": _naive(due), "tick": _naive(tick), "next_tick": _naive(next_tick),
                  "job_id": job_id}
        advanced = execute(cur, "schedule_advance", params) == 1
    return job_id, advanced


def forget_others(cur: Cursor, names: Sequence[str]) -> int:
    """Delete the state of every entry not named; returns how many were deleted."""
    return execute_in(cur, "schedule_forget", names) if names else execute(cur, "schedule_forget_all")
