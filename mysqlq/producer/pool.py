"""The producer's connections: a bounded pool, so that one Producer serves the threads of a web
server (each statement on a connection no other thread is using) without a connection per call."""

from __future__ import annotations

import os
import queue
import threading
from collections.abc import Callable, Iterator
from contextlib import contextmanager

from mysqlq.core.errors import DatabaseUnavailable
from mysqlq.store.db import Database

WAIT = 30.0  # seconds a thread waits for a connection when all of them are in use


class Pool:
    """At most ``size`` connections, opened as they are first needed and each lent to one thread at a
    time; the most recently returned is lent first, so a single thread keeps using one connection."""

    def __init__(self, make: Callable[[], Database], size: int, wait: float = WAIT) -> None:
        if not isinstance(size, int) or isinstance(size, bool) or size < 1:
            raise ValueError(f"pool_size must be a positive integer, got {size!r}")
        self.make = make
        self.size = size
        self.wait = wait
        self._lock = threading.Lock()
        self._reset()

    def _reset(self) -> None:
        self._pid = os.getpid()
        self._idle: queue.LifoQueue[Database] = queue.LifoQueue()
        self._opened = 0

    @contextmanager
    def database(self) -> Iterator[Database]:
        """A connection for this thread alone until the block ends."""
        db = self._take()
        try:
            yield db
        finally:
            self._give(db)

    def _take(self) -> Database:
        if self._pid != os.getpid():
            # A forked child (a pre-forking server) must not use its parent's sockets, nor close them.
            with self._lock:
                if self._pid != os.getpid():
                    self._reset()
        try:
            return self._idle.get_nowait()
        except queue.Empty:
            pass
        with self._lock:
            fresh = self._opened < self.size
            if fresh:
                self._opened += 1
        if fresh:
            return self.make()
        try:
            return self._idle.get(timeout=self.wait)
        except queue.Empty:
            raise DatabaseUnavailable(
                f"all {self.size} connections of the producer were in use for {self.wait:g}s: "
                "give it a larger pool_size, or hold its transactions for less time", transient=True) from None

    def _give(self, db: Database) -> None:
        if self._pid != os.getpid():
            return  # lent before a fork: the parent's
        self._idle.put(db)

    def close(self) -> None:
        """Close the idle connections (a connection lent out meanwhile stays open until the next close).
        The pool may be used again: it opens connections as they are needed."""
        while True:
            try:
                db = self._idle.get_nowait()
            except queue.Empty:
                return
            db.close()
            with self._lock:
                self._opened -= 1
