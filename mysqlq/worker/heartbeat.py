"""A worker's second connection, on a thread of its own: registry row, heartbeats, lease
extension, and, for the one worker leading (mysqlq.leader.elector), reaping dead workers' claims."""

from __future__ import annotations

import os
import socket
import threading
import time
from collections.abc import Callable, Collection
from functools import partial
from typing import Any

from mysqlq.core.config import Settings
from mysqlq.core.errors import ConfigError
from mysqlq.leader.elector import Leadership
from mysqlq.leader.retention import Retention
from mysqlq.leader.scheduler import Scheduler
from mysqlq.store import hints as hint_store
from mysqlq.store import leadership as leader_store
from mysqlq.store import workers as store
from mysqlq.store.db import FOREVER, Connection, Database
from mysqlq.worker import limits

EXPIRED_SWEEP_EVERY = 5  # reaper runs; the lease-expiry sweep is the slow path
CONFIRM_AFTER = 1.0  # seconds before the second look at a worker whose connection vanished
SCHEDULE_AFTER_ERROR = 5.0  # seconds before the scheduler's next turn when one failed


def pid_alive(pid: int) -> bool:
    """True when a process with this pid exists on this host (and is not this one)."""
    if pid == os.getpid():
        return False
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:  # it exists, under another user
        return True
    return True


def is_live(other: store.Registration) -> bool:
    """A registration of this name on this host belongs to a live worker, not to an earlier life:
    its process exists and its heartbeat is within its lease."""
    return other.heartbeat_age < other.lease and pid_alive(other.pid)


class Heartbeat:
    """Keeps the worker visibly alive and its claims leased; reaps for everyone when leader."""

    def __init__(self, settings: Settings, log: Any, batches_in_hand: Callable[[], Collection[int]],
                 on_reaped: Callable[[int], None]) -> None:
        self.settings = settings
        self.log = log
        self.batches_in_hand = batches_in_hand
        # By batch: the monotonic time, taken before the statement, of the last extension that
        # found the batch still ours. Replaced whole at each beat (the worker reads it unlocked).
        self.lease_extended: dict[int, float] = {}
        self.on_reaped = on_reaped
        self.db = Database(settings.dsn, retry=FOREVER, on_connect=self._on_connect)
        self.worker_id = 0
        self.hint_entry: tuple[str | None, bytes | None] = (None, None)  # where producers send hints
        self.leadership = Leadership(settings, self.db, log, lambda: self.worker_id)
        self.server_started = 0.0  # monotonic time at which the server (re)started
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._loop, name="mysqlq-heartbeat", daemon=True)
        self._reaps = 0
        self._missing: dict[int, object] = {}  # workers whose connection vanished, by last heartbeat
        self.retention = Retention(settings, self.db, log)  # the leader's other chore
        self.scheduler = Scheduler(settings, self.db, log)  # and recurring jobs (a bad file is refused here)

    @property
    def leader(self) -> bool:
        return self.leadership.leading

    def _on_connect(self, conn: Connection) -> None:
        self.leadership.connection_lost()  # named locks die with the connection
        with conn.cursor() as cur:
            self.server_started = time.monotonic() - store.server_uptime(cur)
            if self.worker_id:
                # A new connection id: record it now, not at the next beat, or the leader would
                # meanwhile find our old id gone from the process list and take us for dead.
                store.heartbeat(cur, self.worker_id)

    def register(self) -> int:
        """Register (before the first claim) and release what earlier lives of this name held.

        A second live worker of the same name on this host is refused: it would take the first
        one's registration for an earlier life and give its jobs away.
        """
        settings, host = self.settings, socket.gethostname()
        if self.db.run(leader_store.galera):
            self.leadership.cluster()
        self.worker_id = self._insert()
        others = self.db.run(lambda cur: store.same_name(cur, self.worker_id, settings.worker_name, host))
        live = [other for other in others if other.id < self.worker_id and is_live(other)]
        if live:
            worker_id = self.worker_id
            self.db.run(lambda cur: store.unregister(cur, worker_id))
            raise ConfigError(
                f"a worker named {settings.worker_name!r} is already running on {host} (pid {live[0].pid}): "
                "give each worker its own name (--name, MYSQLQ_WORKER_NAME, or the systemd instance)")
        earlier = [other.id for other in others if not is_live(other)]
        if earlier:
            released = self.db.run(lambda cur: store.reap(cur, earlier, False))
            self.db.run(lambda cur: store.forget(cur, earlier))
            self.log.info("worker.previous_life_released", jobs=released, registrations=len(earlier))
            if released:
                self.on_reaped(released)
        return self.worker_id

    def _insert(self) -> int:
        settings = self.settings
        worker_id = self.db.run(lambda cur: store.register(
            cur, settings.worker_name, socket.gethostname(), os.getpid(), settings.queues,
            settings.heartbeat_interval, settings.lease))
        if self.hint_entry[0]:  # where producers on other hosts send this worker's hints
            self.db.run(lambda cur: hint_store.record(cur, worker_id, *self.hint_entry))
        return worker_id

    def start(self) -> None:
        self._thread.start()

    def stop(self, db: Database) -> None:
        """Stop beating, hand leadership on, and leave the registry, through ``db`` (the worker's own
        connection).

        The thread may be inside a statement; it is not waited for long: it ends at its next
        wake-up, or with the process, and its connection with it.
        """
        self._stop.set()
        self.leadership.wake()
        self._thread.join(timeout=0.2)
        self.leadership.release(db)
        if self.worker_id:
            try:
                worker_id = self.worker_id
                db.run(lambda cur: store.unregister(cur, worker_id))
            except Exception as exc:  # the reaper will forget us anyway
                self.log.warning("worker.unregister_failed", error=str(exc))

    def _loop(self) -> None:
        settings, lead = self.settings, self.leadership
        now = time.monotonic()
        next_beat, next_reap = now + settings.heartbeat_interval, now
        next_retain = next_schedule = now
        while not self._stop.is_set():
            try:
                now = time.monotonic()
                if now >= next_beat:
                    self.beat()
                    next_beat = now + settings.heartbeat_interval
                if not lead.leading and now >= lead.next_look and lead.look():
                    next_reap, self._reaps = now, 0  # a new leader reaps at once, lapsed leases included
                if lead.leading and now >= next_reap:
                    if lead.renew():  # the leader's writes are fenced by its epoch; renewing first
                        self.reap()  # keeps its own clock's verdict fresh too
                    # A worker whose connection vanished gets its second look sooner.
                    next_reap = now + (min(CONFIRM_AFTER, settings.reap_interval) if self._missing
                                       else settings.reap_interval)
                if lead.leading and now >= next_retain:
                    next_retain = now + settings.retention_interval  # also when the turn fails
                    next_retain = now + self.retention.run()  # see mysqlq.leader.retention
                if lead.leading and now >= next_schedule:
                    next_schedule = now + SCHEDULE_AFTER_ERROR  # also when the turn fails
                    next_schedule = now + self.scheduler.run()  # see mysqlq.leader.scheduler
                if lead.leading:
                    self._stop.wait(max(0.0, min(next_beat, next_reap, next_schedule) - time.monotonic()))
                else:
                    lead.wait(min(next_beat, lead.next_look) - time.monotonic())
            except Exception as exc:  # never let the thread die: the next beat tries again
                self.log.error("heartbeat.error", error=f"{type(exc).__name__}: {exc}")
                self._stop.wait(1.0)
        self.db.close()

    def beat(self) -> None:
        settings = self.settings
        alive = self.db.run(lambda cur: store.heartbeat(cur, self.worker_id))
        if not alive and not self._stop.is_set():  # while stopping, the row is gone on purpose
            self.log.warning("worker.registration_lost", worker_id=self.worker_id)
            self.worker_id = self._insert()
        extended: dict[int, float] = {}
        for batch_id in self.batches_in_hand():
            started = time.monotonic()
            if self.db.run(partial(store.extend_lease, batch_id=batch_id, lease=settings.lease)):
                extended[batch_id] = started
        self.lease_extended = extended

    def reap(self) -> int:
        """Give the claims of dead workers back (and, every few runs, those of lapsed leases).

        Each worker is judged by its own lease, recorded when it registered. The writes are fenced
        by this leader's epoch: if another worker took the role over meanwhile, they change nothing.
        """
        settings, fence = self.settings, self.leadership.fence
        # Connection ids recorded before the server's last start mean nothing; the uptime is read
        # inside the unit, so that a reconnection during it (a restart) is taken into account.
        found = self.db.run(lambda cur: store.dead_workers(
            cur, settings.processlist_check, time.monotonic() - self.server_started))
        # A vanished connection counts once seen twice with the same heartbeat: a live worker
        # whose connection was just replaced beats again (it does so on reconnecting), a dead one
        # cannot. Stale heartbeats need no second look.
        missing = {worker_id: beat for worker_id, beat, stale in found if not stale}
        dead = [worker_id for worker_id, beat, stale in found
                if stale or self._missing.get(worker_id, object()) == beat]
        self._missing = missing
        names = self.db.run(lambda cur: store.names(cur, dead)) if dead else {}
        sweep = self._reaps % EXPIRED_SWEEP_EVERY == 0
        self._reaps += 1
        if not dead and not sweep:
            return 0
        reaped = self.db.run(lambda cur: store.reap(cur, dead, sweep, fence))
        forgotten = self.db.run(lambda cur: store.forget(cur, dead, fence)) if dead else 0
        if reaped or forgotten:
            self.log.warning("reaper.reaped", jobs=reaped, epoch=fence.epoch, dead_workers=",".join(
                f"{names.get(worker_id, '?')}#{worker_id}" for worker_id in dead))
        # Concurrency slots of jobs that moved on without giving them back (out of attempts here,
        # or their worker died just after recording an outcome); every few runs, waiting jobs too.
        unblocked = limits.sweep(self.db, self.log, starved=sweep)
        if reaped or unblocked:
            self.on_reaped(reaped)
        return reaped
