"""The registry's hint columns: where each worker takes network hints, and the key that signs them."""

from __future__ import annotations

from dataclasses import dataclass

from mysqlq.store import execute
from mysqlq.store.db import Cursor


@dataclass(frozen=True)
class Registered:
    """One registered worker as a producer sees it (``addr`` None: no network hints)."""

    host: str
    pid: int
    queues: frozenset[str]
    addr: str | None
    key: bytes | None


def record(cur: Cursor, worker_id: int, addr: str | None, key: bytes | None) -> None:
    execute(cur, "record_hint_address", {"id": worker_id, "addr": addr, "key": key})


def registered(cur: Cursor) -> list[Registered]:
    execute(cur, "hint_targets")
    return [Registered(str(host), int(pid), frozenset(str(queues).split(",")), addr, bytes(key) if key else None)
            for host, pid, queues, addr, key in cur.fetchall()]
