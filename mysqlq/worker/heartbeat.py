"""A worker's registration and heartbeat: the registry row that says it is alive, and the leases of
the batches it holds, extended at every beat. A service of the background thread (mysqlq.worker.background)."""

from __future__ import annotations

import os
import socket
import time
from collections.abc import Callable
from functools import partial

from mysqlq import hint
from mysqlq.core.config import Settings
from mysqlq.core.errors import ConfigError
from mysqlq.core.logs import Log
from mysqlq.leader.limits_sweep import LimitsSweep
from mysqlq.store import hints as hint_store
from mysqlq.store import workers as store
from mysqlq.store.db import Cursor, Database
from mysqlq.worker.settling.leases import Leases


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
    """Keeps the worker visibly alive and its claims leased."""

    name = "heartbeat"

    def __init__(self, settings: Settings, db: Database, log: Log, leases: Leases,
                 hint_entry: Callable[[], tuple[str | None, bytes | None]]) -> None:
        self.settings = settings
        self.db = db
        self.log = log
        self.leases = leases
        self.worker_id = 0
        self.hint_entry = hint_entry  # where producers on other hosts send this worker's hints, and its key
        self.next_at = time.monotonic() + settings.heartbeat_interval
        self.stopping = False  # while stopping, a missing registration row is gone on purpose

    def on_connect(self, cur: Cursor) -> None:
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
                hint.notify(settings, [hint.ANY_QUEUE])
            # An earlier life killed between an outcome and giving its concurrency slot back left the
            # slot held; the leader, whose sweep looks rarely while no slot seemed in use, never saw
            # that life die (it was forgotten just now): settle such slots here.
            gained = LimitsSweep(settings, self.db, self.log).sweep(starved=False)
            if gained:
                hint.notify(settings, gained)
        return self.worker_id

    def _insert(self) -> int:
        settings = self.settings
        worker_id = self.db.run(lambda cur: store.register(
            cur, settings.worker_name, socket.gethostname(), os.getpid(), settings.queues,
            settings.heartbeat_interval, settings.lease))
        addr, key = self.hint_entry()
        if addr:  # where producers on other hosts send this worker's hints
            self.db.run(lambda cur: hint_store.record(cur, worker_id, addr, key))
        return worker_id

    def run(self) -> None:
        """One beat: the registry row, then the lease of every batch in hand."""
        self.next_at = time.monotonic() + self.settings.heartbeat_interval
        alive = self.db.run(lambda cur: store.heartbeat(cur, self.worker_id))
        if not alive and not self.stopping:
            self.log.warning("worker.registration_lost", worker_id=self.worker_id)
            self.worker_id = self._insert()
        extended: dict[int, float] = {}
        for batch_id in self.leases.held():
            started = time.monotonic()
            if self.db.run(partial(store.extend_lease, batch_id=batch_id, lease=self.settings.lease)):
                extended[batch_id] = started
        self.leases.extended(extended)

    def unregister(self, db: Database) -> None:
        """Leave the registry through ``db`` (the worker's own connection: this one may be busy)."""
        if not self.worker_id:
            return
        worker_id = self.worker_id
        try:
            db.run(lambda cur: store.unregister(cur, worker_id))
        except Exception as exc:  # the reaper will forget us anyway
            self.log.warning("worker.unregister_failed", error=str(exc))
