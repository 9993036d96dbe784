"""The main thread's time limit (mysqlq.worker.running.job_runner.MainThreadTimeLimit): a lazy SIGALRM timer that quick
jobs do not set, which still ends each job at its own limit, whatever limit an earlier job left the timer at."""

from __future__ import annotations

import signal
import time
from collections.abc import Iterator

import pytest

from mysqlq.core.errors import JobTimeout
from mysqlq.worker.running.job_runner import MainThreadTimeLimit


@pytest.fixture
def alarm() -> Iterator[MainThreadTimeLimit]:
    previous = signal.getsignal(signal.SIGALRM)
    made = MainThreadTimeLimit()
    try:
        yield made
    finally:
        made.off()
        signal.signal(signal.SIGALRM, previous)


def run(alarm: MainThreadTimeLimit, limit: float, seconds: float) -> float | None:
    """A job on the main thread that sleeps ``seconds`` under ``limit``: when it was ended, or None."""
    started = time.monotonic()
    alarm.arm(limit, started)
    try:
        while time.monotonic() - started < seconds:
            time.sleep(0.005)
    except JobTimeout:
        return time.monotonic() - started
    finally:
        alarm.disarm()
    return None


def test_quick_jobs_set_the_timer_once(alarm: MainThreadTimeLimit, monkeypatch: pytest.MonkeyPatch) -> None:
    calls: list[float] = []
    real = signal.setitimer

    def counted(which: int, seconds: float, interval: float = 0.0) -> tuple[float, float]:
        calls.append(seconds)
        return real(which, seconds, interval)

    monkeypatch.setattr(signal, "setitimer", counted)
    for _ in range(1000):
        assert run(alarm, 30.0, 0.0) is None
    assert len(calls) == 1  # the first job's; the others end before it would ring


def test_a_job_ends_at_its_own_limit_after_a_quick_job_with_a_shorter_one(alarm: MainThreadTimeLimit) -> None:
    assert run(alarm, 0.3, 0.0) is None  # leaves the timer to ring 0.3 s from now
    ended = run(alarm, 1.0, 3.0)  # the timer rings early for this job, and is set again
    assert ended is not None and 0.95 <= ended < 2.9  # not at 0.3 s, nor left to its natural end


def test_a_job_with_a_shorter_limit_than_the_pending_timer_sets_it_sooner(alarm: MainThreadTimeLimit) -> None:
    assert run(alarm, 60.0, 0.0) is None  # leaves the timer a minute out
    ended = run(alarm, 0.3, 3.0)
    assert ended is not None and 0.25 <= ended < 2.9  # not left to its natural end


def test_the_timer_ringing_between_jobs_is_forgotten(alarm: MainThreadTimeLimit) -> None:
    assert run(alarm, 0.1, 0.0) is None
    time.sleep(0.3)  # it rings with no job running: nothing is raised, nothing stays pending
    assert signal.getitimer(signal.ITIMER_REAL)[0] == 0
    assert run(alarm, 5.0, 0.2) is None
