"""The concurrency limits' safety net, run by the leader: slots held by jobs that moved on without
giving them back (a worker killed between recording an outcome and giving the slot back, or a job
the reaper found out of attempts) are given back, and every few runs keys whose oldest waiting job
could run are settled too. See mysqlq.worker.intake.concurrency_admission for the worker's side.

Each run is one statement, which also says whether any slot is held or any job waits for one. While
one is, the sweep runs every ``reap_interval``; while none is (concurrency limits unused, or every
job that used them ended and gave its slot back), it looks again only every ``IDLE_EVERY`` seconds,
and at once when the reaper finds a dead worker or gives jobs back (the maintainer sees to it): the
events that leave a slot held by a job that moved on.
"""

from __future__ import annotations

from functools import partial

from mysqlq import hint
from mysqlq.core.config import Settings
from mysqlq.core.logs import Log
from mysqlq.store import limits as store
from mysqlq.store.db import Database

STARVED_EVERY = 5  # runs; looking for starved keys reads more than looking for stale holders
IDLE_EVERY = 60.0  # seconds between looks while no slot is held and no job waits for one


class LimitsSweep:
    """The leader's chore for concurrency keys; :meth:`run` returns seconds until the next run."""

    name = "limits"

    def __init__(self, settings: Settings, db: Database, log: Log) -> None:
        self.settings = settings
        self.db = db
        self.log = log
        self.runs = 0
        self.in_use = True  # until a look says otherwise

    def elected(self) -> None:
        self.runs = 0

    def run(self) -> float:
        starved = self.runs % STARVED_EVERY == 0
        self.runs += 1
        queues = self.sweep(starved)
        if queues:
            hint.notify(self.settings, queues)
        return self.settings.reap_interval if self.in_use else max(IDLE_EVERY, self.settings.reap_interval)

    def sweep(self, starved: bool) -> set[str]:
        """Settle the keys that need it; returns the queues that gained ready jobs."""
        found = self.db.run(partial(store.unsettled_keys, starved=starved))
        self.in_use = found.in_use
        if not found.keys:
            return set()
        queues: set[str] = self.db.run(partial(store.settle, keys=found.keys))
        self.log.info("limits.settled", keys=len(found.keys), queues=",".join(sorted(queues)))
        return queues
