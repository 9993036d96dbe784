"""Reaping: giving the claims of dead workers back, for everyone, while this worker leads.

A worker is dead when its heartbeat is older than its own lease (recorded when it registered), or,
faster, when its connection is gone from the server's process list, seen twice with the same
heartbeat (a live worker whose connection was just replaced beats again at once; a dead one cannot).
Every few runs, claims whose lease lapsed are swept too (the slow path). The writes are fenced by the
leader's epoch: if another worker took the role over meanwhile, they change nothing.
"""

from __future__ import annotations

import time
from collections.abc import Callable

from mysqlq import hint
from mysqlq.core.config import Settings
from mysqlq.core.logs import Log
from mysqlq.leader.elector import Elector
from mysqlq.store import dependencies
from mysqlq.store import workers as store
from mysqlq.store.db import Cursor, Database, transaction

EXPIRED_SWEEP_EVERY = 5  # runs; the lease-expiry sweep is the slow path
CONFIRM_AFTER = 1.0  # seconds before the second look at a worker whose connection vanished


class Reaper:
    """The leader's chore of bringing back what dead workers held; :meth:`run` returns seconds until the next run."""

    name = "reaper"

    def __init__(self, settings: Settings, db: Database, log: Log, elector: Elector,
                 server_started: Callable[[], float], lost: Callable[[], None] = lambda: None) -> None:
        self.settings = settings
        self.db = db
        self.log = log
        self.elector = elector
        self.server_started = server_started  # monotonic time at which the server (re)started
        self.lost = lost  # told when a worker was found dead or jobs were given back (slots may be left held)
        self.runs = 0
        self._missing: dict[int, object] = {}  # workers whose connection vanished, by last heartbeat

    def elected(self) -> None:
        """A new leader reaps at once, lapsed leases included."""
        self.runs = 0

    def run(self) -> float:
        self.reap()
        # A worker whose connection vanished gets its second look sooner.
        interval = self.settings.reap_interval
        return min(CONFIRM_AFTER, interval) if self._missing else interval

    def reap(self) -> int:
        settings, fence = self.settings, self.elector.fence
        # Connection ids recorded before the server's last start mean nothing; the uptime is read
        # inside the unit, so that a reconnection during it (a restart) is taken into account.
        found = self.db.run(lambda cur: store.dead_workers(
            cur, settings.processlist_check, time.monotonic() - self.server_started()))
        missing = {worker_id: beat for worker_id, beat, stale in found if not stale}
        dead = [worker_id for worker_id, beat, stale in found
                if stale or self._missing.get(worker_id, object()) == beat]
        self._missing = missing
        sweep = self.runs % EXPIRED_SWEEP_EVERY == 0
        self.runs += 1
        if not dead and not sweep:
            return 0
        names = self.db.run(lambda cur: store.names(cur, dead)) if dead else {}
        reaped = self.db.run(lambda cur: store.reap(cur, dead, sweep, fence))
        reaped += self.db.run(lambda cur: _reap_parents(cur, dead, sweep, fence))
        forgotten = self.db.run(lambda cur: store.forget(cur, dead, fence)) if dead else 0
        if dead or reaped:
            self.lost()
        if reaped or forgotten:
            self.log.warning("reaper.reaped", jobs=reaped, epoch=fence.epoch, dead_workers=",".join(
                f"{names.get(worker_id, '?')}#{worker_id}" for worker_id in dead))
        if reaped:
            hint.notify(settings, [hint.ANY_QUEUE])
        return reaped


def _reap_parents(cur: Cursor, dead: list[int], sweep: bool, fence: store.Fence) -> int:
    """Jobs that others wait for and that reap_jobs left running (out of attempts): dead, and what
    waits for them released, in one transaction. Almost always there are none: one statement says
    so, without the transaction's two more (the idle leader runs this every sweep)."""
    if not dependencies.lost_parents(cur, dead, sweep, fence):
        return 0
    with transaction(cur.connection):
        return dependencies.reap_parents(cur, dead, sweep, fence)
