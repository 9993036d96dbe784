"""Hints across real network boundaries: test hosts made of network namespaces, a private server on one,
the producer on another, the workers on a third, each host with its own hint directory."""

from __future__ import annotations

import json
import pathlib
import re
import secrets
import subprocess
import time
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

import pytest
from mysqlq_harness import netns as netns_hosts
from mysqlq_harness.jobs import EVERY_JOB
from mysqlq_harness.lifecycle import child_env
from mysqlq_harness.mariadb import PrivateMariaDB
from mysqlq_harness.waiting import stop_processes, wait_for

from ..conftest import MYSQLQ, fresh_database, query_once, throwaway_mariadb, unavailable

pytestmark = pytest.mark.slow

PYTHON = str(pathlib.Path(MYSQLQ).parent / "python")
POLL = 30.0  # the workers' poll interval: only a hint can start a job sooner
# Sends datagrams to a worker from the host it runs on: argv = address, key (hex, or "random"), json list of
# queues, and how many times to send each one (the same bytes: a replay).
SEND = """\
import json, os, socket, sys
from mysqlq.hint import wire
host, port = sys.argv[1].rsplit(":", 1)
key = os.urandom(32) if sys.argv[2] == "random" else bytes.fromhex(sys.argv[2])
with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as sock:
    for queue in json.loads(sys.argv[3]):
        data = wire.encode(key, queue, 0.0)
        for _ in range(int(sys.argv[4])):
            sock.sendto(data, (host, int(port)))
"""
# A long-lived producer (a web process, say): enqueue jobs a little apart, on one Producer.
PRODUCE = """\
import sys, time
import mysqlq
with mysqlq.Producer(mysqlq.Settings(dsn=mysqlq.Dsn.parse(sys.argv[1]))) as producer:
    for i in range(int(sys.argv[2])):
        producer.enqueue("test.record", {"tag": f"warm{i}"})
        time.sleep(0.3)
"""

# A steady stream: argv[2] jobs, one every 20 ms, each taking a few ms in its handler.
STREAM = """\
import sys, time
import mysqlq
with mysqlq.Producer(mysqlq.Settings(dsn=mysqlq.Dsn.parse(sys.argv[1]))) as producer:
    producer.enqueue("test.record", {"tag": "first"})  # connected, and the registry read, before the stream
    time.sleep(0.5)
    tick = time.monotonic()
    for i in range(int(sys.argv[2])):
        producer.enqueue("test.record", {"tag": f"s{i}", "sleep": 0.003})
        tick += 0.02
        time.sleep(max(0.0, tick - time.monotonic()))
"""

# Enqueue one long job of the handler in argv[2]; print its id as a JSON list.
ENQUEUE_ONE = """
import json, sys
import mysqlq
with mysqlq.Producer(dsn=sys.argv[1]) as producer:
    print(json.dumps([producer.enqueue(sys.argv[2], {"seconds": 60})]))
"""


@dataclass
class Lab:
    hosts: netns_hosts.Hosts
    server: PrivateMariaDB
    tmp: pathlib.Path


@pytest.fixture(scope="module")
def lab(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Lab]:
    reason = netns_hosts.unavailable()
    if reason:
        unavailable(reason)
    tmp = tmp_path_factory.mktemp("hint-net")
    with (netns_hosts.Hosts(["db", "producer", "workers"]) as hosts,
          throwaway_mariadb(tmp / "mariadb", "a private mariadbd on a test host", bind_address=hosts.address("db"),
                            netns=hosts.namespace("db")) as server):
        yield Lab(hosts, server, tmp)


@dataclass
class Site:
    """One database on the lab's server, an application user with only row privileges, and helpers."""

    lab: Lab
    name: str
    app_dsn: str
    tmp: pathlib.Path
    procs: list[subprocess.Popen[bytes]]

    def query(self, sql: str, params: Any = None) -> list[tuple[Any, ...]]:
        import MySQLdb

        return query_once(MySQLdb.connect(unix_socket=str(self.lab.server.socket), user="root", database=self.name,
                                          autocommit=True), sql, params)

    def env(self, host: str, **extra: str) -> dict[str, str]:
        hints = self.tmp / f"{host}-hints"  # each host its own hint directory
        hints.mkdir(exist_ok=True)
        return child_env({"MYSQLQ_DSN": self.app_dsn, "MYSQLQ_HINT_DIR": str(hints), "MYSQLQ_LOG_FORMAT": "console",
                          "MYSQLQ_TEST_RECORD": str(self.tmp / "record.txt"), **extra}, keep_settings=False)

    def worker(self, name: str, *args: str) -> subprocess.Popen[bytes]:
        log = open(self.tmp / f"worker-{name}.log", "ab")  # noqa: SIM115
        proc = subprocess.Popen([*self.lab.hosts.enter("workers"), MYSQLQ, "--log-level", "debug", "worker",
                                 "--name", name, "--poll-interval", str(POLL), *args],
                                env=self.env("workers"), stdout=log, stderr=subprocess.STDOUT)
        log.close()
        self.procs.append(proc)
        return proc

    def run(self, host: str, *args: str, timeout: float = 60) -> subprocess.CompletedProcess[str]:
        result = subprocess.run([*self.lab.hosts.enter(host), *args], env=self.env(host), capture_output=True,
                                text=True, timeout=timeout)
        assert result.returncode == 0, f"{args[:2]} on {host} failed: {result.stderr}"
        return result

    def log(self, name: str) -> str:
        return (self.tmp / f"worker-{name}.log").read_text(errors="replace")

    def records(self) -> list[list[str]]:
        path = self.tmp / "record.txt"
        return [line.split() for line in path.read_text().splitlines()] if path.exists() else []

    def registry(self) -> dict[str, tuple[str | None, bytes | None, Any]]:
        rows = self.query("SELECT name, hint_addr, hint_key, started_at FROM mysqlq_workers")
        return {row[0]: (row[1], row[2], row[3]) for row in rows}


@pytest.fixture
def site(lab: Lab, tmp_path: pathlib.Path) -> Iterator[Site]:
    from mysqlq.core.config import Dsn
    from mysqlq.store.db import connect

    def root(sql: str, params: Any = None) -> None:
        query_once(connect(Dsn.parse(lab.server.dsn)), sql, params)

    with fresh_database(lab.server.dsn, "mysqlq_net_") as name:
        user, password = f"app_{name[-8:]}", secrets.token_hex(8)
        # What producers and workers have today, no more: rows of this database, from the test network.
        root(f"CREATE USER {user}@'10.77.0.%%' IDENTIFIED BY %s", (password,))
        root(f"GRANT SELECT, INSERT, UPDATE, DELETE ON {name}.* TO {user}@'10.77.0.%'")
        app_dsn = f"mysql://{user}:{password}@{lab.hosts.address('db')}:{lab.server.port}/{name}"
        site = Site(lab, name, app_dsn, tmp_path, [])
        try:
            yield site
        finally:
            stop_processes(site.procs, timeout=20)
            root(f"DROP USER IF EXISTS {user}@'10.77.0.%'")


def start_workers(site: Site, *names: str) -> dict[str, tuple[str | None, bytes | None, Any]]:
    for name in names:
        site.worker(name)
    registry = wait_for(lambda: (r := site.registry()) and len(r) == len(names) and all(v[0] for v in r.values())
                        and r, "the workers to register their hint addresses")
    for name in names:
        wait_for(lambda name=name: "hint.listening" in site.log(name), f"worker {name} to listen")
    time.sleep(1.0)  # their first poll (right after start) is behind them: they sleep for POLL seconds now
    return registry


def started_before_a_second_poll(site: Site, registry: dict[str, tuple[str | None, bytes | None, Any]]) -> None:
    """Every job started less than POLL seconds after its worker started (server time): the first poll,
    at start, found nothing, and the second is POLL seconds away, so a hint started each one."""
    rows = site.query(f"SELECT id, worker, started_at FROM {EVERY_JOB} WHERE status = 'done'")
    assert rows
    for job_id, worker, started in rows:
        since = (started - registry[worker][2]).total_seconds()
        assert since < POLL, f"job {job_id} started {since:.1f} s after worker {worker}: that was a poll"


def test_a_job_enqueued_on_another_host_starts_before_the_workers_next_poll(site: Site) -> None:
    registry = start_workers(site, "w1", "w2")
    workers_address = site.lab.hosts.address("workers")
    assert all(addr and addr.startswith(workers_address + ":") for addr, _, _ in registry.values()), registry
    # A fresh process: its first hint goes out once it has read where the workers are.
    site.run("producer", MYSQLQ, "enqueue", "test.record", json.dumps({"tag": "cold"}))
    wait_for(lambda: len(site.records()) == 1, "the job enqueued on the producer host to run")
    # A long-lived producer: later hints use the addresses it keeps.
    site.run("producer", PYTHON, "-c", PRODUCE, site.app_dsn, "4")
    wait_for(lambda: len(site.records()) == 5, "the warm producer's jobs to run")
    started_before_a_second_poll(site, registry)
    assert sorted(r[-1] for r in site.records()) == ["cold", "warm0", "warm1", "warm2", "warm3"]


def test_forged_and_replayed_hints_wake_no_one(site: Site) -> None:
    registry = start_workers(site, "w1")
    addr, key, _ = registry["w1"]
    assert addr and key

    def wakes() -> int:
        return site.log("w1").count("hint.wake")

    # 300 datagrams signed with another key, then one good one: only the good one wakes the worker
    # (and it read the forged ones before it: one socket, in order).
    site.run("producer", PYTHON, "-c", SEND, addr, "random", json.dumps(["default"] * 3), "100")
    site.run("producer", PYTHON, "-c", SEND, addr, key.hex(), json.dumps(["default"]), "1")
    wait_for(lambda: wakes() >= 1, "the signed hint to wake the worker")
    assert wakes() == 1
    # One signed datagram sent 200 times: replays are dropped; a fresh one afterwards wakes it once more.
    site.run("producer", PYTHON, "-c", SEND, addr, key.hex(), json.dumps(["default"]), "200")
    site.run("producer", PYTHON, "-c", SEND, addr, key.hex(), json.dumps(["default"]), "1")
    wait_for(lambda: wakes() >= 3, "the fresh hint to wake the worker")
    time.sleep(0.5)
    assert wakes() == 3, "a replayed hint woke the worker"
    # A hint for a queue it does not serve wakes nothing, however well signed.
    site.run("producer", PYTHON, "-c", SEND, addr, key.hex(), json.dumps(["other"] * 5), "1")
    site.run("producer", PYTHON, "-c", SEND, addr, key.hex(), json.dumps(["default"]), "1")
    wait_for(lambda: wakes() >= 4, "the last hint to wake the worker")
    time.sleep(0.5)
    assert wakes() == 4
    assert site.query("SELECT COUNT(*) FROM mysqlq_jobs")[0][0] == 0


def test_hint_bind_off_leaves_no_address_and_jobs_wait_for_the_poll(site: Site) -> None:
    site.worker("w1", "--hint-bind", "off", "--poll-interval", "1")
    wait_for(lambda: site.registry(), "the worker to register")
    assert site.registry()["w1"][:2] == (None, None)
    result = site.run("producer", MYSQLQ, "enqueue", "test.record", json.dumps({"tag": "polled"}))
    wait_for(lambda: site.records(), "the job to run at the next poll")
    # The producer saw a worker it could not hint and said what to do, once.
    assert result.stderr.count("hint.no_worker_reached") == 1, result.stderr


@pytest.mark.parametrize("handler", ["test.cooperative", "test.acooperative"])
def test_a_job_running_on_the_workers_host_is_cancelled_from_another(site: Site, handler: str) -> None:
    start_workers(site, "w1")
    (job_id,) = json.loads(site.run("producer", PYTHON, "-c", ENQUEUE_ONE, site.app_dsn, handler).stdout)
    wait_for(lambda: [str(job_id), "1", "start"] in [r[:3] for r in site.records()], "the job to start")
    result = site.run("producer", MYSQLQ, "cancel", str(job_id))
    assert result.stdout.strip() == "cancelled 1 job (1 job running: asked to stop)"
    # The worker learns of it from the database (no hint needed), within a second or so.
    wait_for(lambda: [str(job_id), "1", "cancelled"] in [r[:3] for r in site.records()], "the handler to stop",
             timeout=10)
    wait_for(lambda: "job.cancelled" in site.log("w1"), "the worker to log it")
    assert site.query("SELECT status, attempts FROM mysqlq_jobs WHERE id = %s", (job_id,)) == [("cancelled", 1)]


def test_a_steady_stream_from_another_host_wakes_four_workers_without_postponing(site: Site) -> None:
    """Four workers with default slots, every one hinted for each commit from the producer's host: no
    hinted wake-up waits for the wake budget, and every job starts before its worker's next poll."""
    names = ("s1", "s2", "s3", "s4")
    registry = start_workers(site, *names)
    jobs = 150
    site.run("producer", PYTHON, "-c", STREAM, site.app_dsn, str(jobs))
    wait_for(lambda: len(site.records()) == jobs + 1, "every job of the stream to run", timeout=60)
    stop_processes(site.procs, timeout=20)
    started_before_a_second_poll(site, registry)
    postponed = [int(n) for name in names for n in re.findall(r"worker\.stopped\b.*?\bhints_postponed=(\d+)",
                                                               site.log(name))]
    assert len(postponed) == len(names) and sum(postponed) == 0, postponed
    assert len({record[0] for record in site.records()}) == jobs + 1  # each job once

