"""The concurrency limits' safety net, run by the leader: slots held by jobs that moved on without
giving them back (a worker killed between recording an outcome and settling its key, or a job the
reaper found out of attempts) are given back, and every few runs keys whose oldest waiting job could
run are settled too. See mysqlq.worker.limits for the worker's side. It also tidies the rate limits'
tables: starts too old for any window, jobs no longer waiting for their turn (cancelled, purged),
buckets no longer in use (mysqlq.worker.rates)."""

from __future__ import annotations

from functools import partial

from mysqlq import hint
from mysqlq.core.config import Settings
from mysqlq.core.logs import Log
from mysqlq.store import limits as store
from mysqlq.store import rates as rates_store
from mysqlq.store.db import Database

STARVED_EVERY = 5  # runs; looking for starved keys reads more than looking for stale holders


class LimitsSweep:
    """The leader's chore for concurrency keys; :meth:`run` returns seconds until the next run."""

    name = "limits"

    def __init__(self, settings: Settings, db: Database, log: Log) -> None:
        self.settings = settings
        self.db = db
        self.log = log
        self.runs = 0

    def elected(self) -> None:
        self.runs = 0

    def run(self) -> float:
        starved = self.runs % STARVED_EVERY == 0
        self.runs += 1
        self.db.run(rates_store.sweep)
        queues = self.sweep(starved)
        if queues:
            hint.notify(self.settings, queues)
        return self.settings.reap_interval

    def sweep(self, starved: bool) -> set[str]:
        """Settle the keys that need it; returns the queues that gained ready jobs."""
        keys = self.db.run(partial(store.unsettled_keys, starved=starved))
        if not keys:
            return set()
        queues: set[str] = self.db.run(partial(store.settle, keys=keys))
        self.log.info("limits.settled", keys=len(keys), queues=",".join(sorted(queues)))
        return queues
