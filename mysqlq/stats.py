"""Queue statistics, as plain data for the CLI's table and JSON."""

from __future__ import annotations

from typing import Any

from .db import Cursor
from .jobs import STATUSES
from .store import execute


def queue_stats(cur: Cursor) -> list[dict[str, Any]]:
    """One entry per queue: counts by status and the oldest ready job's age in seconds."""
    execute(cur, "count_by_queue_status")
    found: dict[str, dict[str, Any]] = {}
    for queue, status, count in cur.fetchall():
        blank = {"queue": queue, "counts": dict.fromkeys(STATUSES, 0), "oldest_ready_age": None}
        entry = found.setdefault(queue, blank)
        entry["counts"][status] = int(count)
    execute(cur, "oldest_ready_age")
    for queue, age_us in cur.fetchall():
        if queue in found and age_us is not None:
            found[queue]["oldest_ready_age"] = max(0.0, age_us / 1e6)
    return [found[name] for name in sorted(found)]
