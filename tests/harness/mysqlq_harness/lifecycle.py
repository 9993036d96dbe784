"""Processes and servers a test starts and must stop: a context manager that stops what it began when
starting fails, the environment a child process gets, and the init of a namespace made by ``unshare``."""

from __future__ import annotations

import os
import subprocess
from collections.abc import Mapping
from pathlib import Path
from types import TracebackType
from typing import Any, Self

#: What would tie a child to the caller's own systemd: its notify socket and its journal stream.
CALLERS_SYSTEMD = ("NOTIFY_SOCKET", "JOURNAL_STREAM")
# A trace the caller was handed (a CI system's or otel-cli's): `mysqlq enqueue` would store it, and
# tests that expect no trace context would see one. Tests that want it pass it in ``extra``.
CALLERS_TRACE = ("TRACEPARENT", "TRACESTATE")


class StartStop:
    """``with Thing(...) as thing``: ``start()`` on entry (``stop()`` if it fails half-way), ``stop()`` on exit."""

    def start(self) -> None:
        raise NotImplementedError

    def stop(self) -> None:
        raise NotImplementedError

    def __enter__(self) -> Self:
        try:
            self.start()
        except BaseException:
            self.stop()
            raise
        return self

    def __exit__(self, kind: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None) -> None:
        self.stop()


def child_env(extra: Mapping[str, str] | None = None, *, keep_settings: bool = True) -> dict[str, str]:
    """The environment for a child process (a worker, the CLI): the caller's, without its systemd's
    notify socket and journal stream (the child would report to them) or a trace it was handed,
    without its ``MYSQLQ_*`` settings unless ``keep_settings``; then ``extra``."""
    env = {name: value for name, value in os.environ.items()
           if name not in CALLERS_SYSTEMD and name not in CALLERS_TRACE
           and (keep_settings or not name.startswith("MYSQLQ_"))}
    env.update(extra or {})
    return env


def unshare_init(proc: subprocess.Popen[Any]) -> int:
    """The pid of the init that ``unshare --fork``, run by ``proc`` (at once or after an exec), forked;
    0 while there is none yet."""
    try:
        children = Path(f"/proc/{proc.pid}/task/{proc.pid}/children").read_text().split()
        # Until its exec, the pid may still be a shell's; the fork of unshare is the init.
        is_unshare = Path(f"/proc/{proc.pid}/comm").read_text().strip() == "unshare"
    except OSError:
        return 0
    return int(children[0]) if children and is_unshare else 0
