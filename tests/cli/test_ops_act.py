"""Acting on a queue: retry dead jobs, cancel waiting ones, pause and resume a queue."""

from __future__ import annotations

import pytest
from mysqlq_harness.jobs import EVERY_JOB

from ..conftest import QueueDB
from ..ops_fixtures import assert_one_line_error, count, plant, status_of


def test_retry_brings_a_dead_job_back_with_a_fresh_set_of_attempts(qdb: QueueDB) -> None:
    (job_id,) = plant(qdb, "dead", ended_ago=60, attempts=5, max_attempts=5, error="RuntimeError: db down")
    result = qdb.cli("retry", str(job_id), check=True)
    assert result.stdout.strip() == "retried 1 job: ready again with attempts reset"
    status, attempts, finished, error = qdb.query(
        "SELECT status, attempts, finished_at, last_error FROM mysqlq_jobs WHERE id = %s", (job_id,))[0]
    assert (status, attempts, finished) == ("ready", 0, None)
    assert error == "RuntimeError: db down"  # kept for the record until the next failure replaces it
    qdb.worker("--burst").wait(timeout=60)
    assert qdb.query(f"SELECT status, attempts FROM {EVERY_JOB} WHERE id = %s", (job_id,))[0] == ("done", 1)
    assert [line[:3] for line in qdb.records()] == [[str(job_id), "1", "default"]]


def test_a_retried_job_that_fails_again_gets_all_its_attempts_again(qdb: QueueDB) -> None:
    with qdb.producer() as producer:
        job_id = producer.enqueue("test.fail", max_attempts=2)
    qdb.worker("--burst").wait(timeout=60)
    assert status_of(qdb, job_id) == "dead"
    qdb.cli("retry", str(job_id), check=True)
    qdb.worker("--burst").wait(timeout=60)
    assert status_of(qdb, job_id) == "dead"
    assert [line[1] for line in qdb.records()] == ["1", "2", "1", "2"]


def test_retry_of_several_ids_changes_all_of_them(qdb: QueueDB) -> None:
    ids = plant(qdb, "dead", 3, ended_ago=60)
    assert "retried 3 jobs" in qdb.cli("retry", *map(str, ids), str(ids[0]), check=True).stdout
    assert qdb.statuses() == {"ready": 3}


def test_retry_dead_retries_every_dead_job_or_those_of_one_queue(qdb: QueueDB) -> None:
    dead_a = plant(qdb, "dead", 3, queue="a", ended_ago=60)
    plant(qdb, "dead", 2, queue="b", ended_ago=60)
    plant(qdb, "done", 4, queue="a", ended_ago=60)
    assert qdb.cli("retry", "--dead", "--queue", "a", check=True).stdout.strip() \
        == "retried 3 jobs in queue 'a': ready again with attempts reset"
    assert {status_of(qdb, job_id) for job_id in dead_a} == {"ready"}
    assert count(qdb, "queue = 'b' AND status = 'dead'") == 2
    assert "retried 2 jobs" in qdb.cli("retry", "--dead", check=True).stdout
    assert qdb.cli("retry", "--dead", check=True).stdout.strip() == "no dead jobs"
    assert qdb.statuses() == {"ready": 5, "done": 4}


def test_retry_dead_works_through_thousands_in_batches(qdb: QueueDB) -> None:
    plant(qdb, "dead", 1)
    for _ in range(11):  # 2048 dead jobs
        qdb.query("INSERT INTO mysqlq_jobs (queue, handler, payload, status, run_at, max_attempts, enqueued_at, "
                  "finished_at) SELECT queue, handler, payload, status, run_at, max_attempts, enqueued_at, "
                  "finished_at FROM mysqlq_jobs")
    assert "retried 2048 jobs" in qdb.cli("retry", "--dead", check=True).stdout
    assert qdb.statuses() == {"ready": 2048}


def test_retry_refuses_a_job_that_is_not_dead_and_changes_nothing(qdb: QueueDB) -> None:
    (dead,) = plant(qdb, "dead", ended_ago=60)
    (ready,) = plant(qdb, "ready")
    result = qdb.cli("retry", str(dead), str(ready))
    assert_one_line_error(result, f"job {ready} is ready: only dead jobs can be retried; nothing was changed")
    assert status_of(qdb, dead) == "dead"


def test_cancel_stops_ready_and_scheduled_jobs_from_running(qdb: QueueDB) -> None:
    with qdb.producer() as producer:
        ready = producer.enqueue("test.record")
        scheduled = producer.enqueue("test.record", delay=0.5)
        kept = producer.enqueue("test.record")
    assert qdb.cli("cancel", str(ready), str(scheduled), check=True).stdout.strip() == "cancelled 2 jobs"
    assert qdb.query("SELECT status, finished_at IS NOT NULL FROM mysqlq_jobs WHERE id IN (%s, %s)",
                     (ready, scheduled)) == [("cancelled", 1), ("cancelled", 1)]
    qdb.wait_for(lambda: qdb.scalar("SELECT run_at < NOW(6) FROM mysqlq_jobs WHERE id = %s", (scheduled,)),
                 what="the scheduled job's time")
    qdb.worker("--burst").wait(timeout=60)
    assert [line[:3] for line in qdb.records()] == [[str(kept), "1", "default"]]
    assert qdb.statuses() == {"cancelled": 2, "done": 1}


@pytest.mark.parametrize("status", ["done", "dead", "cancelled"])
def test_cancel_refuses_a_job_that_has_ended_naming_its_status(qdb: QueueDB, status: str) -> None:
    (ready,) = plant(qdb, "ready")
    (other,) = plant(qdb, status, ended_ago=5)
    result = qdb.cli("cancel", str(ready), str(other))
    assert_one_line_error(
        result, f"job {other} is {status}: only ready, scheduled, blocked, waiting or running jobs can be cancelled")
    assert (status_of(qdb, ready), status_of(qdb, other)) == ("ready", status)


def test_a_paused_queue_keeps_its_jobs_ready_while_other_queues_run(qdb: QueueDB) -> None:
    with qdb.producer() as producer:
        held = [producer.enqueue("test.record", queue="held") for _ in range(3)]
        free = [producer.enqueue("test.record", queue="free") for _ in range(3)]
    qdb.cli("pause", "held", check=True)
    assert qdb.worker("--burst", "--queue", "held,free").wait(timeout=60) == 0
    assert {status_of(qdb, job_id) for job_id in free} == {"done"}
    assert {status_of(qdb, job_id) for job_id in held} == {"ready"}
    assert {line[2] for line in qdb.records()} == {"free"}
    assert qdb.cli("resume", "held", check=True).stdout.strip() == "resumed queue 'held'"
    assert qdb.worker("--burst", "--queue", "held,free").wait(timeout=60) == 0
    assert {status_of(qdb, job_id) for job_id in held} == {"done"}


def test_a_running_worker_picks_a_resumed_queue_up_without_a_restart(qdb: QueueDB) -> None:
    qdb.cli("pause", "held", check=True)
    with qdb.producer() as producer:
        job_id = producer.enqueue("test.record", queue="held")
    qdb.worker("--queue", "held")
    qdb.cli("resume", "held", check=True)
    qdb.wait_for(lambda: status_of(qdb, job_id) == "done", what="the resumed queue's job to run")


def test_pause_and_resume_say_what_they_did(qdb: QueueDB) -> None:
    plant(qdb, "ready", queue="mail")
    assert qdb.cli("pause", "mail", check=True).stdout.startswith(
        "paused queue 'mail': workers stop claiming from it at their next poll")
    assert qdb.cli("pause", "mail", check=True).stdout.strip() == "queue 'mail' is already paused"
    assert "paused queue 'typo' (it has no jobs yet)" in qdb.cli("pause", "typo", check=True).stdout
    assert qdb.cli("resume", "mail", check=True).stdout.strip() == "resumed queue 'mail'"
    assert qdb.cli("resume", "mail", check=True).stdout.strip() == "queue 'mail' was not paused"
    assert qdb.cli("resume", "never-seen", check=True).stdout.strip() == "queue 'never-seen' was not paused"
    assert dict(qdb.query("SELECT name, paused FROM mysqlq_queues")) == {"mail": 0, "typo": 1}
