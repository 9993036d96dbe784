"""The journal's native protocol, written directly: each entry one datagram of ``FIELD=value`` lines to
journald's socket, as libsystemd's ``sd_journal_sendv`` sends it (https://systemd.io/JOURNAL_NATIVE_PROTOCOL/).

Pure Python, so a worker writes journal entries with fields (``JOB_ID=``, ``QUEUE=``…) wherever it
runs, with no C extension to build. journald takes the sender's pid, unit and uid from the socket
itself (``_PID=``, ``_SYSTEMD_UNIT=``), as it does for libsystemd's entries. A value holding a newline
(a traceback) goes in the protocol's binary-safe form: the name, a newline, its length as a 64-bit
little-endian number, the bytes. An entry too big for one datagram (past the socket's send buffer:
8 MiB asked for, as libsystemd asks, and the kernel's ``net.core.wmem_max`` at most, 208 KiB by
default) goes, as with libsystemd, in a sealed memfd whose descriptor the datagram carries. Where no
journald listens an entry is dropped silently, again as libsystemd does; any other failure raises
``OSError``.
"""

from __future__ import annotations

import contextlib
import errno
import os
import socket
import struct
import threading

SOCKET = "/run/systemd/journal/socket"
# The send buffer libsystemd asks for too: the kernel caps it at net.core.wmem_max (libsystemd forces it
# past that with CAP_NET_ADMIN, which the worker's hardened unit does not have). A bigger buffer also
# lets a worker write on through a moment when journald lags.
SEND_BUFFER = 8 * 1024 * 1024
_LENGTH = struct.Struct("<Q")
_TOO_BIG = (errno.EMSGSIZE, errno.ENOBUFS)
_GONE = (errno.ECONNREFUSED, errno.ENOTCONN)  # the socket connected to was closed


def binary_safe(field: str) -> bytes:
    """One ``NAME=value`` field as the protocol carries it: ``NAME=value\\n``, or, for a value holding a
    newline, ``NAME\\n`` + its length (64-bit little-endian) + the value + ``\\n``."""
    name, _, value = field.partition("=")
    if "\n" not in value:
        return field.encode("utf-8", "replace") + b"\n"
    data = value.encode("utf-8", "replace")
    return name.encode("utf-8", "replace") + b"\n" + _LENGTH.pack(len(data)) + data + b"\n"


def encode(fields: tuple[str, ...]) -> bytes:
    """An entry's datagram: its ``NAME=value`` fields, each on a line of its own unless its value holds
    newlines (then in the binary-safe form)."""
    text = "\n".join(fields) + "\n"
    if text.count("\n") == len(fields):  # no value holds a newline: the lines as they are (most entries)
        return text.encode("utf-8", "replace")
    return b"".join(map(binary_safe, fields))


class JournalSocket:
    """A datagram socket connected to journald, opened at the first entry and shared by every thread
    (each entry is one datagram, sent whole). Connected, because a send then skips the lookup of the
    socket's path that each ``sendto`` makes (about a microsecond of the few an entry costs). A
    journald whose socket was made anew (a send refused) is connected to again."""

    def __init__(self, path: str = SOCKET) -> None:
        self.path = path
        self._sock: socket.socket | None = None
        self._lock = threading.Lock()

    def _connect(self, stale: socket.socket | None = None) -> socket.socket | None:
        """The connected socket (a new one in place of ``stale``); None when no journald listens."""
        with self._lock:
            if self._sock is stale:
                if stale is not None:
                    stale.close()
                    self._sock = None
                sock = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM)
                with contextlib.suppress(OSError):  # else the kernel's default: larger entries go in a memfd
                    sock.setsockopt(socket.SOL_SOCKET, socket.SO_SNDBUF, SEND_BUFFER)
                try:
                    sock.connect(self.path)
                except (FileNotFoundError, ConnectionRefusedError):
                    sock.close()
                    return None  # no journald here: the entry is dropped, as libsystemd drops it
                except OSError:
                    sock.close()
                    raise
                self._sock = sock
            return self._sock

    def sendv(self, *fields: str) -> None:
        """Send one entry of ``NAME=value`` fields (as ``sd_journal_sendv`` takes them)."""
        self.send(encode(fields))

    def send(self, datagram: bytes) -> None:
        """Send one encoded entry; one too big for a datagram goes through a memfd."""
        sock = self._sock or self._connect()
        for _ in range(2):  # once more on a new connection when journald's socket was made anew
            if sock is None:
                return
            try:
                sock.send(datagram)
                return
            except OSError as exc:
                if exc.errno in _TOO_BIG:
                    self._send_memfd(sock, datagram)
                    return
                if exc.errno not in _GONE:
                    raise
                sock = self._connect(stale=sock)

    def _send_memfd(self, sock: socket.socket, datagram: bytes) -> None:
        """The entry written to a memfd, sealed so journald can trust it will not change, and the
        descriptor passed in an otherwise empty datagram (``SCM_RIGHTS``)."""
        import fcntl  # only here: entries this big are rare

        fd = os.memfd_create("mysqlq-journal-entry", os.MFD_CLOEXEC | os.MFD_ALLOW_SEALING)
        try:
            view = memoryview(datagram)
            while view:
                view = view[os.write(fd, view):]
            fcntl.fcntl(fd, fcntl.F_ADD_SEALS,
                        fcntl.F_SEAL_SHRINK | fcntl.F_SEAL_GROW | fcntl.F_SEAL_WRITE | fcntl.F_SEAL_SEAL)
            sock.sendmsg([], [(socket.SOL_SOCKET, socket.SCM_RIGHTS, struct.pack("i", fd))])
        finally:
            os.close(fd)

    def close(self) -> None:
        with self._lock:
            if self._sock is not None:
                self._sock.close()
                self._sock = None


_default = JournalSocket()


def sendv(*fields: str) -> None:
    """Send one entry to the journal of this machine (or of the namespace this process runs in)."""
    _default.sendv(*fields)
