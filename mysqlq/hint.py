"""The has-task hint: producers on the same host wake idle workers through unix datagram sockets.

Each worker binds ``<dir>/<db>.<pid>.sock``; after a commit, a producer sends a tiny datagram
(``queue`` and the seconds until the job is due) to every socket of the same database. Sending
never blocks and never fails the enqueue: a hint that does not arrive only means the job waits
for the worker's next poll. Idle workers therefore sleep in ``select()`` and cost the database
one query per poll interval.
"""

from __future__ import annotations

import contextlib
import errno
import hashlib
import os
import socket
import tempfile
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path

from .config import Settings

ANY_QUEUE = "*"
RUN_DIR = Path("/run/mysqlq")


def hint_dir(settings: Settings) -> Path:
    """Where hint sockets live: the setting or MYSQLQ_HINT_DIR, else /run/mysqlq when usable,
    else a per-user temp dir."""
    chosen = settings.hint_dir or os.environ.get("MYSQLQ_HINT_DIR")
    if chosen:
        return Path(chosen)
    if RUN_DIR.is_dir() and os.access(RUN_DIR, os.W_OK | os.X_OK):
        return RUN_DIR
    return Path(tempfile.gettempdir()) / f"mysqlq-{os.getuid()}"


def _prefix(settings: Settings) -> str:
    return hashlib.sha1(settings.dsn.identity.encode()).hexdigest()[:12]


class Sender:
    """A producer's end of the hint channel: where to send, worked out once and kept."""

    def __init__(self, settings: Settings) -> None:
        self.enabled = settings.hint
        self.folder = hint_dir(settings)
        self.prefix = _prefix(settings) + "."
        self._sock: socket.socket | None = None

    def notify(self, queues: Iterable[str], delay: float = 0.0) -> int:
        """Wake the workers of this database on this host; returns how many sockets were reached."""
        if not self.enabled:
            return 0
        try:
            paths = [entry.path for entry in os.scandir(self.folder) if entry.name.startswith(self.prefix)]
        except OSError:
            return 0
        if not paths:
            return 0
        if self._sock is None:
            self._sock = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM)
            self._sock.setblocking(False)
        messages = [f"{queue}\n{delay:.6f}".encode() for queue in set(queues)]
        reached = 0
        for path in paths:
            try:
                for message in messages:
                    self._sock.sendto(message, path)
                reached += 1
            except OSError as exc:
                if exc.errno == errno.ECONNREFUSED:  # the worker died without cleaning up
                    with contextlib.suppress(OSError):
                        os.unlink(path)
                # EAGAIN: its buffer is full of hints it has not read yet; it is awake anyway.
        return reached

    def close(self) -> None:
        if self._sock is not None:
            self._sock.close()
            self._sock = None


def notify(settings: Settings, queues: Iterable[str], delay: float = 0.0) -> int:
    """Wake the workers of this database on this host (after your own commit); returns how many
    sockets were reached. Never raises and never blocks."""
    sender = Sender(settings)
    try:
        return sender.notify(queues, delay)
    finally:
        sender.close()


@dataclass(frozen=True)
class Hint:
    """One received hint: a queue (or ANY_QUEUE) and the seconds until its job is due."""

    queue: str
    delay: float


class Listener:
    """A worker's end of the hint channel; ``fileno()`` is readable when hints are waiting."""

    def __init__(self, settings: Settings) -> None:
        folder = hint_dir(settings)
        folder.mkdir(mode=0o1777 if folder == RUN_DIR else 0o700, parents=True, exist_ok=True)
        self.path = folder / f"{_prefix(settings)}.{os.getpid()}.sock"
        with contextlib.suppress(FileNotFoundError):
            self.path.unlink()
        self.sock = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM)
        self.sock.setblocking(False)
        self.sock.bind(str(self.path))
        with contextlib.suppress(OSError):
            os.chmod(self.path, 0o666)  # producers of other users on this host may wake us

    def fileno(self) -> int:
        return self.sock.fileno()

    def drain(self) -> list[Hint]:
        """Every hint waiting in the socket (malformed datagrams are ignored)."""
        hints: list[Hint] = []
        while True:
            try:
                data = self.sock.recv(512)
            except BlockingIOError:
                return hints
            except OSError:
                return hints
            queue, _, delay = data.decode(errors="replace").partition("\n")
            try:
                hints.append(Hint(queue, max(0.0, float(delay or 0))))
            except ValueError:
                continue

    def close(self) -> None:
        self.sock.close()
        with contextlib.suppress(OSError):
            self.path.unlink()
