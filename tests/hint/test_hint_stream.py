"""The has-task hint under a steady stream of jobs, as users run it: several workers with default
slots (and one slot), every worker hinted for every commit, a handler that does some I/O. A hinted
wake-up must never wait for the wake budget (it did when the budget charged wake-ups whose outcomes
were not yet written, and the herd's fruitless ones): every worker's last line says how many did."""

from __future__ import annotations

import contextlib
import re
import socket
import time

import pytest

from mysqlq.hint.limit import BURST, RATE

from ..conftest import QueueDB

INTERVAL = 0.02  # a job every 20 ms
JOBS = 150  # three seconds of them


def postponed(log: str) -> int:
    found = re.findall(r"worker\.stopped\b.*?\bhints_postponed=(\d+)", log)
    assert found, f"no worker.stopped line with hints_postponed in:\n{log[-2000:]}"
    return sum(int(count) for count in found)


@pytest.mark.parametrize(("workers", "concurrency"), [(4, None), (1, None), (4, "1"), (1, "1")],
                         ids=["four-default-slots", "one-default-slots", "four-one-slot", "one-one-slot"])
def test_a_steady_stream_never_postpones_a_hinted_wake_up(qdb: QueueDB, workers: int, concurrency: str | None) -> None:
    qdb.query("CREATE TABLE probe_rows (id BIGINT AUTO_INCREMENT PRIMARY KEY, job_id BIGINT NOT NULL)")
    options = ["--poll-interval", "2"]  # the default: a wake-up postponed or lost would show as a wait
    if concurrency:
        options += ["--concurrency", concurrency]
    for index in range(workers):
        qdb.worker(*options, "--name", f"stream-{index}")
    qdb.wait_for(lambda: len(list((qdb.tmp / "hints").iterdir())) == workers, what="every worker's hint socket")
    qdb.wait_for(lambda: qdb.scalar("SELECT COUNT(*) FROM mysqlq_workers") == workers, what="every worker registered")
    time.sleep(0.5)  # past their first poll: idle, waiting on the hint
    with qdb.producer() as producer:
        tick = time.monotonic()
        for _ in range(JOBS):
            producer.enqueue("test.probe", {"t": time.time()})
            tick += INTERVAL
            time.sleep(max(0.0, tick - time.monotonic()))
    qdb.wait_done(JOBS, timeout=60)
    qdb.stop_workers()
    assert postponed(qdb.logs()) == 0
    assert qdb.scalar("SELECT COUNT(*) FROM probe_rows") == JOBS  # every job ran, once
    assert qdb.scalar("SELECT COUNT(DISTINCT job_id) FROM probe_rows") == JOBS
    assert len(qdb.records()) == JOBS


def com_update(qdb: QueueDB) -> int:
    return int(qdb.query("SHOW GLOBAL STATUS LIKE 'Com_update'")[0][1])


def test_a_flood_of_hints_on_an_idle_queue_costs_at_most_the_budget(qdb: QueueDB) -> None:
    """Unsigned local hints (anyone who may write in the hint directory can send them) at about
    2,000 a second for 3 s, to an idle worker: each wake-up finds nothing, so the budget (a burst of
    20, then 10 a second) bounds the claims it sends; the rest are postponed, not lost."""
    qdb.worker("--poll-interval", "60", "--name", "flooded")
    qdb.wait_for(lambda: list((qdb.tmp / "hints").iterdir()), what="the worker's hint socket")
    qdb.wait_for(lambda: qdb.scalar("SELECT COUNT(*) FROM mysqlq_workers") == 1, what="the worker registered")
    time.sleep(0.5)
    (path,) = list((qdb.tmp / "hints").iterdir())
    seconds = 3.0
    before = com_update(qdb)
    with socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM) as sock:
        sock.setblocking(False)
        ends = time.monotonic() + seconds
        while time.monotonic() < ends:
            with contextlib.suppress(BlockingIOError):
                sock.sendto(b"default\n0", str(path))
            time.sleep(0.0005)
    claims = com_update(qdb) - before
    qdb.stop_workers()
    assert claims <= BURST + RATE * seconds + 5, claims  # + 5: the leader's own renewals meanwhile
    assert postponed(qdb.logs()) > 0  # the budget bit: what it did not run now, it postponed
