"""Testing handlers without a worker daemon (mysqlq.testing.drain). This file is also the example the
documentation shows: an application's test that enqueues, drains in-process, and checks the effect."""

from __future__ import annotations

import os
from collections.abc import Iterator
from typing import Any

import pytest

import mysqlq
from mysqlq.testing import Drained, drain

from ..conftest import QueueDB

sent: list[str] = []


def send_welcome(payload: Any, ctx: mysqlq.JobContext) -> None:
    """The application's handler under test (in production: an entry point of group mysqlq.handlers)."""
    if payload["to"].endswith("@invalid"):
        raise ValueError(f"cannot mail {payload['to']}")
    sent.append(payload["to"])


def signup(producer: mysqlq.Producer, address: str) -> None:
    """The application's code under test: it enqueues a job."""
    producer.enqueue("mail.welcome", {"to": address})


@pytest.fixture
def settings(qdb: QueueDB) -> Iterator[mysqlq.Settings]:
    """The test database's settings (in an application: its own test database, migrated once)."""
    sent.clear()
    yield qdb.settings()


def test_signup_sends_the_welcome_mail(settings: mysqlq.Settings) -> None:
    with mysqlq.Producer(settings) as producer:
        signup(producer, "ann@example.com")
        signup(producer, "bob@invalid")
    drained = drain(settings, handlers={"mail.welcome": send_welcome})
    assert drained == Drained(done=1, failed=1)
    assert sent == ["ann@example.com"]


def test_a_drain_uses_the_installed_handlers_and_leaves_retries_for_later(
        qdb: QueueDB, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("MYSQLQ_TEST_RECORD", str(qdb.record_path))  # where the test handlers write
    with qdb.producer() as producer:
        producer.enqueue("test.record", {"tag": "a"})
        producer.enqueue("test.flaky", {"succeed_on": 2})
        producer.enqueue("test.record", queue="elsewhere")  # another queue: not drained
    assert drain(qdb.settings()) == Drained(done=1, failed=1)
    assert sorted(record[-1] for record in qdb.records()) == ["a", "flaky"]
    assert qdb.statuses() == {"done": 1, "scheduled": 1, "ready": 1}
    assert drain(qdb.settings(), queues=["elsewhere"]) == Drained(done=1, failed=0)


def test_a_drain_leaves_the_process_as_it_found_it(qdb: QueueDB) -> None:
    import signal

    handlers = {sig: signal.getsignal(sig) for sig in (signal.SIGTERM, signal.SIGINT, signal.SIGALRM)}
    fds = len(os.listdir("/proc/self/fd"))
    for _ in range(5):
        with qdb.producer() as producer:
            producer.enqueue("test.record")
        assert drain(qdb.settings()).done == 1
    assert {sig: signal.getsignal(sig) for sig in handlers} == handlers
    assert len(os.listdir("/proc/self/fd")) <= fds + 2  # no descriptor left behind per drain
    assert qdb.scalar("SELECT COUNT(*) FROM mysqlq_workers") == 0  # it left the registry
