"""A producer's end of the hint channel: local sockets first, then the network for the rest."""

from __future__ import annotations

from collections.abc import Iterable

from mysqlq.core.config import Settings
from mysqlq.hint.directory import Directory
from mysqlq.hint.local import LocalSender


class Sender:
    """Sends a hint after each commit. Never blocks, never raises, never fails an enqueue."""

    def __init__(self, settings: Settings) -> None:
        self.enabled = settings.hint
        self.local = LocalSender(settings)
        self.directory = Directory.of(settings.dsn) if settings.hint else None
        if self.directory is not None:
            self.directory.prefetch()  # read the registry now, before the first enqueue needs it

    def notify(self, queues: Iterable[str], delay: float = 0.0) -> int:
        """Wake the workers of this database serving these queues; returns how many were reached
        at once (workers found only after the first read of the registry are not counted)."""
        if not self.enabled:
            return 0
        wanted = set(queues)
        if not wanted:
            return 0
        reached = self.local.send(wanted, delay)
        if self.directory is not None:
            return len(reached) + self.directory.send(wanted, delay, reached)
        return len(reached)

    def close(self) -> None:
        self.local.close()


def notify(settings: Settings, queues: Iterable[str], delay: float = 0.0) -> int:
    """Wake the workers of this database (after your own commit); returns how many were reached at
    once. Never raises and never blocks."""
    sender = Sender(settings)
    try:
        return sender.notify(queues, delay)
    finally:
        sender.close()
