"""Worker registry, heartbeats, lease extension and the reaper's statements."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from ..db import Cursor
from . import execute, execute_in


def register(cur: Cursor, name: str, host: str, pid: int, queues: Sequence[str]) -> int:
    execute(cur, "register_worker", {"name": name, "host": host, "pid": pid, "queues": ",".join(queues)})
    return int(cur.lastrowid or 0)


def heartbeat(cur: Cursor, worker_id: int) -> bool:
    """False when the registry row is gone (the reaper took us for dead)."""
    return execute(cur, "heartbeat", {"id": worker_id}) == 1


def extend_lease(cur: Cursor, batch_id: int, lease: float) -> int:
    return execute(cur, "extend_lease", {"batch_id": batch_id, "lease_us": round(lease * 1e6)})


def unregister(cur: Cursor, worker_id: int) -> None:
    execute(cur, "unregister_worker", {"id": worker_id})


def previous_lives(cur: Cursor, worker_id: int, name: str, host: str) -> list[int]:
    execute(cur, "previous_lives", {"id": worker_id, "name": name, "host": host})
    return [int(row[0]) for row in cur.fetchall()]


def dead_workers(cur: Cursor, stale: float, check_processlist: bool, uptime: float) -> list[tuple[int, Any, bool]]:
    """(id, heartbeat_at, stale) of workers with a stale heartbeat or a vanished connection."""
    params = {"stale_us": round(stale * 1e6), "check_processlist": check_processlist, "uptime_us": round(uptime * 1e6)}
    execute(cur, "dead_workers", params)
    return [(int(row[0]), row[1], bool(row[2])) for row in cur.fetchall()]


def names(cur: Cursor, worker_ids: Sequence[int]) -> dict[int, str]:
    """Registry names of these workers (for the reaper's log line)."""
    execute_in(cur, "worker_names", worker_ids)
    return {int(row[0]): str(row[1]) for row in cur.fetchall()}


def reap(cur: Cursor, worker_ids: Sequence[int], expired: bool) -> int:
    """Return running jobs of these workers (and, with ``expired``, of lapsed leases) to ready."""
    return execute_in(cur, "reap_jobs", worker_ids, expired)


def forget(cur: Cursor, worker_ids: Sequence[int]) -> int:
    return execute_in(cur, "delete_workers", worker_ids) if worker_ids else 0


def server_uptime(cur: Cursor) -> float:
    execute(cur, "server_uptime")
    row = cur.fetchone()
    return float(row[1]) if row else 0.0


def try_lock(cur: Cursor, name: str, wait: float = 0.0) -> bool:
    """Take a named server lock, waiting up to ``wait`` seconds for it."""
    execute(cur, "get_lock", {"name": name, "timeout": wait})
    row = cur.fetchone()
    return bool(row and row[0] == 1)


def listing(cur: Cursor) -> list[dict[str, Any]]:
    execute(cur, "list_workers")
    names = [d[0] for d in cur.description or ()]
    return [dict(zip(names, row, strict=True)) for row in cur.fetchall()]
