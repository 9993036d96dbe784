"""The producer's connections: a bounded pool, so that one Producer serves the threads of a web
server (each statement on a connection no other thread is using) without a connection per call."""

from __future__ import annotations

import os
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager

from mysqlq.core.errors import DatabaseUnavailable
from mysqlq.store.db import Database

WAIT = 30.0  # seconds a thread waits for a connection when all of them are in use

_forks = 0  # bumped in every forked child: a pool made before the fork starts afresh there


def _forked() -> None:
    global _forks
    _forks += 1


os.register_at_fork(after_in_child=_forked)


def forks() -> int:
    """How many forks made this process (0 in the first): what is made before a fork starts afresh after it."""
    return _forks


class Pool:
    """At most ``size`` connections, opened as they are first needed and each lent to one thread at a
    time; the most recently returned is lent first, so a single thread keeps using one connection.

    Lending an idle connection takes no lock (``list.pop`` and ``append`` are atomic): only a thread
    that finds none idle takes the lock, to open one or to wait for one to come back.
    """

    def __init__(self, make: Callable[[], Database], size: int, wait: float = WAIT) -> None:
        if not isinstance(size, int) or isinstance(size, bool) or size < 1:
            raise ValueError(f"pool_size must be a positive integer, got {size!r}")
        self.make = make
        self.size = size
        self.wait = wait
        self._reset()

    def _reset(self) -> None:
        # In a forked child (a pre-forking server) the parent's sockets must be neither used nor closed.
        self._forks = _forks
        self._idle: list[Database] = []
        self._opened = 0
        self._waiting = 0  # threads waiting for a connection to come back
        self._returned = threading.Condition(threading.Lock())

    @contextmanager
    def database(self) -> Iterator[Database]:
        """A connection for this thread alone until the block ends."""
        lent = self.take()
        try:
            yield lent[0]
        finally:
            self.give(lent)

    def take(self) -> tuple[Database, int]:
        """A connection for this thread alone until it is given back (with what this returned)."""
        if self._forks != _forks:
            self._reset()
        try:
            return self._idle.pop(), _forks
        except IndexError:
            return self._take_waiting(), _forks

    def _take_waiting(self) -> Database:
        with self._returned:
            if self._opened < self.size:
                self._opened += 1
                return self.make()
            self._waiting += 1
            try:
                deadline = time.monotonic() + self.wait
                while True:
                    try:
                        return self._idle.pop()
                    except IndexError:
                        pass
                    left = deadline - time.monotonic()
                    if left <= 0:
                        raise DatabaseUnavailable(
                            f"all {self.size} connections of the producer were in use for {self.wait:g}s: "
                            "give it a larger pool_size, or hold its transactions for less time", transient=True)
                    self._returned.wait(left)
            finally:
                self._waiting -= 1

    def give(self, lent: tuple[Database, int]) -> None:
        db, forks = lent
        if forks != _forks:
            return  # lent before a fork: the parent's
        self._idle.append(db)
        if self._waiting:  # read after the append: a thread counted in before it is woken
            with self._returned:
                self._returned.notify()

    def close(self) -> None:
        """Close the idle connections (a connection lent out meanwhile stays open until the next close).
        The pool may be used again: it opens connections as they are needed."""
        while True:
            try:
                db = self._idle.pop()
            except IndexError:
                return
            db.close()
            with self._returned:
                self._opened -= 1
