"""sd_notify for Type=notify units: READY, STATUS, WATCHDOG, STOPPING; a no-op outside systemd.

The protocol is one datagram of ``KEY=VALUE`` lines to the AF_UNIX socket systemd names in
``$NOTIFY_SOCKET`` (a path, or an abstract name written with a leading ``@``); systemd learns the
sender's pid from the socket itself, which is what ``NotifyAccess=main`` checks. Written here in a few
lines, as libsystemd's ``sd_notify`` does it, so that no C extension is needed for it.
"""

from __future__ import annotations

import os
import socket
import threading
import time
from collections.abc import Callable


def notify(state: str, address: str | None = None) -> bool:
    """Send ``state`` (``KEY=VALUE`` lines) to systemd's notification socket; False when there is none
    (``$NOTIFY_SOCKET`` unset, or a kind of address other than a unix socket). A socket that is gone
    raises ``OSError``, as systemd's own ``sd_notify`` reports it."""
    address = os.environ.get("NOTIFY_SOCKET", "") if address is None else address
    if address.startswith("@"):
        address = "\0" + address[1:]  # an abstract socket: no file, a name in the kernel
    elif not address.startswith("/"):
        return False
    with socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM) as sock:
        sock.sendto(state.encode("utf-8", "replace"), address)
    return True


def no_job() -> float | None:
    return None


class Notifier:
    """Tells systemd how the worker is doing (only when NOTIFY_SOCKET is set).

    The main loop pings the watchdog itself between jobs. While a job runs on the main thread
    (one slot, or a very quick handler) the loop is busy for up to the job's time limit, so a
    keep-alive thread pings instead, but only as long as that limit has not passed: a handler
    stuck beyond it, or a stopped process, stops the pings and systemd's ``WatchdogSec=`` fires.
    Jobs in other slots leave the main loop free to ping; one stuck there makes the worker exit.
    ``job_deadline`` says when the time limit of the job on the main thread ends (monotonic; None
    when none runs there): the worker points it at its runner's alarm.
    """

    def __init__(self, job_deadline: Callable[[], float | None] = no_job) -> None:
        self.enabled = bool(os.environ.get("NOTIFY_SOCKET"))
        usec = os.environ.get("WATCHDOG_USEC", "")
        pid = os.environ.get("WATCHDOG_PID", "")
        watched = self.enabled and usec.isdigit() and int(usec) > 0 and (not pid or pid == str(os.getpid()))
        self.watchdog_interval = int(usec) / 1e6 / 2 if watched else None  # ping twice per period
        self.job_deadline = job_deadline
        self._closed = threading.Event()
        self._keepalive: threading.Thread | None = None

    def _send(self, state: str) -> None:
        if self.enabled:
            notify(state)

    def ready(self, status: str) -> None:
        self._send(f"READY=1\nSTATUS={status}\nMAINPID={os.getpid()}")
        if self.watchdog_interval is not None and self._keepalive is None:
            self._keepalive = threading.Thread(target=self._keep_alive, name="mysqlq-watchdog", daemon=True)
            self._keepalive.start()

    def status(self, text: str) -> None:
        self._send(f"STATUS={text}")

    def extend_start(self, seconds: float, status: str) -> None:
        """Not ready yet, for a good reason: give systemd's start timeout ``seconds`` more."""
        self._send(f"EXTEND_TIMEOUT_USEC={round(seconds * 1e6)}\nSTATUS={status}")

    def watchdog(self) -> None:
        if self.watchdog_interval is not None:
            self._send("WATCHDOG=1")

    def stopping(self, status: str) -> None:
        self._send(f"STOPPING=1\nSTATUS={status}")

    def close(self) -> None:
        """Stop the keep-alive thread (the process is about to exit)."""
        self._closed.set()
        if self._keepalive is not None:
            self._keepalive.join(timeout=5)

    def _keep_alive(self) -> None:
        assert self.watchdog_interval is not None
        while not self._closed.wait(self.watchdog_interval / 2):
            deadline = self.job_deadline()
            if deadline is not None and time.monotonic() < deadline:
                self.watchdog()
