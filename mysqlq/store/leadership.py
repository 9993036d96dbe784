"""Leadership statements: a role's lease row (holder, epoch, lease_until), and the named lock that
wakes followers the moment a leader's connection dies."""

from __future__ import annotations

from dataclasses import dataclass

from mysqlq.store import execute
from mysqlq.store.db import Cursor


@dataclass(frozen=True)
class LeaderState:
    """Who holds a role, under which epoch, and for how many more seconds (negative: lapsed)."""

    worker_id: int | None
    epoch: int
    remaining: float


def state(cur: Cursor, role: str) -> LeaderState:
    execute(cur, "leader_state", {"role": role})
    row = cur.fetchone()
    if row is None:  # the migration creates the row; a missing one counts as lapsed
        return LeaderState(None, 0, -1.0)
    return LeaderState(None if row[0] is None else int(row[0]), int(row[1]), float(row[2]) / 1e6)


def acquire(cur: Cursor, role: str, worker_id: int, lease: float, steal: bool) -> int | None:
    """Take the role if its lease lapsed (or, with ``steal``, its holder's connection is gone);
    returns the new epoch, or None when someone else holds it."""
    params = {"role": role, "worker_id": worker_id, "lease_us": round(lease * 1e6), "steal": steal}
    if execute(cur, "acquire_leadership", params) != 1:
        return None
    execute(cur, "last_insert_id")
    row = cur.fetchone()
    return int(row[0]) if row else None


def renew(cur: Cursor, role: str, worker_id: int, epoch: int, lease: float) -> bool:
    """Extend the lease; False when another worker has taken the role over."""
    params = {"role": role, "worker_id": worker_id, "epoch": epoch, "lease_us": round(lease * 1e6)}
    return execute(cur, "renew_leadership", params) == 1


def release(cur: Cursor, role: str, worker_id: int, epoch: int) -> None:
    execute(cur, "release_leadership", {"role": role, "worker_id": worker_id, "epoch": epoch})


def try_lock(cur: Cursor, name: str, wait: float = 0.0) -> bool:
    """Take a named server lock, waiting up to ``wait`` seconds for it."""
    execute(cur, "get_lock", {"name": name, "timeout": wait})
    row = cur.fetchone()
    return bool(row and row[0] == 1)


def unlock(cur: Cursor, name: str) -> None:
    execute(cur, "release_lock", {"name": name})


def galera(cur: Cursor) -> bool:
    """True when the server is a node of a Galera cluster (wsrep_on)."""
    execute(cur, "wsrep_on")
    row = cur.fetchone()
    return row is not None and str(row[1]).upper() == "ON"
