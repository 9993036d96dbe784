"""What an idle queue costs the server: four workers with default settings and nothing to do send
it at most one statement a second each, counted by the server (its ``Questions`` counter, on a
private server of this module's own, so that only the workers and this test talk to it), whether
concurrency and rate limits were never used or jobs just ran under them. A chore added for a new
feature that runs while nobody uses the feature shows up here.

The window starts long enough after the workers' start that it holds the leader's chores that run
once a minute (retention, the rate limits' tidying, the idle concurrency sweep's look) besides those
that run every few seconds.
"""

from __future__ import annotations

import pathlib
import subprocess
import time
from collections.abc import Iterator
from typing import Any

import pytest

import mysqlq

from ..conftest import MYSQLQ, MariaDBServer, QueueDB, fresh_database, throwaway_mariadb, with_database

pytestmark = pytest.mark.slow

WORKERS = 4
WINDOW = 30.0  # seconds counted
START = 35.0  # seconds from the workers' start to the window's: the minute's chores fall inside it


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[MariaDBServer]:
    """A server nobody else talks to: its counters are the workers' and this test's."""
    with throwaway_mariadb(tmp_path_factory.mktemp("idle-server"), "a private mariadbd to count statements on") \
            as private:
        yield MariaDBServer(private.dsn, private)


@pytest.fixture
def queue(server: MariaDBServer, tmp_path: pathlib.Path) -> Iterator[QueueDB]:
    with fresh_database(server.dsn) as name:
        (tmp_path / "hints").mkdir()
        db = QueueDB(dsn=with_database(server.dsn, name), name=name, server=server, tmp=tmp_path)
        try:
            yield db
        finally:
            db.stop_workers()


class Counter:
    """The server's count of statements received, read on a connection of the test's own; what each
    reading adds by itself is taken off."""

    def __init__(self, queue: QueueDB) -> None:
        self.conn = queue.connect()
        self.cur: Any = self.conn.cursor()
        self.own = -self.read() + self.read()

    def read(self) -> int:
        self.cur.execute("SHOW GLOBAL STATUS LIKE 'Questions'")
        return int(self.cur.fetchone()[1])

    def close(self) -> None:
        self.conn.close()


def start_workers(queue: QueueDB) -> float:
    """WORKERS workers with default settings (only their names differ); returns when they started."""
    started = time.monotonic()
    for n in range(WORKERS):
        out = open(queue.tmp / f"worker-{n}.log", "ab")  # noqa: SIM115
        queue.procs.append(subprocess.Popen([MYSQLQ, "worker", "--name", f"idle{n}"], env=queue.env(),
                                            stdout=out, stderr=subprocess.STDOUT))
        out.close()
    queue.wait_for(lambda: queue.scalar("SELECT COUNT(*) FROM mysqlq_workers") == WORKERS, what="the workers")
    return started


def count_idle(queue: QueueDB, started: float) -> tuple[int, float]:
    """(statements, seconds) over the window, the workers idle."""
    counter = Counter(queue)
    try:
        time.sleep(max(0.0, started + START - time.monotonic()))
        before, since = counter.read(), time.monotonic()
        time.sleep(WINDOW)
        after, until = counter.read(), time.monotonic()
    finally:
        counter.close()
    assert all(proc.poll() is None for proc in queue.procs), queue.logs()
    return after - before - counter.own, until - since


def limit_rows(queue: QueueDB) -> tuple[int, int, int]:
    return (queue.scalar("SELECT COUNT(*) FROM mysqlq_semaphores"),
            queue.scalar("SELECT COUNT(*) FROM mysqlq_semaphore_holders"),
            queue.scalar("SELECT COUNT(*) FROM mysqlq_blocked_jobs"))


def use_concurrency_limits(queue: QueueDB) -> None:
    """Jobs of one key under a limit of one, more than one at a time: some wait blocked for a slot."""
    with queue.producer() as producer:
        producer.enqueue_many([mysqlq.Job("test.limited", {"seconds": 0.05}, concurrency_key="k")
                               for _ in range(12)])
    queue.wait_done(12)
    assert any(line[1] == "lspan" for line in queue.records())
    queue.wait_for(lambda: limit_rows(queue) == (0, 0, 0), what="every slot given back")


def use_rate_limits(queue: QueueDB) -> None:
    """More jobs than their handler's rate limit lets start at once: some are set aside for their turn."""
    with queue.producer() as producer:
        producer.enqueue_many([mysqlq.Job("test.rated") for _ in range(80)])
    queue.wait_done(80)
    assert queue.scalar("SELECT COUNT(*) FROM mysqlq_rate_starts") > 0  # kept a while: the tables are not empty


@pytest.mark.parametrize("use", [None, use_concurrency_limits, use_rate_limits],
                         ids=["limits_unused", "concurrency_limit_used", "rate_limit_used"])
def test_idle_workers_send_at_most_one_statement_a_second_each(queue: QueueDB, use: Any) -> None:
    started = start_workers(queue)
    if use is not None:
        use(queue)
    statements, seconds = count_idle(queue, started)
    print(f"{statements} statements in {seconds:.1f} s: {statements / seconds / WORKERS:.2f} a second per worker")
    assert statements <= WORKERS * seconds, (
        f"{WORKERS} idle workers sent {statements} statements in {seconds:.1f} s "
        f"({statements / seconds / WORKERS:.2f} a second each)")

