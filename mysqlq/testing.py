"""Testing an application's handlers without a worker daemon: :func:`drain` runs the jobs that are
ready in this process, with the worker's own code (claims, time limits, retries, outcomes), and
returns when the queues are empty.

    def test_signup_sends_the_welcome_mail(db_settings):
        signup("ann@example.com")                      # enqueues "mail.welcome"
        drained = mysqlq.testing.drain(db_settings, handlers={"mail.welcome": send_welcome})
        assert drained == mysqlq.testing.Drained(done=1, failed=0)

Handlers come from the installed entry points, as in a worker; ``handlers`` may add or replace some
by name for the test (never in production: a worker loads handlers only from entry points).
"""

from __future__ import annotations

import dataclasses
import itertools
import os
import signal
import threading
from collections.abc import Callable, Mapping, Sequence
from typing import Any

from mysqlq.core.config import Dsn, Settings
from mysqlq.core.errors import ConfigError
from mysqlq.core.handlers import Handler, Registry
from mysqlq.worker.loop import Worker

_drains = itertools.count(1)


@dataclasses.dataclass(frozen=True)
class Drained:
    """What a drain ran: jobs done, and jobs that failed (retried later, or dead)."""

    done: int
    failed: int


class _Given(Registry):
    """The installed handlers, with some given by the test."""

    def __init__(self, given: Mapping[str, Callable[..., Any]]) -> None:
        super().__init__()
        self.given = dict(given)

    def resolve(self, name: str) -> Handler:
        found = self.given.get(name)
        return found if found is not None else super().resolve(name)


def drain(settings: Settings | str | None = None, *, queues: Sequence[str] | None = None,
          handlers: Mapping[str, Callable[..., Any]] | None = None) -> Drained:
    """Run every job of ``queues`` that is ready (or comes due within a poll interval) on this thread,
    one at a time, until none is left; returns how many were done and how many failed.

    ``settings``: a Settings, a DSN, or None for MYSQLQ_DSN. A failed job is retried after its
    backoff, as in a worker, so it is counted once and left scheduled (or dead, out of attempts).
    """
    if threading.current_thread() is not threading.main_thread():
        raise ConfigError("mysqlq.testing.drain() runs jobs on the main thread (time limits are signals there)")
    if settings is None or isinstance(settings, str):
        settings = Settings(dsn=Dsn.parse(settings)) if settings else Settings()
    cfg = dataclasses.replace(
        settings, burst=True, hint=False, concurrency=1, poll_interval=min(settings.poll_interval, 0.1),
        queues=tuple(queues) if queues else settings.queues,
        worker_name=f"drain:{os.getpid()}:{next(_drains)}")
    kept = {sig: signal.getsignal(sig) for sig in (signal.SIGTERM, signal.SIGINT, signal.SIGALRM)}
    wakeup_fd = signal.set_wakeup_fd(-1)
    signal.set_wakeup_fd(wakeup_fd)
    try:
        worker = Worker(cfg, _Given(handlers) if handlers else None)
        worker.run()
        return Drained(worker.report.done, worker.report.failed)
    finally:
        for sig, handler in kept.items():
            signal.signal(sig, handler)
        signal.set_wakeup_fd(wakeup_fd)
