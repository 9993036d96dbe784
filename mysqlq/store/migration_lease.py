"""Keeping the migration lock's lease while a long statement runs.

The migrating connection is busy for as long as one statement takes (an index build over millions
of rows may take longer than the lease), so a second connection extends the lease meanwhile; a
second `mysqlq migrate` then waits instead of taking a lease that only looked lapsed. If the
migrating process dies, so does this thread, and the lease lapses as before.
"""

from __future__ import annotations

import contextlib
import threading
from collections.abc import Callable
from types import TracebackType

import MySQLdb

from mysqlq.core import logs
from mysqlq.core.errors import DatabaseUnavailable
from mysqlq.store import execute
from mysqlq.store.db import Connection

log = logs.get_logger("mysqlq.migrate")


class LeaseRenewal:
    """A thread that extends ``holder``'s migration lease every ``interval`` seconds over its own
    connection (opened by ``connect``) until the block ends. A failed renewal is retried on a new
    connection at the next interval: the lease is several intervals long."""

    def __init__(self, connect: Callable[[], Connection], holder: str, lease: float, interval: float) -> None:
        self._connect = connect
        self._holder = holder
        self._lease_us = round(lease * 1e6)
        self._interval = interval
        self._stop = threading.Event()
        self._conn: Connection | None = None
        self._thread = threading.Thread(target=self._run, name="mysqlq-migration-lease", daemon=True)
        self.renewals = 0

    def __enter__(self) -> LeaseRenewal:
        self._thread.start()
        return self

    def __exit__(self, kind: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None) -> None:
        self._stop.set()
        self._thread.join()

    def _run(self) -> None:
        try:
            while not self._stop.wait(self._interval):
                self._renew()
        finally:
            self._close()

    def _renew(self) -> None:
        try:
            if self._conn is None:
                self._conn = self._connect()
            with self._conn.cursor() as cur:
                if execute(cur, "take_migration_lock", {"holder": self._holder, "lease_us": self._lease_us}) == 1:
                    self.renewals += 1
                else:
                    log.warning("migrate.lease_lost")
        except (MySQLdb.Error, DatabaseUnavailable) as exc:
            log.warning("migrate.lease_not_extended", error=str(exc))
            self._close()

    def _close(self) -> None:
        if self._conn is not None:
            with contextlib.suppress(MySQLdb.Error):
                self._conn.close()
            self._conn = None
