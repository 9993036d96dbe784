"""sd_notify for Type=notify units: READY, STATUS, WATCHDOG, STOPPING; a no-op outside systemd."""

from __future__ import annotations

import os

from systemd import daemon


class Notifier:
    """Tells systemd how the worker is doing (only when NOTIFY_SOCKET is set)."""

    def __init__(self) -> None:
        self.enabled = bool(os.environ.get("NOTIFY_SOCKET"))
        usec = os.environ.get("WATCHDOG_USEC", "")
        pid = os.environ.get("WATCHDOG_PID", "")
        watched = usec.isdigit() and (not pid or pid == str(os.getpid()))
        self.watchdog_interval = int(usec) / 1e6 / 2 if watched else None  # ping twice per period

    def _send(self, state: str) -> None:
        if self.enabled:
            daemon.notify(state)

    def ready(self, status: str) -> None:
        self._send(f"READY=1\nSTATUS={status}\nMAINPID={os.getpid()}")

    def status(self, text: str) -> None:
        self._send(f"STATUS={text}")

    def watchdog(self) -> None:
        if self.watchdog_interval is not None:
            self._send("WATCHDOG=1")

    def stopping(self, status: str) -> None:
        self._send(f"STOPPING=1\nSTATUS={status}")
