"""Waiting for something to become true, and for processes to stop: the one way every test, the demo
and the benchmark do it."""

from __future__ import annotations

import signal
import subprocess
import time
from collections.abc import Callable, Iterable
from typing import Any, TypeVar

T = TypeVar("T")


class TimedOut(AssertionError):
    """What was waited for did not happen in time (a test failure, naming what)."""


def wait_for(condition: Callable[[], T], what: str = "the condition", timeout: float = 60.0,
             interval: float = 0.05) -> T:
    """Poll ``condition`` until it returns something true, and return that; raise TimedOut naming
    ``what`` after ``timeout`` seconds."""
    deadline = time.monotonic() + timeout
    while True:
        value = condition()
        if value:
            return value
        if time.monotonic() > deadline:
            raise TimedOut(f"timed out after {timeout:g}s waiting for {what}")
        time.sleep(interval)


def stop_processes(procs: Iterable[subprocess.Popen[Any]], timeout: float = 30.0) -> None:
    """SIGTERM every process still running, then wait for each; one that outlives ``timeout`` is killed."""
    procs = list(procs)
    for proc in procs:
        if proc.poll() is None:
            proc.send_signal(signal.SIGTERM)
    for proc in procs:
        try:
            proc.wait(timeout=timeout)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()
