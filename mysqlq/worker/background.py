"""The worker's background thread: on a connection of its own it runs the services that must go on
while the main thread is busy with jobs or waiting — the heartbeat (mysqlq.worker.heartbeat) and the
leader's maintainer (mysqlq.leader.maintainer) — each when its ``next_at`` comes."""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Sequence
from typing import Protocol

from mysqlq.core.config import Settings
from mysqlq.core.logs import Log
from mysqlq.store.db import FOREVER, Connection, Cursor, Database

AFTER_ERROR = 1.0  # seconds before a service that failed runs again


class Service(Protocol):
    name: str

    @property
    def next_at(self) -> float: ...  # monotonic

    def run(self) -> None: ...

    def on_connect(self, cur: Cursor) -> None: ...


class BackgroundThread:
    """Runs services on one daemon thread; ``wake`` cuts a wait short (a poll saw the election change)."""

    def __init__(self, settings: Settings, log: Log, wake: threading.Event,
                 stop_requested: Callable[[], float | None]) -> None:
        # Registering waits for the server too, and gives up when the worker is asked to stop.
        self.db = Database(settings.dsn, retry=FOREVER, on_connect=self._on_connect, stop_requested=stop_requested)
        self.log = log
        self.wake = wake
        self.services: Sequence[Service] = ()
        self._retry_at: dict[str, float] = {}
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._loop, name="mysqlq-heartbeat", daemon=True)

    def _on_connect(self, conn: Connection) -> None:
        with conn.cursor() as cur:
            for service in self.services:
                service.on_connect(cur)

    def attach(self, services: Sequence[Service]) -> None:
        """The services to run (before the connection is first used: they hear of every new one)."""
        self.services = services

    def start(self) -> None:
        self._thread.start()

    def stop(self) -> None:
        """Stop after the current service's turn. The thread may be inside a statement; it is not
        waited for long: it ends at its next wake-up, or with the process, and its connection with it."""
        self._stop.set()
        self.wake.set()
        self._thread.join(timeout=0.2)

    def _when(self, service: Service) -> float:
        return max(service.next_at, self._retry_at.get(service.name, 0.0))

    def _loop(self) -> None:
        while not self._stop.is_set():
            for service in self.services:
                if self._stop.is_set():
                    break
                if time.monotonic() >= self._when(service):
                    self._turn(service)
            self.wake.wait(max(0.0, min(map(self._when, self.services)) - time.monotonic()))
            self.wake.clear()
        self.db.close()

    def _turn(self, service: Service) -> None:
        try:
            service.run()
            self._retry_at.pop(service.name, None)
        except Exception as exc:  # never let the thread die: the service runs again soon
            self.log.error(f"{service.name}.error", error=f"{type(exc).__name__}: {exc}")
            self._retry_at[service.name] = time.monotonic() + AFTER_ERROR
