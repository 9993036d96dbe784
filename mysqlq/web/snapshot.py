"""A look at every queue in a few cheap statements, shared by /metrics and the dashboard."""

from __future__ import annotations

import threading
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

from mysqlq.core.jobs import LIVE
from mysqlq.core.rates import bucket_owner
from mysqlq.store import fairness
from mysqlq.store import ops as ops_store
from mysqlq.store import rates as rates_store
from mysqlq.store import web as web_store
from mysqlq.store import workers as worker_store
from mysqlq.store.db import Cursor

# Jobs count as finished for the counters once they ended this long ago: an outcome's finished_at is
# stamped when its statement runs and becomes visible at commit, a moment later.
SETTLE = 2.0
TOP_KEYS = 5  # the fairness keys with the largest backlogs of ready jobs shown per queue


@dataclass
class QueueView:
    """One queue: live counts by status, the oldest ready job's age, whether it is paused, and its
    ready jobs by fairness key (the largest backlogs, and how many keys have ready jobs)."""

    name: str
    counts: dict[str, int] = field(default_factory=lambda: dict.fromkeys(LIVE, 0))
    oldest_ready_age: float | None = None
    paused: bool = False
    capped: set[str] = field(default_factory=set)  # statuses counted only up to a cap (shown "N+")
    backlog: fairness.Backlog = field(default_factory=fairness.Backlog)  # keys with ready jobs, the largest few


def queues(cur: Cursor) -> list[QueueView]:
    """Every queue with its live counts (never a count of the history of done jobs); a queue with
    keyed ready jobs, and it alone, with its largest backlogs by key (which read each such job)."""
    names = web_store.queue_names(cur)
    views = {name: QueueView(name) for name in names}
    live = web_store.live_counts(cur, names)
    for (queue, status), count in live.by_status.items():
        views[queue].counts[status] = min(count, web_store.DEAD_CAP)
        if count > web_store.DEAD_CAP:
            views[queue].capped.add(status)
    for queue in live.keyed_ready:
        views[queue].backlog = fairness.backlog(cur, queue, TOP_KEYS)
    for queue in ops_store.paused_queues(cur):
        if queue in views:
            views[queue].paused = True
    for queue, age in web_store.oldest_ready_ages(cur).items():
        if queue in views:
            views[queue].oldest_ready_age = age
    return [views[name] for name in names]


@dataclass
class LimitView:
    """A rate limit in use, summed over its buckets (a handler's rate keys): starts in the last
    minute, jobs waiting for their turn, and how many keys are in use."""

    name: str  # "handler:NAME" or "queue:NAME"
    recent: int = 0
    waiting: int = 0
    keys: int = 0


def rate_limits(cur: Cursor) -> list[LimitView]:
    """Every rate limit in use (at most the buckets `mysqlq limits` lists), by handler or queue."""
    views: dict[str, LimitView] = {}
    for use in rates_store.buckets(cur, 60.0):
        name = ":".join(bucket_owner(use.bucket))
        view = views.setdefault(name, LimitView(name))
        view.recent += use.recent
        view.waiting += use.waiting
        view.keys += 1
    return [views[name] for name in sorted(views)]


def workers(cur: Cursor) -> list[dict[str, Any]]:
    """The registry (as `mysqlq workers` shows it), heartbeat ages in seconds."""
    rows = worker_store.listing(cur)
    for row in rows:
        row["age"] = row.pop("age_us") / 1e6
        row["heartbeat_age"] = row.pop("heartbeat_age_us") / 1e6
    return rows


class FinishedCounter:
    """Jobs that ended done, dead or cancelled since this process began counting, per queue.

    Derived from data the workers write anyway (finished_at and its index): each look counts the
    jobs that ended since the last one, so the workers pay nothing and a look reads only new rows.
    """

    def __init__(self, settle: float = SETTLE) -> None:
        self.settle = settle
        self._lock = threading.Lock()
        self._since: datetime | None = None
        self.totals: dict[tuple[str, str], int] = {}

    def update(self, cur: Cursor) -> dict[tuple[str, str], int]:
        with self._lock:
            upto = ops_store.cutoff(cur, self.settle)
            if self._since is not None and upto > self._since:
                for key, count in web_store.finished_between(cur, self._since, upto).items():
                    self.totals[key] = self.totals.get(key, 0) + count
            if self._since is None or upto > self._since:
                self._since = upto
            return dict(self.totals)
