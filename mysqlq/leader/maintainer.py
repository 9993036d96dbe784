"""The maintainer: while this worker leads, it runs the chores every worker shares, each on its own
schedule; while another leads, it only watches the election.

The chores are the reaper (mysqlq.leader.reaper), retention (mysqlq.leader.retention), recurring
jobs (mysqlq.leader.scheduler), the concurrency limits' sweep (mysqlq.leader.limits_sweep) and the
rate limits' tidying (mysqlq.leader.rates_sweep). Each has ``name`` and ``run()``, which returns the
seconds until it wants to run again: a chore for a feature not in use asks rarely, so that an idle
queue costs the server little more than the workers' polls and heartbeats (tests/cost/test_idle_cost.py
counts it). Before a round of chores the leader renews its lease (a statement only once half of it
has passed), so that a leader that lost the role does nothing more; the chores' writes are fenced by
its epoch besides.
"""

from __future__ import annotations

import time
from typing import Protocol

from mysqlq.core.config import Settings
from mysqlq.core.logs import Log
from mysqlq.leader.elector import Elector
from mysqlq.leader.limits_sweep import LimitsSweep
from mysqlq.leader.rates_sweep import RatesSweep
from mysqlq.leader.reaper import Reaper
from mysqlq.leader.retention import Retention
from mysqlq.store import leadership as store
from mysqlq.store import workers as worker_store
from mysqlq.store.db import Cursor, Database

SCHEDULE_AFTER_ERROR = 5.0  # seconds before a chore that failed runs again


class Chore(Protocol):
    name: str

    def elected(self) -> None: ...

    def run(self) -> float: ...


class Maintainer:
    """A service of the worker's background thread (mysqlq.worker.background): ``next_at`` says when
    it wants to run, :meth:`run` does what is due then."""

    name = "maintainer"

    def __init__(self, settings: Settings, db: Database, log: Log, elector: Elector) -> None:
        self.elector = elector
        self.log = log
        self.server_started = 0.0  # monotonic time at which the server (re)started
        # A bad schedule file is refused here, before the worker registers.
        self.limits = LimitsSweep(settings, db, log)
        self.chores: list[Chore] = [
            # The reaper comes first: the limits' sweep it calls for (lost) runs in the same round.
            Reaper(settings, db, log, elector, lambda: self.server_started, lost=self._lost),
            self.limits,
            RatesSweep(settings, db, log),
            Retention(settings, db, log),
        ]
        if settings.schedule:  # without a file the scheduler has nothing to do (and its imports, cron
            # expressions, time zones and TOML, are left out of the worker's start)
            from mysqlq.leader.scheduler import Scheduler

            self.chores.append(Scheduler(settings, db, log))
        self.due = [0.0] * len(self.chores)  # monotonic, by chore

    def prepare(self, db: Database) -> None:
        """Before the first look: on a Galera cluster the election relies on its lease alone."""
        if db.run(store.galera):
            self.elector.cluster()

    def on_connect(self, cur: Cursor) -> None:
        """A new connection of the background thread: the election's named lock died with the old one."""
        self.elector.connection_lost()
        self.server_started = time.monotonic() - worker_store.server_uptime(cur)

    @property
    def next_at(self) -> float:
        if not self.elector.leading:
            return self.elector.next_look
        return min(self.due)

    def run(self) -> None:
        elector, now = self.elector, time.monotonic()
        if not elector.leading:
            if now >= elector.next_look and elector.look():
                self._elected(now)
            return
        if not elector.renew():  # another worker took the role over: it does the chores now
            return
        for index, chore in enumerate(self.chores):
            if now < self.due[index]:
                continue
            self.due[index] = now + SCHEDULE_AFTER_ERROR  # also when the run fails
            self.due[index] = now + chore.run()

    def _lost(self) -> None:
        """A worker died or jobs were given back: a slot may be held by a job that moved on, and the
        limits' sweep, however long it meant to wait, looks now."""
        self.due[self.chores.index(self.limits)] = 0.0

    def _elected(self, now: float) -> None:
        for chore in self.chores:
            chore.elected()
        self.due = [now] * len(self.chores)

    def release(self, db: Database) -> None:
        """Give the role up (a clean stop), through ``db``, so that another worker takes it over at once."""
        self.elector.release(db)
