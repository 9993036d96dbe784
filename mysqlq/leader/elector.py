"""The election of the worker that does the shared chores (mysqlq.leader.maintainer): a lease in a table row.

One worker at a time leads. It holds the ``reaper`` row of ``mysqlq_leaders`` until its
``lease_until`` and renews it as it works; the others take the role over under a new epoch once the
lease lapses. The leader's writes name its epoch, so a leader that froze (SIGSTOP, a paused VM, a
half-open network) and woke up after losing the role changes nothing. Its own clock tells it so
before it even asks: it counts itself leader only until its last successful renewal plus the lease.

Followers watch at no cost of their own: the poll every worker runs anyway also returns the lease's
remaining time and whether the leader's wake-up lock is free (``IS_USED_LOCK``). The leader holds
that named lock on its connection, so the server frees it the moment a killed leader's connection
dies, long before the lease lapses; a follower that sees it free takes the role over at once if the
holder's connection is gone from the process list. The lock is only that signal; leadership never
depends on it (it is node-local on a Galera cluster, where it is turned off). A follower that does
not poll (busy with a long job) looks at the row itself at its heartbeats.
"""

from __future__ import annotations

import random
import threading
import time
from collections.abc import Callable

from mysqlq.core.config import Settings
from mysqlq.core.logs import Log
from mysqlq.store import leadership as store
from mysqlq.store.db import Database
from mysqlq.store.schema import lock_name
from mysqlq.store.workers import NO_FENCE, Fence

ROLE = "reaper"
MIN_LEASE = 6.0  # seconds; several rounds of chores fit in it
SECOND_LOOK = 1.0  # seconds: a killed leader's connection may linger in the process list that long
JITTER = 0.2  # seconds added to a follower's next look, so followers do not all ask at once


def leader_lease(settings: Settings) -> float:
    """How long the role lasts without renewal: three reaper rounds, at least MIN_LEASE."""
    return max(MIN_LEASE, 3 * settings.reap_interval)


class Elector:
    """This worker's view of the role: whether it leads (by its own clock) and when to look again.

    ``poke`` is set when a poll saw something worth a look now (the thread that looks waits on it).
    """

    def __init__(self, settings: Settings, db: Database, log: Log, worker_id: Callable[[], int],
                 poke: threading.Event) -> None:
        self.db = db
        self.log = log
        self.worker_id = worker_id
        self.lease = leader_lease(settings)
        # Without the process-list check a vanished connection proves nothing: no wake-up lock then.
        self.use_beacon = settings.processlist_check
        self.beacon = lock_name("leader", settings.dsn.database)
        self.epoch: int | None = None
        self.valid_until = 0.0  # monotonic: the lease cannot have lapsed before this
        self.beacon_held = False
        self.next_look = 0.0  # monotonic: when a follower should look at the row again
        self._steal_looks = 0  # looks left that may take the role from a holder whose connection is gone
        self._quiet_until = 0.0  # a free lock found a live leader: do not steal-look again before this
        self._poke = poke
        self.heartbeat_interval = settings.heartbeat_interval

    def cluster(self) -> None:
        """On a Galera cluster a named lock is node-local: followers rely on the lease alone."""
        self.use_beacon = False

    @property
    def leading(self) -> bool:
        """True while this worker holds the role and its lease cannot have lapsed."""
        return self.epoch is not None and time.monotonic() < self.valid_until

    @property
    def fence(self) -> Fence:
        """What the leader's writes must name (they change nothing once another worker leads)."""
        return NO_FENCE if self.epoch is None else Fence(self.worker_id(), self.epoch)

    def connection_lost(self) -> None:
        """The heartbeat connection was replaced: the lock died with it (the row lease did not)."""
        self.beacon_held = False

    # ------------------------------------------------------------------ the leader

    def renew(self, force: bool = False) -> bool:
        """Before a round of chores: extend the lease once half of it has passed (or when ``force``d);
        False (and no longer leader) if another worker took the role over."""
        if self.epoch is None:
            return False
        if not force and self.valid_until - time.monotonic() > self.lease / 2:
            return True
        epoch, sent = self.epoch, time.monotonic()
        if self.db.run(lambda cur: store.renew(cur, ROLE, self.worker_id(), epoch, self.lease)):
            self.valid_until = sent + self.lease
            self._hold_beacon()
            return True
        self._step_down("reaper.leadership_lost")
        return False

    def release(self, db: Database) -> None:
        """Give the role up (a clean stop) so that another worker takes it over at once."""
        if self.epoch is None:
            return
        epoch, worker_id = self.epoch, self.worker_id()
        self.epoch = None
        try:
            db.run(lambda cur: store.release(cur, ROLE, worker_id, epoch))
        except Exception as exc:  # the lease lapses by itself
            self.log.warning("reaper.release_failed", error=str(exc))

    def _step_down(self, event: str) -> None:
        self.log.warning(event, epoch=self.epoch, note="another worker leads now; this one reaps nothing")
        self.epoch = None
        self.next_look = time.monotonic()
        if self.beacon_held:
            self.beacon_held = False
            self.db.run(lambda cur: store.unlock(cur, self.beacon))

    def _hold_beacon(self) -> None:
        if self.use_beacon and not self.beacon_held:
            self.beacon_held = self.db.run(lambda cur: store.try_lock(cur, self.beacon, 0))

    # ------------------------------------------------------------------ followers

    def look(self) -> bool:
        """Take the role if it is free (or its holder was killed); True when this worker now leads."""
        if self.epoch is not None:  # our lease lapsed by our own clock: renewing tells whether we still lead
            return self.renew(force=True)
        steal = self._steal_looks > 0
        self._steal_looks = max(0, self._steal_looks - 1)
        me = self.worker_id()
        if not steal:
            state = self.db.run(lambda cur: store.state(cur, ROLE))
            if state.remaining > 0:
                self._schedule(state.remaining)
                return False
        sent = time.monotonic()
        epoch = self.db.run(lambda cur: store.acquire(cur, ROLE, me, self.lease, steal))
        if epoch is None:
            if self._steal_looks:  # a killed holder may still be listed for a moment: look again soon
                self._schedule(SECOND_LOOK)
            else:
                if steal:  # the holder is alive and has not taken its lock back yet: ask again later
                    self._quiet_until = time.monotonic() + self.lease
                self._schedule(max(self.db.run(lambda cur: store.state(cur, ROLE)).remaining, 0.0))
            return False
        self.epoch, self.valid_until, self._steal_looks = epoch, sent + self.lease, 0
        self.log.info("reaper.leader", epoch=epoch)
        self._hold_beacon()
        return True

    def _schedule(self, seconds: float) -> None:
        """The next look: when the lease would lapse, or soon after (polls usually say so first)."""
        self.next_look = time.monotonic() + seconds + random.uniform(0, JITTER)
        if seconds > SECOND_LOOK:  # the worker's polls watch meanwhile; this look is for when it is busy
            self.next_look += self.heartbeat_interval

    def observe(self, remaining: float | None, beacon_free: bool) -> None:
        """What the worker's poll saw of the role (no query of its own); called from the worker's
        thread. A lapsed lease, or a free lock while someone leads, calls for a look now."""
        if self.epoch is not None:
            return
        now = time.monotonic()
        if remaining is None or remaining <= 0:
            self.next_look = now
            self._poke.set()
        elif self.use_beacon and beacon_free and now >= self._quiet_until:
            self._steal_looks, self._quiet_until = 2, now + self.lease
            self.next_look = now
            self._poke.set()
        else:
            self.next_look = max(self.next_look, now + remaining)
