"""Crash safety: fenced writes, the worker registry, leases, the reaper, poison jobs, previous lives,
and transactional handlers whose effect commits exactly once."""

from __future__ import annotations

import json
import os
import signal

import pytest
from mysqlq_harness.jobs import EVERY_JOB, every_job

from mysqlq import Job
from mysqlq.store import claims
from mysqlq.store import workers as registry
from mysqlq.store.sql import query

from ..conftest import QueueDB


def job_status(qdb: QueueDB, job_id: int) -> str:
    return str(qdb.scalar(f"SELECT status FROM {EVERY_JOB} WHERE id = %s", (job_id,)))


def test_every_write_of_a_claim_that_was_taken_over_changes_nothing(qdb: QueueDB) -> None:
    with qdb.producer() as producer:
        ids = [producer.enqueue("test.record") for _ in range(3)]
    # Two registered workers: a claim writes a worker's id, its name is read from its registration
    # (and written by the statements that end an attempt, from the worker's session).
    qdb.query("""INSERT INTO mysqlq_workers (id, name, host, pid, connection_id, queues, started_at, heartbeat_at)
                 VALUES (1, 'old', 'h', 1, 1, 'default', NOW(6), NOW(6)),
                        (2, 'new', 'h', 2, 2, 'default', NOW(6), NOW(6))""")
    conn = qdb.connect()
    with conn.cursor() as cur:
        cur.execute(query("session_worker"), {"name": "new"})
        assert claims.claim_update(cur, "default", 111, 1, 60, 10) == 3
        # The claim is taken over: its lease ran out, the reaper gave the jobs back, another claimed them.
        cur.execute("UPDATE mysqlq_jobs SET lease_until = NOW(6) - INTERVAL 1 SECOND")
        assert registry.reap(cur, [], True) == 3
        assert claims.claim_update(cur, "default", 222, 2, 60, 10) == 3
        assert claims.complete(cur, 111, ids) == 0
        assert claims.complete_one(cur, 111, ids[0]) == 0
        assert claims.retry(cur, 111, ids[0], 1.0, "late") == 0
        assert claims.bury(cur, 111, ids[1], "late") == 0
        assert claims.release(cur, 111, ids) == 0
        assert claims.complete(cur, 222, ids) == 3
    conn.close()
    assert qdb.query(f"SELECT DISTINCT status, batch_id, worker, last_error FROM {EVERY_JOB}") == [
        ("done", 222, "new", "worker old was lost while running attempt 1 of 5")
    ]


def test_a_connection_id_from_before_the_servers_start_is_not_trusted(qdb: QueueDB) -> None:
    # A worker (lease 60 s) that last beat 5 s ago, through a connection the server no longer has.
    qdb.query("""INSERT INTO mysqlq_workers (name, host, pid, connection_id, node, queues, started_at, heartbeat_at,
                                             lease_us)
                 VALUES ('w', 'h', 1, 4000000000, CONCAT(@@hostname, ':', @@port), 'default', NOW(6),
                         NOW(6) - INTERVAL 5 SECOND, 60000000)""")
    conn = qdb.connect()
    with conn.cursor() as cur:
        # The server has been up for a minute: that connection died, so the worker did.
        assert registry.dead_workers(cur, check_processlist=True, uptime=60) != []
        # The server restarted 2 s ago: the id is from its previous life; only the lease may judge.
        assert registry.dead_workers(cur, check_processlist=True, uptime=2) == []
        assert registry.dead_workers(cur, check_processlist=False, uptime=60) == []
        # A connection on another node (of a cluster) is not in this node's process list: not judged by it.
        cur.execute("UPDATE mysqlq_workers SET node = 'elsewhere:3306'")
        assert registry.dead_workers(cur, check_processlist=True, uptime=60) == []
        # A heartbeat older than the worker's own lease is stale whatever the process list says.
        cur.execute("UPDATE mysqlq_workers SET lease_us = 4000000")
        assert registry.dead_workers(cur, check_processlist=False, uptime=2) != []
    conn.close()


def test_workers_register_and_the_cli_lists_what_they_hold(qdb: QueueDB) -> None:
    with qdb.producer() as producer:
        producer.enqueue("test.sleep", {"seconds": 2})
    qdb.worker("--name", "alpha")
    qdb.wait_for(lambda: qdb.records(), what="the job to start")
    listing = json.loads(qdb.cli("workers", "--json", check=True).stdout)
    assert [(w["name"], w["running"]) for w in listing] == [("alpha", 1)]
    assert listing[0]["connection_id"] > 0 and listing[0]["pid"] == qdb.procs[0].pid
    assert "alpha" in qdb.cli("workers", check=True).stdout
    qdb.stop_workers()  # SIGTERM: the job in hand finishes, then the worker leaves the registry
    qdb.wait_for(lambda: qdb.scalar("SELECT COUNT(*) FROM mysqlq_workers") == 0, what="the worker to leave")


def test_a_live_worker_extends_the_lease_of_a_long_job(qdb: QueueDB) -> None:
    with qdb.producer() as producer:
        job_id = producer.enqueue("test.sleep", {"seconds": 4})
    qdb.worker("--lease", "2", "--heartbeat-interval", "0.3", "--no-processlist-check")
    qdb.worker("--lease", "2", "--heartbeat-interval", "0.3", "--no-processlist-check", "--name", "other")
    qdb.wait_for(lambda: qdb.records(), what="the job to start")
    first = qdb.scalar("SELECT lease_until FROM mysqlq_jobs WHERE id = %s", (job_id,))
    qdb.wait_for(lambda: job_status(qdb, job_id) == "done", timeout=30, what="the long job to finish")
    # It outlived its 2 s lease several times over, yet ran once: the lease kept moving.
    assert [r[2] for r in qdb.records()] == ["start", "end"]
    assert qdb.scalar(f"SELECT attempts FROM {EVERY_JOB} WHERE id = %s", (job_id,)) == 1
    assert first is not None


def kill_when_running(qdb: QueueDB, proc_index: int = 0) -> int:
    """Wait until the first worker holds a job, kill -9 it, return its pid."""
    proc = qdb.procs[proc_index]
    qdb.wait_for(lambda: qdb.records(), what="a job to start")
    os.kill(proc.pid, signal.SIGKILL)
    proc.wait()
    return proc.pid


def test_kill_9_is_caught_by_the_process_list_within_seconds(qdb: QueueDB) -> None:
    with qdb.producer() as producer:
        ids = [producer.enqueue("test.sleep", {"seconds": 0.2}) for _ in range(4)]
    qdb.worker("--name", "victim", "--batch-size", "4")
    kill_when_running(qdb)
    qdb.worker("--name", "rescuer")
    # The lease is 60 s: finishing well before it proves the dead connection was noticed.
    qdb.wait_for(lambda: all(job_status(qdb, i) == "done" for i in ids), timeout=20, what="the jobs to be rescued")
    assert set(qdb.scalar(f"SELECT GROUP_CONCAT(DISTINCT worker) FROM {EVERY_JOB}").split(",")) == {"rescuer"}
    assert "reaper.reaped" in qdb.logs()
    assert qdb.query("SELECT name FROM mysqlq_workers") == [("rescuer",)]


def test_without_the_process_list_a_lapsed_lease_frees_the_jobs(qdb: QueueDB) -> None:
    with qdb.producer() as producer:
        job_id = producer.enqueue("test.sleep", {"seconds": 0.2})
    fast = ("--lease", "2", "--heartbeat-interval", "0.3", "--no-processlist-check")
    qdb.worker("--name", "victim", *fast)
    kill_when_running(qdb)
    qdb.worker("--name", "rescuer", *fast)
    qdb.wait_for(lambda: job_status(qdb, job_id) == "done", timeout=30, what="the lease to lapse")
    assert qdb.scalar(f"SELECT attempts FROM {EVERY_JOB}") == 2


def test_a_job_that_keeps_killing_its_workers_ends_dead(qdb: QueueDB) -> None:
    with qdb.producer() as producer:
        poison = producer.enqueue("test.crash", max_attempts=2)
        fine = producer.enqueue("test.record")
    for _ in range(3):  # a supervisor restarting the worker under its name, as systemd would
        proc = qdb.worker("--name", "w")
        qdb.wait_for(lambda p=proc: p.poll() is not None or job_status(qdb, poison) == "dead", timeout=30,
                     what="the worker to crash or the poison job to be buried")
        if job_status(qdb, poison) == "dead":
            break
    qdb.wait_for(lambda: job_status(qdb, fine) == "done", timeout=30, what="the other job to be done")
    assert qdb.query("SELECT status, attempts FROM mysqlq_jobs WHERE id = %s", (poison,)) == [("dead", 2)]
    assert "lost while running attempt 2 of 2" in qdb.scalar("SELECT last_error FROM mysqlq_jobs WHERE id = %s",
                                                            (poison,))


def test_a_worker_restarting_under_its_name_releases_its_previous_life(qdb: QueueDB) -> None:
    with qdb.producer() as producer:
        job_id = producer.enqueue("test.sleep", {"seconds": 0.2})
    # No process-list check and a long lease: only the restart can give the job back quickly.
    args = ("--name", "worker-1", "--no-processlist-check", "--lease", "600")
    qdb.worker(*args)
    kill_when_running(qdb)
    qdb.worker(*args)
    qdb.wait_for(lambda: job_status(qdb, job_id) == "done", timeout=20, what="the new life to run the job")
    assert "worker.previous_life_released" in qdb.logs()


def make_effects_table(qdb: QueueDB) -> None:
    qdb.query("CREATE TABLE test_effects (job_id BIGINT NOT NULL, attempt INT NOT NULL, KEY (job_id))")


def test_a_transactional_handler_commits_its_effect_with_the_completion(qdb: QueueDB) -> None:
    make_effects_table(qdb)
    with qdb.producer() as producer:
        ok = producer.enqueue("test.effect")
        failing = producer.enqueue("test.effect", {"fail": True}, max_attempts=2)
    proc = qdb.worker("--burst")
    assert proc.wait(timeout=60) == 0
    assert qdb.query("SELECT job_id FROM test_effects") == [(ok,)]  # the failing one's writes rolled back
    assert job_status(qdb, ok) == "done" and job_status(qdb, failing) == "dead"


@pytest.mark.parametrize("concurrency", ["1", "4"])
def test_a_transactional_handler_gets_a_connection_that_takes_one_statement_per_query(
    qdb: QueueDB, concurrency: str
) -> None:
    """The worker's own connection sends a claim and its read-back as one query; the connection a
    handler gets (on the main thread or in a slot) refuses that, so a ``;`` smuggled into the
    handler's SQL cannot run a second statement."""
    with qdb.producer() as producer:
        job_id = producer.enqueue("test.stacked")
    assert qdb.worker("--burst", "--concurrency", concurrency).wait(timeout=60) == 0
    assert qdb.records() == [[str(job_id), "refused"]]
    assert job_status(qdb, job_id) == "done"


def test_a_transactional_handler_that_lost_its_claim_rolls_its_effect_back(qdb: QueueDB) -> None:
    make_effects_table(qdb)
    with qdb.producer() as producer:
        job_id = producer.enqueue("test.effect", {"sleep": 1.5})
    qdb.worker("--no-processlist-check")
    qdb.wait_for(lambda: qdb.records(), what="the handler to write its effect")
    # Someone takes the claim over while the handler still runs (as the reaper would).
    qdb.query("UPDATE mysqlq_jobs SET batch_id = 999, running_batch = 999, worker = 'thief' WHERE id = %s", (job_id,))
    qdb.wait_for(lambda: "job.claim_lost" in qdb.logs(), timeout=20, what="the worker to notice")
    assert qdb.scalar("SELECT COUNT(*) FROM test_effects") == 0
    assert qdb.query("SELECT status, batch_id FROM mysqlq_jobs") == [("running", 999)]


@pytest.mark.parametrize("concurrency", ["1", "5"])
def test_chaos_kill_workers_and_the_server_lose_nothing(qdb: QueueDB, concurrency: str) -> None:
    """3 workers drain 10,000 jobs while workers are kill -9'd and the server crashes once."""
    make_effects_table(qdb)
    plain = [Job("test.record", {"sleep": 0.0005}) for _ in range(5000)]
    effect = [Job("test.effect") for _ in range(5000)]
    with qdb.producer() as producer:
        producer.enqueue_many([job for pair in zip(plain, effect, strict=True) for job in pair])
    args = ("--batch-size", "25", "--heartbeat-interval", "0.5", "--lease", "10", "--concurrency", concurrency)
    names = ["c1", "c2", "c3"]
    running = {name: qdb.worker("--name", name, *args) for name in names}
    killed: set[int] = set()

    def done() -> int:
        return int(qdb.scalar(f"SELECT COUNT(*) FROM {every_job('status')} WHERE status = 'done'"))

    for round_, threshold in enumerate((1000, 2500, 4000, 6000)):
        qdb.wait_for(lambda t=threshold: done() >= t, timeout=120, what=f"{threshold} jobs done")
        if round_ == 2:
            qdb.server.kill()  # the database crashes too, once
            qdb.server.start()
            continue
        name = names[round_ % 3]
        os.kill(running[name].pid, signal.SIGKILL)
        running[name].wait()
        killed.add(running[name].pid)
        running[name] = qdb.worker("--name", name, *args)  # systemd's Restart=
    qdb.wait_for(lambda: qdb.statuses() == {"done": 10000}, timeout=180, what="every job to be done")

    # Exactly one effect per transactional job, however often it was attempted.
    assert qdb.scalar("SELECT COUNT(*) FROM test_effects") == 5000
    assert qdb.scalar("SELECT COUNT(DISTINCT job_id) FROM test_effects") == 5000
    # A plain job ran more than once only if an earlier run was in a killed worker's hands.
    runs: dict[str, list[int]] = {}
    for record in qdb.records():
        if record[2] == "default":
            runs.setdefault(record[0], []).append(int(record[3]))
    assert len(runs) == 5000
    for job_id, pids in runs.items():
        assert all(pid in killed for pid in pids[:-1]), (job_id, pids, killed)
