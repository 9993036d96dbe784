"""Cancelling a running job: ``mysqlq cancel`` ends its row ``cancelled`` at once; the worker holding it
finds so within a second and asks the handler to stop. An ``async def`` handler is cancelled (it sees
``asyncio.CancelledError``); a ``def`` handler sees ``ctx.cancelled`` become true (``ctx.stop_if_cancelled()``
raises :class:`mysqlq.JobCancelled`). A handler that ignores the request keeps its time limit. Either
way the job stays cancelled and is not retried: the worker writes nothing more for it.

The watch runs on the worker's background thread (mysqlq.worker.background), once a second while the
worker holds jobs: one statement of primary-key lookups, none while it is idle.
"""

from __future__ import annotations

import time
from collections.abc import Iterable
from typing import Protocol

from mysqlq.core.logs import Log
from mysqlq.store import claims
from mysqlq.store.db import Cursor, Database

WATCH_EVERY = 1.0  # seconds between looks while jobs are in hand


class Stoppable(Protocol):
    def cancel(self) -> None: ...


class Cancels:
    """The jobs in hand and how to stop each one that has started, shared by the worker's main thread,
    its slots and its background thread. Every change is one operation on a built-in set or dict (atomic
    under the GIL), and each side writes before it reads what the other wrote, so no request is missed."""

    def __init__(self) -> None:
        self._in_hand: set[int] = set()
        self._stops: dict[int, Stoppable] = {}
        self.requested: set[int] = set()  # jobs in hand that were cancelled
        # The job running on the main thread, if any: one attribute replaced per job, cheaper than
        # an entry in _stops added and removed (the path of every quick job).
        self._here: tuple[int, Stoppable] | None = None

    def hold(self, ids: Iterable[int]) -> None:
        self._in_hand.update(ids)

    def let_go(self, ids: Iterable[int]) -> None:
        ids = list(ids)
        self._in_hand.difference_update(ids)
        if self.requested:
            self.requested.difference_update(ids)
        stops = self._stops
        if stops:
            for job_id in ids:
                stops.pop(job_id, None)

    def started(self, job_id: int, stop: Stoppable) -> None:
        """A job began: ``stop.cancel()`` asks it to stop (called from another thread)."""
        self._stops[job_id] = stop
        if job_id in self.requested:
            stop.cancel()

    def running_here(self, job_id: int, stop: Stoppable) -> None:
        """A job began on the main thread (which runs one at a time): like :meth:`started`."""
        self._here = (job_id, stop)
        if job_id in self.requested:
            stop.cancel()

    def in_hand(self) -> list[int]:
        return sorted(self._in_hand - self.requested)

    def request(self, ids: set[int]) -> None:
        fresh = (ids & self._in_hand) - self.requested
        self.requested |= fresh
        here = self._here
        for job_id in fresh:
            stop = self._stops.get(job_id)
            if stop is None and here is not None and here[0] == job_id:
                stop = here[1]
            if stop is not None:
                stop.cancel()


class CancelWatch:
    """A service of the background thread: looks for cancelled jobs among those in hand."""

    name = "cancel-watch"

    def __init__(self, db: Database, cancels: Cancels, log: Log) -> None:
        self.db = db
        self.cancels = cancels
        self.log = log
        self.next_at = time.monotonic() + WATCH_EVERY

    def on_connect(self, cur: Cursor) -> None:
        pass

    def run(self) -> None:
        self.next_at = time.monotonic() + WATCH_EVERY
        ids = self.cancels.in_hand()
        if not ids:
            return
        found = self.db.run(lambda cur: claims.cancelled_in_hand(cur, ids))
        if found:
            self.log.info("job.cancel_requested", job_ids=",".join(map(str, sorted(found))))
            self.cancels.request(found)
