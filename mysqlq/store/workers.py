"""Worker registry, heartbeats, lease extension and the reaper's statements."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from mysqlq.store import execute, execute_in
from mysqlq.store.db import Cursor


@dataclass(frozen=True)
class Registration:
    """Another registry row of a worker name on a host, as seen when a worker registers."""

    id: int
    pid: int
    heartbeat_age: float  # seconds
    lease: float  # the seconds that worker's claims last without a heartbeat


@dataclass(frozen=True)
class Fence:
    """The leadership a reaper write is made under; ``epoch=None``: no leadership needed."""

    leader_id: int | None = None
    epoch: int | None = None

    def params(self) -> tuple[int | None, int | None, int | None]:
        return (self.epoch, self.leader_id, self.epoch)


NO_FENCE = Fence()


def register(cur: Cursor, name: str, host: str, pid: int, queues: Sequence[str], heartbeat_interval: float,
             lease: float) -> int:
    params = {"name": name, "host": host, "pid": pid, "queues": ",".join(queues),
              "heartbeat_us": round(heartbeat_interval * 1e6), "lease_us": round(lease * 1e6)}
    execute(cur, "register_worker", params)
    return int(cur.lastrowid or 0)


def heartbeat(cur: Cursor, worker_id: int) -> bool:
    """False when the registry row is gone (the reaper took us for dead)."""
    return execute(cur, "heartbeat", {"id": worker_id}) == 1


def extend_lease(cur: Cursor, batch_id: int, lease: float) -> int:
    return execute(cur, "extend_lease", {"batch_id": batch_id, "lease_us": round(lease * 1e6)})


def unregister(cur: Cursor, worker_id: int) -> None:
    execute(cur, "unregister_worker", {"id": worker_id})


def same_name(cur: Cursor, worker_id: int, name: str, host: str) -> list[Registration]:
    """The other registrations of this name on this host, oldest first."""
    execute(cur, "same_name_workers", {"id": worker_id, "name": name, "host": host})
    return [Registration(int(row[0]), int(row[1]), row[2] / 1e6, row[3] / 1e6) for row in cur.fetchall()]


def dead_workers(cur: Cursor, check_processlist: bool, uptime: float) -> list[tuple[int, Any, bool]]:
    """(id, heartbeat_at, stale) of workers whose heartbeat is older than their own lease, or (when
    checked) whose connection vanished."""
    params = {"check_processlist": check_processlist, "uptime_us": round(uptime * 1e6)}
    execute(cur, "dead_workers", params)
    return [(int(row[0]), row[1], bool(row[2])) for row in cur.fetchall()]


def names(cur: Cursor, worker_ids: Sequence[int]) -> dict[int, str]:
    """Registry names of these workers (for the reaper's log line)."""
    execute_in(cur, "worker_names", worker_ids)
    return {int(row[0]): str(row[1]) for row in cur.fetchall()}


def reap(cur: Cursor, worker_ids: Sequence[int], expired: bool, fence: Fence = NO_FENCE) -> int:
    """Return running jobs of these workers (and, with ``expired``, of lapsed leases) to ready;
    nothing when ``fence`` names a leadership that has passed to another worker."""
    return execute_in(cur, "reap_jobs", worker_ids, expired, *fence.params())


def forget(cur: Cursor, worker_ids: Sequence[int], fence: Fence = NO_FENCE) -> int:
    return execute_in(cur, "delete_workers", worker_ids, *fence.params()) if worker_ids else 0


def server_uptime(cur: Cursor) -> float:
    execute(cur, "server_uptime")
    row = cur.fetchone()
    return float(row[1]) if row else 0.0


def listing(cur: Cursor) -> list[dict[str, Any]]:
    execute(cur, "list_workers")
    names = [d[0] for d in cur.description or ()]
    return [dict(zip(names, row, strict=True)) for row in cur.fetchall()]
