"""mysqlq on a 3-node MariaDB Galera cluster (mysqlq_harness.galera): migrations and leadership
that do not rely on the node-local GET_LOCK, a process-list check that judges only its own node's
connections, and a drain that survives a node's kill -9 with nothing lost or run twice."""

from __future__ import annotations

import json
import os
import pathlib
import secrets
import subprocess
import time
from collections.abc import Iterator

import pytest
from mysqlq_harness.galera import PrivateGalera

from mysqlq import Dsn, Job, Producer, Settings
from mysqlq.store.db import connect

from .conftest import MYSQLQ, unavailable

pytestmark = pytest.mark.slow



@pytest.fixture(scope="module")
def cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[PrivateGalera]:
    """A private 3-node cluster for this module (about 30 s to bootstrap and join)."""
    for needed in ("/usr/bin/mariabackup", "/usr/bin/socat"):
        if not os.path.exists(needed):
            unavailable(f"{needed} is missing: `make deps` installs mariadb-backup and socat")
    galera = PrivateGalera(tmp_path_factory.mktemp("galera"), die_with_parent=True)
    try:
        galera.start()
    except Exception as exc:
        galera.kill()
        unavailable(f"cannot start a private Galera cluster: {exc}")
    try:
        yield galera
    finally:
        try:
            galera.stop()
        except Exception:
            galera.kill()


def node_dsn(cluster: PrivateGalera, database: str, first: int) -> str:
    """Every node, starting with ``first`` (1-3): the worker's home node, then where it fails over."""
    order = [first, *(n for n in (1, 2, 3) if n != first)]
    hosts = ",".join(f"127.0.0.1:{cluster.node(n).port}" for n in order)
    return f"mysql://root@{hosts}/{database}"


@pytest.fixture
def database(cluster: PrivateGalera) -> Iterator[str]:
    name = "mysqlq_g_" + secrets.token_hex(4)
    conn = connect(Dsn.parse(node_dsn(cluster, "test", 1)))
    with conn.cursor() as cur:
        cur.execute(f"CREATE DATABASE {name}")
    conn.close()
    yield name
    conn = connect(Dsn.parse(node_dsn(cluster, "test", 1)))
    with conn.cursor() as cur:
        cur.execute(f"DROP DATABASE IF EXISTS {name}")
    conn.close()


def run(args: list[str], dsn: str, **env: str) -> subprocess.CompletedProcess[str]:
    full = {**os.environ, "MYSQLQ_DSN": dsn, "MYSQLQ_LOG_FORMAT": "console", **env}
    full.pop("NOTIFY_SOCKET", None)
    full.pop("JOURNAL_STREAM", None)
    return subprocess.run([MYSQLQ, *args], env=full, capture_output=True, text=True, timeout=120, check=False)


class Workers:
    """`mysqlq worker` processes, one per node, logging to files."""

    def __init__(self, cluster: PrivateGalera, database: str, tmp: pathlib.Path) -> None:
        self.cluster, self.database, self.tmp = cluster, database, tmp
        self.procs: list[subprocess.Popen[bytes]] = []

    def start(self, node: int, *args: str) -> subprocess.Popen[bytes]:
        env = {**os.environ, "MYSQLQ_DSN": node_dsn(self.cluster, self.database, node), "MYSQLQ_LOG_FORMAT": "console",
               "MYSQLQ_HINT_DIR": str(self.tmp / f"hints{node}"), "MYSQLQ_TEST_RECORD": str(self.tmp / "record.txt")}
        env.pop("NOTIFY_SOCKET", None)
        env.pop("JOURNAL_STREAM", None)
        out = open(self.tmp / f"worker-{node}.log", "ab")  # noqa: SIM115
        proc = subprocess.Popen([MYSQLQ, "worker", "--name", f"n{node}", "--poll-interval", "0.5",
                                 "--retry-base", "0.05", *args], env=env, stdout=out, stderr=subprocess.STDOUT)
        out.close()
        self.procs.append(proc)
        return proc

    def logs(self) -> str:
        return "\n".join(p.read_text(errors="replace") for p in sorted(self.tmp.glob("worker-*.log")))

    def stop(self) -> None:
        for proc in self.procs:
            if proc.poll() is None:
                proc.terminate()
        for proc in self.procs:
            try:
                proc.wait(timeout=60)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait()


@pytest.fixture
def workers(cluster: PrivateGalera, database: str, tmp_path: pathlib.Path) -> Iterator[Workers]:
    found = Workers(cluster, database, tmp_path)
    yield found
    found.stop()


def scalar(dsn: str, sql: str) -> object:
    conn = connect(Dsn.parse(dsn))
    try:
        with conn.cursor() as cur:
            cur.execute(sql)
            row = cur.fetchone()
            return row[0] if row else None
    finally:
        conn.close()


def test_migrate_on_every_node_at_once_applies_each_migration_once(cluster: PrivateGalera, database: str) -> None:
    procs = [subprocess.Popen([MYSQLQ, "migrate"], env={**os.environ, "MYSQLQ_DSN": node_dsn(cluster, database, n)},
                              stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True) for n in (1, 2, 3)]
    outputs = [proc.communicate(timeout=120) for proc in procs]
    assert [proc.returncode for proc in procs] == [0, 0, 0], outputs
    said = sorted(out.strip().split(" to ")[0] for out, _ in outputs)
    assert said == ["schema is up", "schema is up", "schema migrated"], outputs
    dsn = node_dsn(cluster, database, 2)
    assert scalar(dsn, "SELECT COUNT(*) FROM mysqlq_schema_version") == scalar(dsn, "SELECT MAX(version) "
                                                                                   "FROM mysqlq_schema_version")


def test_check_names_the_cluster_mode(cluster: PrivateGalera, database: str) -> None:
    dsn = node_dsn(cluster, database, 1)
    assert run(["migrate"], dsn).returncode == 0
    result = run(["check"], dsn)
    assert "Galera" in result.stdout, result.stdout + result.stderr


def test_one_leader_for_the_cluster_and_no_live_worker_reaped(cluster: PrivateGalera, database: str,
                                                              workers: Workers) -> None:
    dsn = node_dsn(cluster, database, 1)
    assert run(["migrate"], dsn).returncode == 0
    for node in (1, 2, 3):
        workers.start(node, "--heartbeat-interval", "1", "--lease", "5")
    time.sleep(20)  # many reaper rounds; each node's process list lacks the other nodes' workers
    listing = json.loads(run(["workers", "--json"], dsn).stdout)
    assert sorted(w["name"] for w in listing) == ["n1", "n2", "n3"]
    assert sum(1 for w in listing if w["leader"]) == 1
    assert len({w["node"] for w in listing}) == 3
    logs = workers.logs()
    assert "reaper.reaped" not in logs and "worker.registration_lost" not in logs
    assert logs.count("reaper.leader ") == 1


def test_a_drain_survives_a_node_killed_mid_way(cluster: PrivateGalera, database: str, workers: Workers,
                                                 tmp_path: pathlib.Path) -> None:
    """Workers on every node drain plain and transactional jobs while node 3 is killed -9 and rejoins:
    every job done, none lost, one effect per transactional job, no live worker reaped."""
    dsn = node_dsn(cluster, database, 1)
    assert run(["migrate"], dsn).returncode == 0
    conn = connect(Dsn.parse(dsn))
    with conn.cursor() as cur:
        cur.execute("CREATE TABLE test_effects (id BIGINT AUTO_INCREMENT PRIMARY KEY, job_id BIGINT NOT NULL, "
                    "attempt INT NOT NULL, KEY (job_id))")
    conn.close()
    total = 3000
    jobs = [Job("test.record" if i % 2 else "test.effect", {"sleep": 0.002} if i % 2 else None) for i in range(total)]
    with Producer(Settings(dsn=Dsn.parse(dsn), hint=False)) as producer:
        producer.enqueue_many(jobs)
    for node in (1, 2, 3):
        workers.start(node, "--batch-size", "20", "--heartbeat-interval", "1", "--lease", "10")

    def done() -> int:
        return int(scalar(dsn, "SELECT COUNT(*) FROM mysqlq_jobs WHERE status = 'done'") or 0)

    deadline = time.monotonic() + 120
    while done() < total // 4:
        assert time.monotonic() < deadline, "the drain did not start"
        time.sleep(0.2)
    cluster.node(3).kill()
    cluster.rejoin(3)
    deadline = time.monotonic() + 240
    while done() < total:
        assert time.monotonic() < deadline, f"only {done()} of {total} jobs done"
        time.sleep(0.5)
    assert scalar(dsn, "SELECT COUNT(*) FROM mysqlq_jobs WHERE status <> 'done'") == 0
    effects = total // 2
    assert scalar(dsn, "SELECT COUNT(*) FROM test_effects") == effects
    assert scalar(dsn, "SELECT COUNT(DISTINCT job_id) FROM test_effects") == effects
    logs = workers.logs()
    assert "reaper.reaped" not in logs, "a live worker was taken for dead"
    assert all(proc.poll() is None for proc in workers.procs), "a worker exited"
    lines = (tmp_path / "record.txt").read_text().split("\n")
    plain_runs = [line.split()[0] for line in lines if line.strip() and line.split()[2] == "default"]
    assert len(set(plain_runs)) == total // 2
