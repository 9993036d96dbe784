"""A producer's view of where its database's workers take network hints, kept fresh off the enqueue path.

One per database per process, shared by every Producer and ``notify()`` call. The registry is read by
a background thread on a connection of its own, at most every ``TTL`` seconds and only while hints
are being sent; sending uses whatever list is cached and never waits for the read. Hints sent before
the first read completes are kept and sent by the thread once it knows where to.
"""

from __future__ import annotations

import atexit
import socket
import threading
import time
from collections.abc import Iterable
from dataclasses import dataclass
from typing import ClassVar

from mysqlq.core import logs
from mysqlq.core.addresses import Address
from mysqlq.core.config import Dsn
from mysqlq.hint import address, wire
from mysqlq.store import hints as store
from mysqlq.store.db import Database, RetryPolicy

TTL = 5.0  # seconds a read of the registry is used for
IDLE_CLOSE = 2 * TTL  # the thread ends, closing its connection, after this long without hints
FLUSH_WAIT = 1.0  # at exit, how long owed hints may hold the process up

log = logs.get_logger("mysqlq.hint")


@dataclass(frozen=True)
class Target:
    host: str
    pid: int
    queues: frozenset[str]
    sockaddr: Address | None
    key: bytes | None

    def serves(self, queue: str) -> bool:
        return queue in (wire.ANY_QUEUE, wire.POLL_NOW) or queue in self.queues


class Directory:
    """The cached registry of one database, and the UDP sockets that send to it."""

    _all: ClassVar[dict[str, Directory]] = {}
    _all_lock: ClassVar[threading.Lock] = threading.Lock()

    @classmethod
    def of(cls, dsn: Dsn) -> Directory:
        with cls._all_lock:
            found = cls._all.get(dsn.identity)
            if found is None:
                found = cls._all[dsn.identity] = cls(dsn)
            return found

    def __init__(self, dsn: Dsn) -> None:
        self.dsn = dsn
        self.hostname = socket.gethostname()
        self.targets: list[Target] | None = None  # None until the first read
        self.read_at = -TTL
        self._lock = threading.Lock()
        self._kick = threading.Event()
        self._idle = threading.Event()
        self._idle.set()
        self._thread: threading.Thread | None = None  # the reading thread, while it runs
        self._started = False
        self._owed: list[tuple[frozenset[str], float, frozenset[int]]] = []
        self._sockets: dict[int, socket.socket] = {}
        self._warned = False

    # ---------------------------------------------------------------- sending

    def prefetch(self) -> None:
        """Start reading the registry if what is cached is stale (never waits for it)."""
        with self._lock:
            if time.monotonic() - self.read_at >= TTL:
                self._refresh_soon()

    def send(self, queues: Iterable[str], delay: float, reached_locally: set[int]) -> int:
        """Hint the workers not reached through a local socket; returns how many were sent to.

        Never blocks: with no list read yet, the hints are kept for the thread to send.
        """
        wanted = frozenset(queues)
        with self._lock:
            targets = self.targets
            if time.monotonic() - self.read_at >= TTL:
                self._refresh_soon()
            if targets is None:
                self._owed.append((wanted, delay, frozenset(reached_locally)))
                self._idle.clear()
                return 0
        return self._send(targets, wanted, delay, reached_locally)

    def _send(self, targets: list[Target], queues: frozenset[str], delay: float, reached_locally: Iterable[int]) -> int:
        local = set(reached_locally)
        sent = 0
        serving = 0
        for target in targets:
            wanted = [queue for queue in queues if target.serves(queue)]
            if not wanted:
                continue
            serving += 1
            if target.host == self.hostname and target.pid in local:
                continue
            if target.sockaddr is None or target.key is None:
                continue
            sock = self._socket(target.sockaddr)
            try:
                for queue in wanted:
                    sock.sendto(wire.encode(target.key, queue, delay), target.sockaddr)
                sent += 1
            except OSError:  # unreachable, buffer full, gone: the poll is the safety net
                continue
        if serving and not sent and not local:
            self._warn_unreached(serving)
        return sent

    def _socket(self, sockaddr: Address) -> socket.socket:
        family = socket.AF_INET6 if ":" in sockaddr[0] else socket.AF_INET
        sock = self._sockets.get(family)
        if sock is None:
            sock = self._sockets[family] = socket.socket(family, socket.SOCK_DGRAM)
            sock.setblocking(False)
        return sock

    def _warn_unreached(self, registered: int) -> None:
        if self._warned:
            return
        self._warned = True
        log.warning("hint.no_worker_reached", database=self.dsn.redacted(), registered_workers=registered,
                    fix="workers serve this queue but none can be hinted from here, so jobs wait for their next "
                        "poll: on this host, give workers and producers the same MYSQLQ_HINT_DIR (or create "
                        "/run/mysqlq with mode 1777); on other hosts, let workers take network hints "
                        "(MYSQLQ_HINT_BIND=auto or an address this host can reach)")

    # ---------------------------------------------------------------- reading the registry

    def _refresh_soon(self) -> None:
        """Wake (or start) the reading thread. Called with the lock held."""
        self.read_at = time.monotonic()  # one read per TTL, even if this one fails
        self._kick.set()
        if self._thread is None:
            if not self._started:
                self._started = True
                atexit.register(self.flush, FLUSH_WAIT)
            self._thread = threading.Thread(target=self._loop, name="mysqlq-hint-directory", daemon=True)
            self._thread.start()

    def _loop(self) -> None:
        db = Database(self.dsn, retry=RetryPolicy(attempts=2))
        try:
            while True:
                if not self._kick.wait(IDLE_CLOSE):
                    with self._lock:  # no hints lately: end, and give the server its connection back
                        if not self._kick.is_set():
                            self._thread = None
                            return
                self._kick.clear()
                self._read(db)
        finally:
            db.close()

    def _read(self, db: Database) -> None:
        try:
            found = db.run(store.registered)
        except Exception as exc:  # the poll is the safety net; say why hints stopped, at debug level
            log.debug("hint.directory_failed", error=str(exc))
            found = None
        with self._lock:
            if found is not None:
                self.targets = [Target(row.host, row.pid, row.queues,
                                       address.parse_advertised(row.addr) if row.addr else None, row.key)
                                for row in found]
            targets, owed, self._owed = self.targets, self._owed, []
        if targets is not None:
            for queues, delay, local in owed:
                self._send(targets, queues, delay, local)
        self._idle.set()

    def flush(self, timeout: float = FLUSH_WAIT) -> None:
        """Wait (up to ``timeout``) until hints kept for the first read have been sent."""
        self._idle.wait(timeout)
