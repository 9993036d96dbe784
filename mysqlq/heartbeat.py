"""A worker's second connection, on a thread of its own: registry row, heartbeats, lease
extension, and, for the one worker holding the reaper lock, reaping dead workers' claims."""

from __future__ import annotations

import os
import socket
import threading
import time
from collections.abc import Callable
from typing import Any

from .config import Settings
from .db import FOREVER, Connection, Database
from .retention import Retention
from .scheduler import Scheduler
from .store import workers as store
from .store.schema import lock_name

EXPIRED_SWEEP_EVERY = 5  # reaper runs; the lease-expiry sweep is the slow path
CONFIRM_AFTER = 1.0  # seconds before the second look at a worker whose connection vanished
SCHEDULE_AFTER_ERROR = 5.0  # seconds before the scheduler's next turn when one failed


class Heartbeat:
    """Keeps the worker visibly alive and its claims leased; reaps for everyone when leader."""

    def __init__(self, settings: Settings, log: Any, current_batch: Callable[[], int | None],
                 on_reaped: Callable[[int], None]) -> None:
        self.settings = settings
        self.log = log
        self.current_batch = current_batch
        self.on_reaped = on_reaped
        self.db = Database(settings.dsn, retry=FOREVER, on_connect=self._on_connect)
        self.worker_id = 0
        self.leader = False
        self.server_started = 0.0  # monotonic time at which the server (re)started
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._loop, name="mysqlq-heartbeat", daemon=True)
        self._reaps = 0
        self._missing: dict[int, object] = {}  # workers whose connection vanished, by last heartbeat
        self._lock = lock_name("reaper", settings.dsn.database)
        self.retention = Retention(settings, self.db, log)  # the leader's other chore
        self.scheduler = Scheduler(settings, self.db, log)  # and recurring jobs (a bad file is refused here)

    def _on_connect(self, conn: Connection) -> None:
        self.leader = False  # named locks die with the connection
        with conn.cursor() as cur:
            self.server_started = time.monotonic() - store.server_uptime(cur)
            if self.worker_id:
                # A new connection id: record it now, not at the next beat, or the leader would
                # meanwhile find our old id gone from the process list and take us for dead.
                store.heartbeat(cur, self.worker_id)

    def register(self) -> int:
        """Register (before the first claim) and release what earlier lives of this name held."""
        settings, host = self.settings, socket.gethostname()
        self.worker_id = self.db.run(
            lambda cur: store.register(cur, settings.worker_name, host, os.getpid(), settings.queues)
        )
        earlier = self.db.run(lambda cur: store.previous_lives(cur, self.worker_id, settings.worker_name, host))
        if earlier:
            released = self.db.run(lambda cur: store.reap(cur, earlier, False))
            self.db.run(lambda cur: store.forget(cur, earlier))
            self.log.info("worker.previous_life_released", jobs=released, registrations=len(earlier))
            if released:
                self.on_reaped(released)
        return self.worker_id

    def start(self) -> None:
        self._thread.start()

    def stop(self, db: Database) -> None:
        """Stop beating and leave the registry through ``db`` (the worker's own connection).

        The thread may be blocked in GET_LOCK until its next beat; it is not waited for: it ends
        at its next wake-up, or with the process, and its connection (and lock) with it.
        """
        self._stop.set()
        self._thread.join(timeout=0.2)
        if self.worker_id:
            try:
                worker_id = self.worker_id
                db.run(lambda cur: store.unregister(cur, worker_id))
            except Exception as exc:  # the reaper will forget us anyway
                self.log.warning("worker.unregister_failed", error=str(exc))

    def _loop(self) -> None:
        settings = self.settings
        now = time.monotonic()
        next_beat, next_reap = now + settings.heartbeat_interval, now
        next_retain = next_schedule = now
        while not self._stop.is_set():
            try:
                now = time.monotonic()
                if now >= next_beat:
                    self.beat()
                    next_beat = now + settings.heartbeat_interval
                if self.leader and now >= next_reap:
                    self.reap()
                    # A worker whose connection vanished gets its second look sooner.
                    next_reap = now + (min(CONFIRM_AFTER, settings.reap_interval) if self._missing
                                       else settings.reap_interval)
                if self.leader and now >= next_retain:
                    next_retain = now + settings.retention_interval  # also when the turn fails
                    next_retain = now + self.retention.run()  # see mysqlq.retention
                if self.leader and now >= next_schedule:
                    next_schedule = now + SCHEDULE_AFTER_ERROR  # also when the turn fails
                    next_schedule = now + self.scheduler.run()  # see mysqlq.scheduler
                if self.leader:
                    self._stop.wait(max(0.0, min(next_beat, next_reap, next_schedule) - time.monotonic()))
                elif self.await_leadership(next_beat - time.monotonic()):
                    next_reap = time.monotonic()  # a leader just died: reap at once
            except Exception as exc:  # never let the thread die: the next beat tries again
                self.log.error("heartbeat.error", error=f"{type(exc).__name__}: {exc}")
                self._stop.wait(1.0)
        self.db.close()

    def await_leadership(self, seconds: float) -> bool:
        """Wait for the reaper lock until the next beat: one query, and it returns the moment
        the leader's connection dies, so a killed leader is replaced at once."""
        if seconds <= 0:
            return False
        self.leader = self.db.run(lambda cur: store.try_lock(cur, self._lock, seconds))
        if self.leader:
            self.log.info("reaper.leader")
        return self.leader

    def beat(self) -> None:
        settings = self.settings
        alive = self.db.run(lambda cur: store.heartbeat(cur, self.worker_id))
        if not alive and not self._stop.is_set():  # while stopping, the row is gone on purpose
            self.log.warning("worker.registration_lost", worker_id=self.worker_id)
            self.register()
        batch_id = self.current_batch()
        if batch_id is not None:
            self.db.run(lambda cur: store.extend_lease(cur, batch_id, settings.lease))

    def reap(self) -> int:
        """Give the claims of dead workers back (and, every few runs, those of lapsed leases)."""
        settings = self.settings
        # Connection ids recorded before the server's last start mean nothing; the uptime is read
        # inside the unit, so that a reconnection during it (a restart) is taken into account.
        found = self.db.run(lambda cur: store.dead_workers(
            cur, settings.lease, settings.processlist_check, time.monotonic() - self.server_started))
        # A vanished connection counts once seen twice with the same heartbeat: a live worker
        # whose connection was just replaced beats again (it does so on reconnecting), a dead one
        # cannot. Stale heartbeats need no second look.
        missing = {worker_id: beat for worker_id, beat, stale in found if not stale}
        dead = [worker_id for worker_id, beat, stale in found
                if stale or self._missing.get(worker_id, object()) == beat]
        self._missing = missing
        names = self.db.run(lambda cur: store.names(cur, dead)) if dead else {}
        self._reaps += 1
        sweep = self._reaps % EXPIRED_SWEEP_EVERY == 0
        if not dead and not sweep:
            return 0
        reaped = self.db.run(lambda cur: store.reap(cur, dead, sweep))
        if dead:
            self.db.run(lambda cur: store.forget(cur, dead))
        if reaped or dead:
            self.log.warning("reaper.reaped", jobs=reaped, dead_workers=",".join(
                f"{names.get(worker_id, '?')}#{worker_id}" for worker_id in dead))
        if reaped:
            self.on_reaped(reaped)
        return reaped
