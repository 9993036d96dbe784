"""Queue statistics, as plain data for the CLI's table and JSON."""

from __future__ import annotations

from typing import Any

from .db import Cursor
from .jobs import STATUSES
from .store import execute
from .store import ops as ops_store

THROUGHPUT_WINDOW = 300.0  # seconds of history behind the done-per-minute figure


def _blank(queue: str, window: float) -> dict[str, Any]:
    return {"queue": queue, "counts": dict.fromkeys(STATUSES, 0), "oldest_ready_age": None, "paused": False,
            "throughput": {"window_s": window, "done": 0, "dead": 0, "done_per_min": 0.0}}


def queue_stats(cur: Cursor, window: float = THROUGHPUT_WINDOW) -> list[dict[str, Any]]:
    """One entry per queue: counts by status, the oldest ready job's age in seconds, whether it is
    paused, and its throughput: jobs that ended done or dead in the last ``window`` seconds."""
    execute(cur, "count_by_queue_status")
    found: dict[str, dict[str, Any]] = {}
    for queue, status, count in cur.fetchall():
        entry = found.setdefault(queue, _blank(queue, window))
        entry["counts"][status] = int(count)
    for queue in ops_store.paused_queues(cur):
        found.setdefault(queue, _blank(queue, window))["paused"] = True
    for queue, (done, dead) in ops_store.throughput(cur, window).items():
        rate = found.setdefault(queue, _blank(queue, window))["throughput"]
        rate.update(done=done, dead=dead, done_per_min=round(done * 60 / window, 2))
    execute(cur, "oldest_ready_age")
    for queue, age_us in cur.fetchall():
        if queue in found and age_us is not None:
            found[queue]["oldest_ready_age"] = max(0.0, age_us / 1e6)
    return [found[name] for name in sorted(found)]
