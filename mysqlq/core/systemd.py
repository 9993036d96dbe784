"""sd_notify for Type=notify units: READY, STATUS, WATCHDOG, STOPPING; a no-op outside systemd.

Each notification is libsystemd's ``sd_notify``, through systemd-python's ``systemd.daemon.notify``:
one datagram of ``KEY=VALUE`` lines to the socket systemd names in ``$NOTIFY_SOCKET``, from which
systemd learns the sender's pid (what ``NotifyAccess=main`` checks). What mysqlq keeps is when to
send what: the states of a worker, and the watchdog's keep-alive while a job holds the main loop.
"""

from __future__ import annotations

import os
import threading
import time
from collections.abc import Callable

from mysqlq.core import systemdbinding


def no_job() -> float | None:
    return None


class Notifier:
    """Tells systemd how the worker is doing (only when NOTIFY_SOCKET is set, which needs systemd's
    binding: without it, one line saying what to install).

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
        self._notify: Callable[[str], object] | None = None
        if self.enabled:
            systemdbinding.require()
            from systemd import daemon

            self._notify = daemon.notify

    def _send(self, state: str) -> None:
        if self._notify is not None:
            self._notify(state)

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
