"""The has-task hint under a steady stream of jobs, as users run it: several workers with default
slots (and one slot), every worker hinted for every commit, a handler that does some I/O. A hinted
wake-up must never wait for the wake budget (it did when the budget charged wake-ups whose outcomes
were not yet written, and the herd's fruitless ones): every worker's last line says how many did."""

from __future__ import annotations

import re
import time

import pytest

from .conftest import QueueDB

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
