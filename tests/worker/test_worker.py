"""The worker: batch claims, order, outcomes, retries, time limits, shutdown, hints, server restarts."""

from __future__ import annotations

import collections
import re
import signal
import subprocess
import sys
import time
from typing import Any

import MySQLdb
import pytest
from mysqlq_harness.jobs import EVERY_JOB

from mysqlq import Dsn, Job
from mysqlq.core import logs
from mysqlq.core.handlers import Registry
from mysqlq.store import claims
from mysqlq.store.db import Cursor, Database, RetryPolicy, connect
from mysqlq.worker.intake.claimer import Claimer
from mysqlq.worker.intake.concurrency_admission import Limits
from mysqlq.worker.intake.rate_admission import Rates

from ..conftest import QueueDB, unavailable, with_database


def drain(qdb: QueueDB, *args: str, workers: int = 1, timeout: float = 120) -> None:
    """Run burst workers until they exit; each must exit 0."""
    procs = [qdb.worker("--burst", *args) for _ in range(workers)]
    for proc in procs:
        assert proc.wait(timeout=timeout) == 0, qdb.logs()


def test_three_workers_drain_5000_jobs_each_exactly_once(qdb: QueueDB) -> None:
    with qdb.producer() as producer:
        producer.enqueue_many([Job("test.record", {"tag": str(i)}) for i in range(5000)])
    drain(qdb, "--batch-size", "50", workers=3)
    assert qdb.statuses() == {"done": 5000}
    runs = collections.Counter(record[0] for record in qdb.records())
    assert len(runs) == 5000 and set(runs.values()) == {1}
    # All three took part: the claim never makes one worker wait for another.
    assert qdb.scalar(f"SELECT COUNT(DISTINCT worker) FROM {EVERY_JOB}") == 3


def test_one_worker_runs_a_queue_in_fifo_order(qdb: QueueDB) -> None:
    with qdb.producer() as producer:
        ids = [producer.enqueue("test.record") for _ in range(40)]
    drain(qdb, "--batch-size", "7", "--concurrency", "1")
    assert [int(record[0]) for record in qdb.records()] == ids


def batch_sizes(qdb: QueueDB) -> list[int]:
    """How many jobs each batch ran, largest first (a done job keeps its batch's token)."""
    rows = qdb.query(f"SELECT COUNT(*) FROM {EVERY_JOB} GROUP BY batch_id ORDER BY COUNT(*) DESC")
    return [int(row[0]) for row in rows]


def test_a_worker_claims_up_to_500_quick_jobs_at_once_and_one_slot_keeps_100(qdb: QueueDB) -> None:
    with qdb.producer() as producer:
        producer.enqueue_many([Job("test.record") for _ in range(600)])
    drain(qdb)  # several slots: the first claim, sized before any job has run, is full
    assert re.search(r"batch\.claimed .*jobs=500\b", qdb.logs()), qdb.logs()
    assert qdb.statuses() == {"done": 600}
    qdb.query("DELETE FROM mysqlq_jobs")
    qdb.query("DELETE FROM mysqlq_jobs_history")
    with qdb.producer() as producer:
        producer.enqueue_many([Job("test.record") for _ in range(250)])
    drain(qdb, "--concurrency", "1")  # one slot claims whole batches: the old default, unless given
    assert batch_sizes(qdb) == [100, 100, 50]
    assert qdb.statuses() == {"done": 250}


def test_lower_priority_numbers_run_first_then_fifo(qdb: QueueDB) -> None:
    with qdb.producer() as producer:
        jobs = [(priority, producer.enqueue("test.record", priority=priority)) for priority in (5, 0, -3, 5, 0, -3)]
    drain(qdb, "--batch-size", "1", "--concurrency", "1")
    assert [int(record[0]) for record in qdb.records()] == [job_id for _, job_id in sorted(jobs)]


@pytest.mark.parametrize("claim", ["update", "skip-locked"])
def test_queues_are_served_in_the_order_given(qdb: QueueDB, claim: str) -> None:
    """Batches of two: one full from ``high``, then one from both queues (with ``update``, the last
    queue's claim and the read-back of the whole batch go as one query)."""
    with qdb.producer() as producer:
        low = [producer.enqueue("test.record", queue="low") for _ in range(3)]
        high = [producer.enqueue("test.record", queue="high") for _ in range(3)]
        producer.enqueue("test.record", queue="ignored")
    drain(qdb, "--queue", "high,low", "--batch-size", "2", "--concurrency", "1", "--claim", claim)
    assert [int(record[0]) for record in qdb.records()] == high + low
    assert qdb.scalar("SELECT status FROM mysqlq_jobs WHERE queue = 'ignored'") == "ready"


def test_a_claim_carries_the_completion_of_the_batch_before_it_and_may_be_repeated(qdb: QueueDB) -> None:
    """The worker's one query per batch: the ended batch's completion, the claim, the read-back. Sent
    again (a retry after a lost answer), the completion changes nothing the second time (the worker
    then asks which of its jobs are done) and the read-back still finds the whole new batch."""
    with qdb.producer() as producer:
        ids = [producer.enqueue("test.record") for _ in range(4)]
    conn = connect(Dsn.parse(qdb.dsn), multi_statements=True)  # as the worker's own
    try:
        with conn.cursor() as cur:
            assert claims.claim_update(cur, "default", 111, 0, 60, 2) == 2
        first = claims.claim_and_fetch(conn, "default", 222, 0, 60, 2, ended=111)
        again = claims.claim_and_fetch(conn, "default", 222, 0, 60, 2, ended=111)
        with conn.cursor() as cur:
            assert claims.completed_ids(cur, 111, ids[:2]) == set(ids[:2])
    finally:
        conn.close()
    assert (first[0], first[1], [job.id for job in first[2]]) == (2, 2, ids[2:])
    assert (again[0], again[1], [job.id for job in again[2]]) == (0, 0, ids[2:])
    assert qdb.statuses() == {"done": 2, "running": 2}


KILLED_MID_QUERY = """
import os, sys
from mysqlq.core.config import Dsn
from mysqlq.store import claims
from mysqlq.store.db import connect
conn = connect(Dsn.parse(sys.argv[1]), multi_statements=True)
params = {"queue": "default", "batch_id": 222, "worker_id": 0, "worker": "w", "lease_us": 60_000_000,
          "limit": 100, "ended_batch_id": 111}
conn.send_query(claims.claim_query(True).encode() % {k.encode(): conn.literal(v) for k, v in params.items()})
os._exit(0)  # gone before any answer
"""


def test_a_worker_gone_mid_claim_has_completed_the_batch_before(qdb: QueueDB) -> None:
    """The completion goes first in the claim's query: a server stops a query at the first answer it
    cannot send (here the new batch's rows, over TCP), so a worker killed while its claim runs leaves
    the ended batch completed, not to run twice. (Last in the query, it was left undone every time.)"""
    if qdb.server.tcp_dsn is None:
        unavailable("needs the private server's TCP address (MYSQLQ_TEST_DSN is set)")
    over_tcp = with_database(qdb.server.tcp_dsn, Dsn.parse(qdb.dsn).database)
    with qdb.producer() as producer:
        producer.enqueue_many([Job("test.record", {"pad": "x" * 200}) for _ in range(150)])
    conn = connect(Dsn.parse(qdb.dsn), multi_statements=True)
    locker = connect(Dsn.parse(qdb.dsn))
    try:
        with conn.cursor() as cur:
            assert claims.claim_update(cur, "default", 111, 0, 60, 50) == 50
        locker.begin()  # the claim waits for this row lock until its worker is gone
        with locker.cursor() as cur:
            cur.execute("SELECT id FROM mysqlq_jobs WHERE status = 'ready' ORDER BY id LIMIT 1 FOR UPDATE")
        subprocess.run([sys.executable, "-c", KILLED_MID_QUERY, over_tcp], check=True, timeout=60)
        time.sleep(0.2)
        locker.rollback()
    finally:
        conn.close()
        locker.close()
    qdb.wait_for(lambda: qdb.statuses().get("done") == 50, timeout=10, what="the ended batch's completion")


@pytest.mark.parametrize("claim", ["update", "skip-locked"])
def test_a_claim_whose_answer_was_lost_is_read_back_by_its_token(qdb: QueueDB, claim: str) -> None:
    """The claim commits, the connection drops before the answer, and the retried claim finds nothing
    left to take: the jobs the first attempt claimed are read back (not left to lapse with their lease)."""
    with qdb.producer() as producer:
        ids = [producer.enqueue("test.record") for _ in range(3)]
    db = Database(Dsn.parse(qdb.dsn), retry=RetryPolicy(attempts=3, first_delay=0.01), multi_statements=True)
    # Two queues: the first one's claim goes alone (with `update`, the last one's carries the read-back).
    claimer = Claimer(qdb.settings(claim_strategy=claim, queues=("default", "empty")), db,
                      Limits(Registry(), db, logs.get_logger("test")), Rates(Registry(), db, logs.get_logger("test")),
                      lambda: 0)
    real, lost = claimer.statement, []

    def answer_lost(cur: Cursor, *args: Any) -> int:
        claimed = real(cur, *args)
        if claimed and not lost:
            lost.append(claimed)
            raise MySQLdb.OperationalError(2013, "Lost connection to server during query")
        return claimed

    claimer.statement = answer_lost
    try:
        jobs = claimer.claim(10, paused=()).jobs
    finally:
        db.close()
    assert lost == [3] and [job.id for job in jobs] == ids


def test_a_job_taken_over_mid_batch_is_not_written_by_the_completion_that_goes_with_the_next_claim(
    qdb: QueueDB,
) -> None:
    """The batch ends while another is ready, so its completion goes with the next claim: the job whose
    claim was taken over meanwhile is left to its new holder and logged as lost, the others are done."""
    with qdb.producer() as producer:
        first, taken, third = (producer.enqueue("test.sleep", {"seconds": 0.4}) for _ in range(3))
        later = producer.enqueue("test.record")
    qdb.worker("--concurrency", "1", "--batch-size", "3", "--no-processlist-check")
    qdb.wait_for(lambda: [str(first), "1", "start"] in qdb.records(), what="the batch's first job to start")
    qdb.query("UPDATE mysqlq_jobs SET batch_id = 999, running_batch = 999, worker = 'thief' WHERE id = %s", (taken,))
    qdb.wait_for(lambda: job_state(qdb, later) == "done", timeout=20, what="the next batch to run")
    logs = qdb.logs()
    assert re.search(rf"job\.claim_lost .*job_id={taken}\b", logs)
    # The ended batch's lines come before the next batch's claim, as they would without the merge.
    assert logs.index(f"job_id={third} ") < logs.index("batch.claimed", logs.index(f"job_id={first} "))
    assert [job_state(qdb, job_id) for job_id in (first, taken, third)] == ["done", "running", "done"]
    assert qdb.scalar("SELECT worker FROM mysqlq_jobs WHERE id = %s", (taken,)) == "thief"


def job_state(qdb: QueueDB, job_id: int) -> str:
    return str(qdb.scalar(f"SELECT status FROM {EVERY_JOB} WHERE id = %s", (job_id,)))


def test_a_delayed_job_waits_until_it_is_due(qdb: QueueDB) -> None:
    qdb.worker()
    with qdb.producer() as producer:
        delayed = producer.enqueue("test.record", {"tag": "delayed"}, delay=1.5)
        now = producer.enqueue("test.record", {"tag": "now"})
    qdb.wait_for(lambda: qdb.scalar(f"SELECT status FROM {EVERY_JOB} WHERE id = %s", (delayed,)) == "done",
                 timeout=30, what="the delayed job to run")
    assert [int(record[0]) for record in qdb.records()] == [now, delayed]
    started_after_due = qdb.scalar(f"SELECT started_at >= run_at FROM {EVERY_JOB} WHERE id = %s", (delayed,))
    assert started_after_due == 1


def test_failures_are_retried_then_dead_with_the_traceback_kept(qdb: QueueDB) -> None:
    with qdb.producer() as producer:
        job_id = producer.enqueue("test.fail", max_attempts=3)
    drain(qdb)
    status, attempts, error = qdb.query("SELECT status, attempts, last_error FROM mysqlq_jobs")[0]
    assert (status, attempts) == ("dead", 3)
    assert error.startswith("ValueError: boom on attempt 3")
    assert "Traceback (most recent call last)" in error and "mysqlq_testhandlers" in error
    assert [record[:2] for record in qdb.records()] == [[str(job_id), str(n)] for n in (1, 2, 3)]


def test_a_retried_job_that_then_succeeds_is_done(qdb: QueueDB) -> None:
    with qdb.producer() as producer:
        producer.enqueue("test.flaky", {"succeed_on": 3}, max_attempts=5)
    drain(qdb)
    assert qdb.query(f"SELECT status, attempts FROM {EVERY_JOB}")[0] == ("done", 3)


def test_unknown_handler_is_retried_then_dead_naming_it(qdb: QueueDB) -> None:
    with qdb.producer() as producer:
        producer.enqueue("billing.charge", max_attempts=2)
    drain(qdb)
    status, attempts, error = qdb.query("SELECT status, attempts, last_error FROM mysqlq_jobs")[0]
    assert (status, attempts) == ("dead", 2)
    assert "no installed entry point provides handler 'billing.charge'" in error
    # `mysqlq retry` (operations) brings it back; here: the worker keeps running meanwhile.


def test_a_handler_whose_import_fails_names_its_distribution(qdb: QueueDB) -> None:
    with qdb.producer() as producer:
        producer.enqueue("test.broken_import", max_attempts=1)
    drain(qdb)
    error = qdb.scalar("SELECT last_error FROM mysqlq_jobs")
    assert "from mysqlq-testhandlers" in error and "ModuleNotFoundError" in error


def test_a_payload_that_is_not_json_is_dead_at_once(qdb: QueueDB) -> None:
    qdb.query("""INSERT INTO mysqlq_jobs (queue, handler, payload, status, run_at, max_attempts, enqueued_at)
                 VALUES ('default', 'test.record', '{oops', 'ready', NOW(6), 5, NOW(6))""")
    with qdb.producer() as producer:
        good = producer.enqueue("test.record")
    drain(qdb)
    assert qdb.query("SELECT status, attempts FROM mysqlq_jobs WHERE id <> %s", (good,))[0] == ("dead", 1)
    assert "payload is not valid JSON" in qdb.scalar("SELECT last_error FROM mysqlq_jobs WHERE id <> %s", (good,))
    assert qdb.scalar(f"SELECT status FROM {EVERY_JOB} WHERE id = %s", (good,)) == "done"


def test_a_job_past_its_time_limit_fails(qdb: QueueDB) -> None:
    with qdb.producer() as producer:
        by_default = producer.enqueue("test.sleep", {"seconds": 30}, max_attempts=1)
        by_job = producer.enqueue("test.sleep", {"seconds": 30}, max_attempts=1, time_limit=0.3)
    drain(qdb, "--time-limit", "0.5", "--concurrency", "1")  # SIGALRM; slots: tests/worker/test_concurrency.py
    rows = dict(qdb.query("SELECT id, last_error FROM mysqlq_jobs"))
    assert "time limit of 0.5s" in rows[by_default]
    assert "time limit of 1s" in rows[by_job]  # stored in whole seconds, rounded up
    assert qdb.statuses() == {"dead": 2}


def test_sigterm_finishes_the_job_in_hand_and_releases_the_rest(qdb: QueueDB) -> None:
    with qdb.producer() as producer:
        ids = [producer.enqueue("test.sleep", {"seconds": 1}) for _ in range(5)]
    worker = qdb.worker("--batch-size", "5", "--concurrency", "1")
    qdb.wait_for(lambda: any(record[2] == "start" for record in qdb.records()), what="the first job to start")
    worker.send_signal(signal.SIGTERM)
    assert worker.wait(timeout=30) == 0
    rows = dict((row[0], row[1:]) for row in qdb.query(f"SELECT id, status, attempts, batch_id FROM {EVERY_JOB}"))
    assert rows[ids[0]][:2] == ("done", 1)
    for job_id in ids[1:]:
        assert rows[job_id] == ("ready", 0, 0)  # released without spending an attempt (no batch: 0)
    assert "batch.released" in qdb.logs()


def test_a_second_signal_exits_at_once(qdb: QueueDB) -> None:
    with qdb.producer() as producer:
        producer.enqueue("test.sleep", {"seconds": 60})
    worker = qdb.worker()
    qdb.wait_for(lambda: qdb.records(), what="the job to start")
    worker.send_signal(signal.SIGTERM)
    # Two signals that arrive before Python runs its handler count as one: let the first land.
    time.sleep(0.5)
    worker.send_signal(signal.SIGTERM)
    assert worker.wait(timeout=10) == 128 + signal.SIGTERM
    assert qdb.statuses() == {"running": 1}  # left for the reaper (crash recovery)


def test_an_idle_worker_is_woken_by_the_hint_before_its_next_poll(qdb: QueueDB) -> None:
    qdb.worker("--poll-interval", "60")
    qdb.wait_for(lambda: "worker.started" in qdb.logs(), what="the worker to start")
    with qdb.producer() as producer:
        job_id = producer.enqueue("test.record")
    # The next poll is a minute away: only the hint can have started it.
    qdb.wait_for(lambda: qdb.records(), timeout=20, what="the hinted job to run")
    assert int(qdb.records()[0][0]) == job_id


def test_a_job_enqueued_without_the_hint_still_runs_at_the_next_poll(qdb: QueueDB) -> None:
    qdb.worker("--poll-interval", "0.5")
    qdb.wait_for(lambda: "worker.started" in qdb.logs(), what="the worker to start")
    with qdb.producer(hint=False) as producer:
        producer.enqueue("test.record")
    qdb.wait_for(lambda: qdb.records(), timeout=20, what="the unhinted job to run")
    # Its outcome is written just after the handler returns.
    qdb.wait_for(lambda: qdb.statuses() == {"done": 1}, what="the job to be recorded done")


def test_burst_exits_zero_on_an_empty_queue(qdb: QueueDB) -> None:
    drain(qdb)
    assert "worker.stopped" in qdb.logs()


def test_every_claim_and_outcome_is_logged_with_its_fields(qdb: QueueDB) -> None:
    with qdb.producer() as producer:
        job_id = producer.enqueue("test.record")
    proc = qdb.worker("--burst", "--name", "w-json", env=qdb.env(MYSQLQ_LOG_FORMAT="json"))
    assert proc.wait(timeout=60) == 0
    import json

    events = [json.loads(line) for line in qdb.logs().splitlines() if line.startswith("{")]
    done = next(event for event in events if event["event"] == "job.done")
    assert done["job_id"] == job_id and done["worker"] == "w-json" and done["handler"] == "test.record"
    assert {"queue", "batch_id", "attempt", "duration"} <= set(done)
    assert any(event["event"] == "batch.claimed" and event["batch_id"] == done["batch_id"] for event in events)


@pytest.mark.parametrize("fmt", ["console", "json"])
def test_a_handlers_ctx_log_writes_beside_the_workers_lines_bound_to_its_job(qdb: QueueDB, fmt: str) -> None:
    with qdb.producer() as producer:
        job_id = producer.enqueue("test.talk", {"words": "two words"})
    proc = qdb.worker("--burst", "--name", "w-talk", env=qdb.env(MYSQLQ_LOG_FORMAT=fmt))
    assert proc.wait(timeout=60) == 0
    lines = qdb.logs().splitlines()
    if fmt == "json":
        import json

        events = {event["event"]: event for event in map(json.loads, filter(lambda line: line.startswith("{"), lines))}
        said, step, caught = events["handler.said"], events["handler.step"], events["handler.caught"]
        assert (said["job_id"], said["handler"], said["worker"], said["words"]) == (job_id, "test.talk", "w-talk",
                                                                                      "two words")
        assert said["level"] == "info" and said["timestamp"].endswith("Z")
        assert (step["level"], step["step"], step["job_id"]) == ("warning", 2, job_id)
        assert caught["level"] == "error" and "ValueError: caught by the handler" in caught["exception"]
        return
    said = next(line for line in lines if " handler.said " in line)
    assert f"job_id={job_id} handler=test.talk attempt=1 queue=default words='two words'" in said
    assert said.split()[2] == "info" and "worker=w-talk" in said
    step = next(line for line in lines if " handler.step " in line)
    assert step.split()[2] == "warning" and step.endswith(" step=2")
    caught = lines.index(next(line for line in lines if " handler.caught " in line))
    assert lines[caught].split()[2] == "error" and "ValueError: caught by the handler" in lines[caught + 1:caught + 8]


def test_a_handler_module_logging_with_structlog_itself_writes_the_workers_lines(qdb: QueueDB) -> None:
    with qdb.producer() as producer:
        job_id = producer.enqueue("test.structlog")
    proc = qdb.worker("--burst", env=qdb.env(MYSQLQ_LOG_FORMAT="console"))
    assert proc.wait(timeout=60) == 0
    said = [line for line in qdb.logs().splitlines() if " app." in line]
    assert len(said) == 1 and re.fullmatch(rf"\d{{4}}-\d\d-\d\d \d\d:\d\d:\d\d info    app\.said job={job_id}", said[0])


def test_the_server_killed_and_restarted_mid_drain_loses_nothing(qdb: QueueDB) -> None:
    with qdb.producer() as producer:
        producer.enqueue_many([Job("test.record", {"sleep": 0.001}) for _ in range(3000)])
    workers = [qdb.worker("--batch-size", "20", "--heartbeat-interval", "0.5", "--lease", "5") for _ in range(2)]
    qdb.wait_for(lambda: len(qdb.records()) > 300, what="the drain to be under way")
    qdb.server.kill()
    qdb.server.start()
    qdb.wait_for(lambda: qdb.statuses() == {"done": 3000}, timeout=120, what="every job to be done")
    assert all(proc.poll() is None for proc in workers), "a worker died with the server"
    assert {int(record[0]) for record in qdb.records()} == set(range(1, 3001))
    assert "db.retry" in qdb.logs()


def test_burst_worker_exit_codes_for_user_errors(qdb: QueueDB) -> None:
    result = subprocess.run([*qdb.worker_command(), "--burst", "--batch-size", "0"], env=qdb.env(),
                            capture_output=True, text=True, timeout=30)
    assert result.returncode == 2 and "batch-size" in result.stderr
