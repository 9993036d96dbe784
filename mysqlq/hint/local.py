"""Hints on one host: unix datagram sockets in a directory shared by workers and producers.

Each worker binds ``<dir>/<db>.<pid>.sock``; a producer sends ``queue\\ndelay`` to every socket of
its database in that directory. The directory is ``MYSQLQ_HINT_DIR``, else ``/run/mysqlq`` (created
world-writable and sticky, like ``/tmp``, when this process may), else a per-user temp directory that
only processes of the same user and ``TMPDIR`` find, which is why falling back to it is logged.
"""

from __future__ import annotations

import contextlib
import errno
import hashlib
import os
import socket
import threading
import time
from collections.abc import Iterable
from pathlib import Path

from mysqlq.core import logs
from mysqlq.core.config import Settings
from mysqlq.hint.wire import Hint

RUN_DIR = Path("/run/mysqlq")
MAX_DATAGRAMS = 256  # read per wake-up, so that a flood cannot keep the worker reading forever

log = logs.get_logger("mysqlq.hint")


def _fallback_dir() -> Path:
    import tempfile  # here: with shutil and the compression modules it brings, 5 ms that most never need

    return Path(tempfile.gettempdir()) / f"mysqlq-{os.getuid()}"


def _run_dir(create: bool) -> bool:
    """Is /run/mysqlq usable (creating it, mode 1777 like the systemd unit does, if asked and allowed)?

    A worker binds there (needs write access); a producer only looks and sends (needs read access).
    """
    if RUN_DIR.is_dir():
        return os.access(RUN_DIR, (os.W_OK if create else os.R_OK) | os.X_OK)
    if not create:
        return False
    try:
        RUN_DIR.mkdir()
        os.chmod(RUN_DIR, 0o1777)  # mkdir's mode is cut by the umask
    except FileExistsError:
        return os.access(RUN_DIR, os.W_OK | os.X_OK)
    except OSError:
        return False
    return True


def hint_dir(settings: Settings, create: bool = False) -> tuple[Path, bool]:
    """The hint directory and whether it is the per-user fallback (see the module docstring)."""
    chosen = settings.hint_dir or os.environ.get("MYSQLQ_HINT_DIR")
    if chosen:
        return Path(chosen), False
    if _run_dir(create):
        return RUN_DIR, False
    return _fallback_dir(), True


def prefix(settings: Settings) -> str:
    """Socket names of one database start with this."""
    return hashlib.sha1(settings.dsn.identity.encode()).hexdigest()[:12]


# The kernel stamps a directory's mtime with a coarse clock (a tick of a few ms), so a socket bound
# just after a listing may leave the stamp as it was: a listing is trusted only once it was read this
# long after the directory's last change.
SETTLE_NS = 50_000_000
RELIST = 1.0  # seconds a listing is used at most, whatever the mtime says (a clock step, a coarse filesystem)


class LocalSender:
    """A producer's unix socket, sending to every worker socket of its database in the hint directory."""

    def __init__(self, settings: Settings) -> None:
        folder, self.fallback = hint_dir(settings)
        self.folder = str(folder)  # stat'ed per enqueue: a str spares the Path conversion each time
        self.prefix = prefix(settings) + "."
        self._sock: socket.socket | None = None
        self._sock_lock = threading.Lock()  # a Producer's threads share this sender
        self._listing: list[str] | None = None
        self._listed_mtime = 0
        self._listed_at = 0.0  # monotonic
        self._settled = False

    def paths(self) -> list[str]:
        """The worker sockets of this database here. The directory is listed again only when it
        changed (its mtime moved), its last listing is not yet settled, or RELIST has passed: a
        stat instead of a listing per enqueue."""
        try:
            mtime = os.stat(self.folder).st_mtime_ns
        except OSError:
            self._listing = None
            return []
        now = time.monotonic()
        if (self._listing is not None and self._settled and mtime == self._listed_mtime
                and now - self._listed_at < RELIST):
            return self._listing
        read_at = time.time_ns()  # before the listing: a change after this would stamp a later mtime
        try:
            self._listing = [entry.path for entry in os.scandir(self.folder) if entry.name.startswith(self.prefix)]
        except OSError:
            self._listing = None
            return []
        self._listed_mtime, self._listed_at = mtime, now
        self._settled = read_at - mtime > SETTLE_NS
        return self._listing

    def send(self, queues: Iterable[str], delay: float) -> set[int]:
        """Hint the workers found here; returns the pids reached. Never blocks or raises."""
        paths = self.paths()
        if not paths:
            return set()
        sock = self._socket()
        messages = [f"{queue}\n{delay:.6f}".encode() for queue in set(queues)]
        reached = set()
        for path in paths:
            try:
                for message in messages:
                    sock.sendto(message, path)
                reached.add(int(path.rsplit(".", 2)[-2]))
            except ValueError:
                continue
            except OSError as exc:
                if exc.errno == errno.ECONNREFUSED:  # the worker died without cleaning up
                    with contextlib.suppress(OSError):
                        os.unlink(path)
                elif exc.errno == errno.EAGAIN:  # its buffer is full of unread hints: it is awake anyway
                    with contextlib.suppress(ValueError):
                        reached.add(int(path.rsplit(".", 2)[-2]))
        return reached

    def _socket(self) -> socket.socket:
        with self._sock_lock:
            if self._sock is None:
                self._sock = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM)
                self._sock.setblocking(False)
            return self._sock

    def close(self) -> None:
        with self._sock_lock:
            if self._sock is not None:
                self._sock.close()
                self._sock = None


class LocalListener:
    """A worker's unix socket in the hint directory."""

    def __init__(self, settings: Settings) -> None:
        folder, fallback = hint_dir(settings, create=True)
        if fallback:
            log.warning("hint.private_dir", dir=str(folder),
                        fix=f"{RUN_DIR} is missing and cannot be created by this user, so only producers of "
                            "the same user and TMPDIR find this worker: create it with `mkdir -m 1777 "
                            f"{RUN_DIR}`, or set MYSQLQ_HINT_DIR to the same directory for workers and producers")
        folder.mkdir(mode=0o700, parents=True, exist_ok=True)
        self.path = folder / f"{prefix(settings)}.{os.getpid()}.sock"
        with contextlib.suppress(FileNotFoundError):
            self.path.unlink()
        self.sock = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM)
        self.sock.setblocking(False)
        self.sock.bind(str(self.path))
        with contextlib.suppress(OSError):
            os.chmod(self.path, 0o666)  # producers of other users on this host may wake us

    def drain(self) -> list[Hint]:
        """Hints waiting in the socket (malformed datagrams are ignored)."""
        hints: list[Hint] = []
        for _ in range(MAX_DATAGRAMS):
            try:
                data = self.sock.recv(512)
            except OSError:  # BlockingIOError: nothing more
                break
            queue, _, delay = data.decode(errors="replace").partition("\n")
            try:
                hints.append(Hint(queue, max(0.0, float(delay or 0))))
            except ValueError:
                continue
        return hints

    def close(self) -> None:
        self.sock.close()
        with contextlib.suppress(OSError):
            self.path.unlink()
