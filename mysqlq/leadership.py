"""Leadership of the workers' shared chores (reaping, retention, schedules): a lease in a table row.

One worker at a time leads. It holds the ``reaper`` row of ``mysqlq_leaders`` until its
``lease_until`` and renews it before each round of chores; the others read the row and try again
when the lease would lapse. Taking the role over bumps an epoch, and the leader's writes name it,
so a leader that froze (SIGSTOP, a paused VM, a half-open network) and woke up after losing the
role changes nothing. Its own clock tells it so before it even asks: it counts itself leader only
until its last successful renewal plus the lease.

A lease lapses only after its length, which is fine for a frozen leader but slow for a killed one.
So the leader also holds a named lock (``GET_LOCK``) on its connection, and followers wait inside
``GET_LOCK`` between their looks at the row: the server grants it the moment the leader's
connection dies, and a follower that finds the holder's connection gone from the process list takes
the role over at once. The lock is only that wake-up call; leadership never depends on it (it is
node-local on a Galera cluster, where it is turned off).
"""

from __future__ import annotations

import random
import time
from collections.abc import Callable
from typing import Any

from .config import Settings
from .db import Database
from .store import leadership as store
from .store.schema import lock_name
from .store.workers import NO_FENCE, Fence

ROLE = "reaper"
MIN_LEASE = 6.0  # seconds; several rounds of chores fit in it
SECOND_LOOK = 1.0  # seconds: a killed leader's connection may linger in the process list that long
JITTER = 0.2  # seconds added to a follower's next look, so followers do not all ask at once


def leader_lease(settings: Settings) -> float:
    """How long the role lasts without renewal: three reaper rounds, at least MIN_LEASE."""
    return max(MIN_LEASE, 3 * settings.reap_interval)


class Leadership:
    """This worker's view of the role: whether it leads (by its own clock) and when to look again."""

    def __init__(self, settings: Settings, db: Database, log: Any, worker_id: Callable[[], int]) -> None:
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
        self._plain_wait = False  # the lock was just granted to no avail: do not wait in it again yet

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

    def renew(self) -> bool:
        """Extend the lease before a round of chores; False (and no longer leader) if it was lost."""
        if self.epoch is None:
            return False
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
            return self.renew()
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
                self._schedule(max(self.db.run(lambda cur: store.state(cur, ROLE)).remaining, 0.0))
            return False
        self.epoch, self.valid_until, self._steal_looks = epoch, sent + self.lease, 0
        self.log.info("reaper.leader", epoch=epoch)
        self._hold_beacon()
        return True

    def _schedule(self, seconds: float) -> None:
        self.next_look = time.monotonic() + seconds + random.uniform(0, JITTER)

    def wait(self, seconds: float, stop: Callable[[float], bool]) -> None:
        """Wait ``seconds`` (or until ``stop`` says so): inside the leader's lock when it can tell of
        the leader's death, else plainly. A granted lock makes the next look come at once."""
        if seconds <= 0:
            return
        if not self.use_beacon or self._plain_wait:
            self._plain_wait = False
            stop(seconds)
            return
        if self.db.run(lambda cur: store.try_lock(cur, self.beacon, seconds)):
            # Free: the leader's connection died, or it stepped down. Only a wake-up call: let go.
            self.db.run(lambda cur: store.unlock(cur, self.beacon))
            self._steal_looks, self._plain_wait = 2, True
            self.next_look = time.monotonic()
