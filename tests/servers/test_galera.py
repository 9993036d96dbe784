"""mysqlq on a 3-node MariaDB Galera cluster (mysqlq_harness.galera): migrations and leadership
that do not rely on the node-local GET_LOCK, a process-list check that judges only its own node's
connections, and a drain that survives a node's kill -9 with nothing lost or run twice."""

from __future__ import annotations

import json
import os
import pathlib
import subprocess
import threading
import time
from collections.abc import Iterator

import pytest
from mysqlq_harness.galera import PrivateGalera
from mysqlq_harness.jobs import EVERY_JOB
from mysqlq_harness.lifecycle import child_env
from mysqlq_harness.waiting import stop_processes, wait_done

from mysqlq import Dsn, Job, Producer, Settings
from mysqlq.store.db import connect

from ..conftest import MYSQLQ, fresh_database, query_once, throwaway, unavailable
from ..producer.test_dedupe_period import at_once

pytestmark = [pytest.mark.slow, pytest.mark.mariadb_only]


@pytest.fixture(scope="module")
def cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[PrivateGalera]:
    """A private 3-node cluster for this module (about 30 s to bootstrap and join)."""
    for needed in ("/usr/bin/mariabackup", "/usr/bin/socat"):
        if not os.path.exists(needed):
            unavailable(f"{needed} is missing: `make deps` installs mariadb-backup and socat")
    galera = PrivateGalera(tmp_path_factory.mktemp("galera"), die_with_parent=True)
    with throwaway(galera, "a private Galera cluster"):
        yield galera


def node_dsn(cluster: PrivateGalera, database: str, first: int) -> str:
    """Every node, starting with ``first`` (1-3): the worker's home node, then where it fails over."""
    order = [first, *(n for n in (1, 2, 3) if n != first)]
    hosts = ",".join(f"127.0.0.1:{cluster.node(n).port}" for n in order)
    return f"mysql://root@{hosts}/{database}"


@pytest.fixture
def database(cluster: PrivateGalera) -> Iterator[str]:
    with fresh_database(node_dsn(cluster, "test", 1), "mysqlq_g_", migrated=False) as name:
        yield name


def run(args: list[str], dsn: str, **env: str) -> subprocess.CompletedProcess[str]:
    full = child_env({"MYSQLQ_DSN": dsn, "MYSQLQ_LOG_FORMAT": "console", **env})
    return subprocess.run([MYSQLQ, *args], env=full, capture_output=True, text=True, timeout=120, check=False)


class Workers:
    """`mysqlq worker` processes, one per node, logging to files."""

    def __init__(self, cluster: PrivateGalera, database: str, tmp: pathlib.Path) -> None:
        self.cluster, self.database, self.tmp = cluster, database, tmp
        self.procs: list[subprocess.Popen[bytes]] = []

    def start(self, node: int, *args: str) -> subprocess.Popen[bytes]:
        env = child_env({"MYSQLQ_DSN": node_dsn(self.cluster, self.database, node), "MYSQLQ_LOG_FORMAT": "console",
                         "MYSQLQ_HINT_DIR": str(self.tmp / f"hints{node}"),
                         "MYSQLQ_TEST_RECORD": str(self.tmp / "record.txt")})
        out = open(self.tmp / f"worker-{node}.log", "ab")  # noqa: SIM115
        proc = subprocess.Popen([MYSQLQ, "worker", "--name", f"n{node}", "--poll-interval", "0.5",
                                 "--retry-base", "0.05", *args], env=env, stdout=out, stderr=subprocess.STDOUT)
        out.close()
        self.procs.append(proc)
        return proc

    def logs(self) -> str:
        return "\n".join(p.read_text(errors="replace") for p in sorted(self.tmp.glob("worker-*.log")))

    def stop(self) -> None:
        stop_processes(self.procs, timeout=60)


@pytest.fixture
def workers(cluster: PrivateGalera, database: str, tmp_path: pathlib.Path) -> Iterator[Workers]:
    found = Workers(cluster, database, tmp_path)
    yield found
    found.stop()


def scalar(dsn: str, sql: str) -> object:
    rows = query_once(connect(Dsn.parse(dsn)), sql)
    return rows[0][0] if rows else None


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
    cur = conn.cursor()
    cur.execute("CREATE TABLE test_effects (id BIGINT AUTO_INCREMENT PRIMARY KEY, job_id BIGINT NOT NULL, "
                "attempt INT NOT NULL, KEY (job_id))")
    total = 3000
    jobs = [Job("test.record" if i % 2 else "test.effect", {"sleep": 0.002} if i % 2 else None) for i in range(total)]
    with Producer(Settings(dsn=Dsn.parse(dsn), hint=False)) as producer:
        producer.enqueue_many(jobs)
    for node in (1, 2, 3):
        workers.start(node, "--batch-size", "20", "--heartbeat-interval", "1", "--lease", "10")

    wait_done(cur, total // 4, timeout=120, interval=0.2)  # the drain is under way
    cluster.node(3).kill()
    cluster.rejoin(3)
    wait_done(cur, total, timeout=240, interval=0.5)
    conn.close()
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


def test_workflows_released_across_nodes(cluster: PrivateGalera, database: str, workers: Workers,
                                         tmp_path: pathlib.Path) -> None:
    """Groups and chains enqueued on two nodes, their jobs ended by workers on all three: the members
    of one group count down their callback's row from every node (certification conflicts, retried);
    every callback and step runs once, after its parents, with their results."""
    dsn = node_dsn(cluster, database, 1)
    assert run(["migrate"], dsn).returncode == 0
    query_once(connect(Dsn.parse(dsn)), "CREATE TABLE test_effects (id BIGINT AUTO_INCREMENT PRIMARY KEY, "
               "job_id BIGINT NOT NULL, attempt INT NOT NULL, KEY (job_id))")
    groups: list[tuple[int, list[int]]] = []
    chains: list[list[int]] = []
    for node in (1, 2):
        with Producer(Settings(dsn=Dsn.parse(node_dsn(cluster, database, node)), hint=False)) as producer:
            for g in range(100):
                group = producer.group([Job("test.echo", {"value": m}) for m in range(10)], then=Job("test.tgather"))
                groups.append((group.callback, group.members))
                chains.append(producer.chain(*[Job("test.tstep", {"tag": f"{node}.{g}.{s}"}) for s in range(4)]))
    for node in (1, 2, 3):
        workers.start(node, "--batch-size", "10", "--concurrency", "2")
    total = len(groups) * 11 + len(chains) * 4
    conn = connect(Dsn.parse(dsn))
    try:
        wait_done(conn.cursor(), total, timeout=240, interval=0.5)
    finally:
        conn.close()
    assert scalar(dsn, "SELECT COUNT(*) FROM mysqlq_jobs WHERE status <> 'done'") == 0
    transactional = len(groups) + len(chains) * 4
    assert scalar(dsn, "SELECT COUNT(*) FROM test_effects") == transactional
    assert scalar(dsn, "SELECT COUNT(DISTINCT job_id) FROM test_effects") == transactional
    records = (tmp_path / "record.txt").read_text().split("\n")
    assert [line for line in records if " early " in line] == []
    for callback, members in groups:
        result = json.loads(str(scalar(dsn, f"SELECT CAST(result AS CHAR) FROM {EVERY_JOB} WHERE id = {callback}")))
        assert result == {"ids": members, "results": list(range(10)), "statuses": ["done"]}
    for chain in chains:
        tags = json.loads(str(scalar(dsn, f"SELECT CAST(result AS CHAR) FROM {EVERY_JOB} WHERE id = {chain[-1]}")))
        assert len(tags) == 4 and len({tag.rsplit(".", 1)[0] for tag in tags}) == 1
    assert all(proc.poll() is None for proc in workers.procs), "a worker exited"


def test_a_period_key_enqueued_on_every_node_at_once_makes_one_job(cluster: PrivateGalera, database: str) -> None:
    """Producers on all three nodes enqueue one key for a period at the same moment, round after
    round: certification on the key's row lets one of them take it, the others' commits fail and are
    retried, and find it held. Then the periods end, and the next round makes one new job per key."""
    dsn = node_dsn(cluster, database, 1)
    assert run(["migrate"], dsn).returncode == 0
    producers = [Producer(Settings(dsn=Dsn.parse(node_dsn(cluster, database, node)), hint=False), pool_size=3)
                 for node in (1, 2, 3)]
    try:
        def enqueue_everywhere(key: str) -> set[int]:
            return set(at_once([lambda p=p: p.enqueue("test.record", dedupe_key=key, dedupe_scope="1h")
                                for p in producers for _ in range(3)]))

        first = {key: enqueue_everywhere(key) for key in (f"k{n}" for n in range(20))}
        assert all(len(ids) == 1 for ids in first.values()), first
        query_once(connect(Dsn.parse(dsn)), "UPDATE mysqlq_dedupe_periods "
                   "SET expires_at = UTC_TIMESTAMP(6) - INTERVAL 1 MICROSECOND")
        second = {key: enqueue_everywhere(key) for key in first}
        assert all(len(ids) == 1 and ids != first[key] for key, ids in second.items()), second
    finally:
        for producer in producers:
            producer.close()
    assert scalar(dsn, f"SELECT COUNT(*) FROM {EVERY_JOB}") == 2 * len(first)


def test_keyed_producers_on_two_nodes_and_jobs_without_a_key_run_once(cluster: PrivateGalera, database: str,
                                                                      workers: Workers, tmp_path: pathlib.Path) -> None:
    """Fair queues on the cluster: while workers on all three nodes drain jobs without a key, producers
    on nodes 1 and 2 enqueue keyed jobs at once, each its own keys and one key both use (its row
    written from both nodes: certification conflicts, retried). The workers give the jobs without a
    key turns (their row written from every node). Every job runs, none is lost."""
    dsn = node_dsn(cluster, database, 1)
    assert run(["migrate"], dsn).returncode == 0
    plain = 600
    with Producer(Settings(dsn=Dsn.parse(dsn), hint=False)) as producer:
        producer.enqueue_many([Job("test.record", {"sleep": 0.005}) for _ in range(plain)])
    for node in (1, 2, 3):
        workers.start(node, "--batch-size", "20")
    errors: list[BaseException] = []

    def produce(node: int, keys: tuple[str, ...]) -> None:
        try:
            with Producer(Settings(dsn=Dsn.parse(node_dsn(cluster, database, node)), hint=False)) as producer:
                for n in range(60):
                    for key in keys:
                        producer.enqueue("test.record", {"sleep": 0.005, "n": n}, fairness_key=key)
        except BaseException as exc:  # reported below
            errors.append(exc)

    threads = [threading.Thread(target=produce, args=(1, ("a1", "a2", "shared"))),
               threading.Thread(target=produce, args=(2, ("b1", "b2", "shared")))]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout=240)
    assert errors == []
    total = plain + 2 * 60 * 3
    conn = connect(Dsn.parse(dsn))
    try:
        wait_done(conn.cursor(), total, timeout=240, interval=0.5)
    finally:
        conn.close()
    assert scalar(dsn, "SELECT COUNT(*) FROM mysqlq_jobs WHERE status <> 'done'") == 0
    assert scalar(dsn, f"SELECT COUNT(*) FROM {EVERY_JOB}") == total
    lines = (tmp_path / "record.txt").read_text().split("\n")
    runs = [line.split()[0] for line in lines if line.strip() and line.split()[2] == "default"]
    assert len(set(runs)) == total  # every job ran
    # A plain job runs again only when the reaper gave back a claim whose lease lapsed.
    if len(runs) > total:
        assert "reaper.reaped" in workers.logs(), "a job ran twice with no claim given back"
    # One row per key, the shared one too, whichever node enqueued its jobs.
    assert int(str(scalar(dsn, "SELECT COUNT(*) FROM mysqlq_fair_keys WHERE fairness_key <> ''"))) == 5
    assert all(proc.poll() is None for proc in workers.procs), "a worker exited"


def test_group_commits_on_every_node_tell_each_caller_its_own_job_and_a_lost_certification_retries_the_group(
        cluster: PrivateGalera, database: str) -> None:
    """Sixteen threads share one producer on each node, and every fourth enqueue names a dedupe key
    that the other nodes' producers name too: groups of jobs (ids a cluster-size increment apart)
    and keys taken on two nodes at once, whose loser fails certification at COMMIT and is retried
    as one group. Every caller is told the id of its own job, and each key makes one job."""
    dsn = node_dsn(cluster, database, 1)
    assert run(["migrate"], dsn).returncode == 0
    producers = [Producer(Settings(dsn=Dsn.parse(node_dsn(cluster, database, node)), hint=False))
                 for node in (1, 2, 3)]
    per_thread = 30

    def work(node: int, thread: int) -> list[tuple[int, str | None, str]]:
        told = []
        for n in range(per_thread):
            key = f"shared-{n}" if n % 4 == 0 else None
            payload = {"node": node, "thread": thread, "n": n}
            told.append((producers[node].enqueue("test.record", payload, dedupe_key=key), key, json.dumps(payload)))
        return told

    try:
        results: list[list[tuple[int, str | None, str]]] = []
        lock = threading.Lock()

        def one(node: int, thread: int) -> None:
            answers = work(node, thread)
            with lock:
                results.append(answers)

        threads = [threading.Thread(target=one, args=(node, thread)) for node in range(3) for thread in range(16)]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join()
    finally:
        for producer in producers:
            producer.close()
    conn = connect(Dsn.parse(dsn))
    try:
        with conn.cursor() as cur:
            cur.execute("SET SESSION wsrep_sync_wait = 1")
            cur.execute("SELECT id, CAST(payload AS CHAR), dedupe_key FROM mysqlq_jobs")
            rows = {int(job_id): (payload, key) for job_id, payload, key in cur.fetchall()}
    finally:
        conn.close()
    holders: dict[str, int] = {}
    for answers in results:
        for job_id, key, payload in answers:
            if key is None:
                assert json.loads(rows[job_id][0]) == json.loads(payload)
            else:
                assert rows[job_id][1] == key
                assert holders.setdefault(key, job_id) == job_id
    assert len(results) == 48
    assert len(rows) == 48 * (per_thread - len(holders)) + len(holders)
