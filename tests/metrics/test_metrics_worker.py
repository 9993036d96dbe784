"""`mysqlq worker --metrics-port`: per-handler durations, outcomes, and time waiting vs working."""

from __future__ import annotations

import os
import pathlib

from mysqlq_harness.net import free_port

from ..conftest import QueueDB
from ..ops_fixtures import assert_one_line_error
from ..web_fixtures import scrape


def test_a_worker_serves_its_own_metrics(qdb: QueueDB) -> None:
    port = free_port()
    with qdb.producer() as producer:
        for i in range(5):
            producer.enqueue("test.record", {"i": i}, queue="mail")
        producer.enqueue("test.fail", {}, queue="mail", max_attempts=1)
        producer.enqueue("test.fail", {}, queue="mail", max_attempts=3)
        producer.enqueue("test.sleep", {"seconds": 0.3}, queue="mail")
    qdb.worker("--queue", "mail", "--name", "m1", "--metrics-port", str(port), "--retry-base", "3600")
    url = f"http://127.0.0.1:{port}/metrics"

    def settled() -> object:
        try:
            found = scrape(url)
        except OSError:
            return None  # not listening yet
        outcomes = found.get("mysqlq_worker_jobs_total", {})
        return found if sum(outcomes.values()) == 8 else None

    metrics = qdb.wait_for(settled, timeout=60, what="the worker to run 8 jobs")
    jobs = {dict(key)["handler"] + "/" + dict(key)["outcome"]: value
            for key, value in metrics["mysqlq_worker_jobs_total"].items()}
    assert jobs == {"test.record/done": 5, "test.fail/dead": 1, "test.fail/failed": 1, "test.sleep/done": 1}
    counts = {dict(key)["handler"]: value for key, value in metrics["mysqlq_worker_job_duration_seconds_count"].items()}
    assert counts == {"test.record": 5, "test.fail": 2, "test.sleep": 1}
    sleep = (("handler", "test.sleep"), ("queue", "mail"))
    assert metrics["mysqlq_worker_job_duration_seconds_sum"][sleep] >= 0.3
    assert metrics["mysqlq_worker_job_duration_seconds_bucket"][(*sleep[:1], ("le", "0.25"), *sleep[1:])] == 0
    assert metrics["mysqlq_worker_job_duration_seconds_bucket"][(*sleep[:1], ("le", "0.5"), *sleep[1:])] == 1
    seconds = {dict(key)["state"]: value for key, value in metrics["mysqlq_worker_seconds_total"].items()}
    assert seconds["working"] >= 0.3
    qdb.wait_for(lambda: scrape(url)["mysqlq_worker_seconds_total"][(("state", "waiting"),)] > 0,
                 what="the idle worker to count time waiting")
    assert metrics["mysqlq_worker_info"] == {(("queues", "mail"), ("worker", "m1")): 1.0}


def listening_sockets(pid: int) -> int:
    """How many TCP sockets process ``pid`` listens on (its socket inodes found LISTEN in /proc/net/tcp*)."""
    inodes = set()
    for fd in pathlib.Path(f"/proc/{pid}/fd").iterdir():
        target = os.readlink(fd) if fd.is_symlink() else ""
        if target.startswith("socket:["):
            inodes.add(target[8:-1])
    listening = 0
    for table in ("/proc/net/tcp", "/proc/net/tcp6"):
        for line in pathlib.Path(table).read_text().splitlines()[1:]:
            fields = line.split()
            listening += fields[3] == "0A" and fields[9] in inodes
    return listening


def test_metrics_are_off_unless_asked_for(qdb: QueueDB) -> None:
    plain = qdb.worker("--queue", "mail")
    serving = qdb.worker("--queue", "mail", "--metrics-port", str(free_port()))
    qdb.wait_for(lambda: qdb.scalar("SELECT COUNT(*) FROM mysqlq_workers") == 2, what="the workers to register")
    assert listening_sockets(serving.pid) == 1
    assert listening_sockets(plain.pid) == 0


def test_a_bad_or_busy_metrics_port_is_a_one_line_error(qdb: QueueDB, tmp_path: pathlib.Path) -> None:
    assert_one_line_error(qdb.cli("worker", "--metrics-port", "nine"), "--metrics-port must be PORT or HOST:PORT")
    port = free_port()
    qdb.worker("--queue", "mail", "--metrics-port", f"127.0.0.1:{port}")
    qdb.wait_for(lambda: qdb.scalar("SELECT COUNT(*) FROM mysqlq_workers"), what="the first worker to register")
    busy = qdb.cli("worker", "--burst", "--metrics-port", str(port))
    assert_one_line_error(busy, f"cannot serve worker metrics on 127.0.0.1:{port}")
