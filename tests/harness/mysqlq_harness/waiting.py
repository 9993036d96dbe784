"""Waiting for something to become true, for jobs to be done, and for processes to stop: the one way
every test, the demo and the benchmark do it."""

from __future__ import annotations

import signal
import subprocess
import time
from collections.abc import Callable, Iterable
from typing import Any, TypeVar

T = TypeVar("T")


class TimedOut(AssertionError):
    """What was waited for did not happen in time (a test failure, naming what)."""


def wait_for(condition: Callable[[], T], what: str | Callable[[], str] = "the condition", timeout: float = 60.0,
             interval: float = 0.05) -> T:
    """Poll ``condition`` until it returns something true, and return that; raise TimedOut naming
    ``what`` after ``timeout`` seconds. ``what`` may be a function, called only then, to say what was
    seen meanwhile (a log, the last count)."""
    deadline = time.monotonic() + timeout
    while True:
        value = condition()
        if value:
            return value
        if time.monotonic() > deadline:
            raise TimedOut(f"timed out after {timeout:g}s waiting for {what() if callable(what) else what}")
        time.sleep(interval)


def done_jobs(cur: Any, since: int = 0) -> int:
    """How many jobs with an id above ``since`` are done, live or moved to the history, read through
    ``cur`` (a DB-API cursor of an autocommit connection: the harness imports no driver). Each table
    counted on its own index and the two counts added: a derived table of both (jobs.every_job) would
    be written out before it is counted, at every poll of a benchmark's drain."""
    where = "id > %(since)s AND status = 'done'" if since else "status = 'done'"  # else each index on status
    cur.execute(f"SELECT (SELECT COUNT(*) FROM mysqlq_jobs WHERE {where})"
                f" + (SELECT COUNT(*) FROM mysqlq_jobs_history WHERE {where})", {"since": since})
    return int(cur.fetchone()[0])


def wait_done(cur: Any, count: int, *, since: int = 0, timeout: float = 60.0, interval: float = 0.02) -> float:
    """Until at least ``count`` jobs with an id above ``since`` are done (see done_jobs); returns
    time.perf_counter() at that moment, for the benchmark's clocks."""
    seen = [0]

    def enough() -> bool:
        seen[0] = done_jobs(cur, since)
        return seen[0] >= count

    wait_for(enough, lambda: f"{count} jobs to be done ({seen[0]} are)", timeout, interval)
    return time.perf_counter()


def stop_processes(procs: Iterable[subprocess.Popen[Any]], timeout: float = 30.0) -> None:
    """SIGTERM every process still running, then wait for them; whoever is still there ``timeout``
    seconds after the signal is killed."""
    procs = list(procs)
    for proc in procs:
        if proc.poll() is None:
            proc.send_signal(signal.SIGTERM)
    deadline = time.monotonic() + timeout
    for proc in procs:
        try:
            proc.wait(timeout=max(0.1, deadline - time.monotonic()))
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()
