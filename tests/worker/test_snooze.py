"""Snoozing: a handler that raises mysqlq.Snooze (or calls ctx.snooze) ends its run without failing;
the job runs again that many seconds later, its attempt not spent, and the snooze is counted. A
transactional handler's writes roll back; a job snoozed past --max-snoozes ends dead; a cancel
wins over a snooze."""

from __future__ import annotations

import pytest
from mysqlq_harness.jobs import EVERY_JOB

import mysqlq
from mysqlq import Job

from ..conftest import QueueDB


def row(qdb: QueueDB, job_id: int) -> tuple[str, int, int]:
    status, attempts, snoozes = qdb.query(f"SELECT status, attempts, snoozes FROM {EVERY_JOB} WHERE id = %s",
                                          (job_id,))[0]
    return str(status), int(attempts), int(snoozes)


def runs(qdb: QueueDB, job_id: int) -> list[list[str]]:
    return [line for line in qdb.records() if line[0] == str(job_id) and "snooze-run" in line]


@pytest.mark.parametrize("how", ["ctx", "raise"])
def test_a_snoozed_job_runs_again_later_with_its_attempt_not_spent(qdb: QueueDB, how: str) -> None:
    with qdb.producer() as producer:
        job_id = producer.enqueue("test.snooze", {"seconds": 0.1, "until": 3, "raise": how == "raise"})
    qdb.worker()
    qdb.wait_done(1, timeout=30)
    assert row(qdb, job_id) == ("done", 1, 2)  # three runs, one attempt spent, two snoozes
    assert [line[1] for line in runs(qdb, job_id)] == ["1", "1", "1"]  # each run was attempt 1
    logs = qdb.logs()
    assert logs.count("job.snoozed") == 2 and "snoozes=1" in logs and "snoozes=2" in logs
    assert "job.failed" not in logs
    shown = qdb.cli("jobs", "show", str(job_id), check=True).stdout
    assert "snoozed" in shown and "2 times" in shown


def test_a_snoozed_job_waits_as_scheduled_for_the_seconds_asked(qdb: QueueDB) -> None:
    with qdb.producer() as producer:
        job_id = producer.enqueue("test.snooze", {"seconds": 3600})
    qdb.worker()
    qdb.wait_for(lambda: row(qdb, job_id)[0] == "scheduled", timeout=30, what="the job to be snoozed")
    assert row(qdb, job_id) == ("scheduled", 0, 1)  # the attempt its claim took was refunded
    wait = qdb.scalar("SELECT TIMESTAMPDIFF(SECOND, NOW(6), run_at) FROM mysqlq_jobs WHERE id = %s", (job_id,))
    assert 3500 <= int(wait) <= 3600
    assert qdb.scalar("SELECT last_error FROM mysqlq_jobs WHERE id = %s", (job_id,)) is None  # not a failure


def test_an_async_handler_snoozes(qdb: QueueDB) -> None:
    with qdb.producer() as producer:
        job_id = producer.enqueue("test.asnooze", {"seconds": 0.1, "until": 2})
    qdb.worker()
    qdb.wait_done(1, timeout=30)
    assert row(qdb, job_id) == ("done", 1, 1)


def test_a_transactional_handler_that_snoozes_rolls_its_writes_back(qdb: QueueDB) -> None:
    qdb.query("CREATE TABLE test_effects (job_id BIGINT NOT NULL, attempt INT NOT NULL, KEY (job_id))")
    with qdb.producer() as producer:
        job_id = producer.enqueue("test.tsnooze", {"seconds": 0.1, "until": 3})
    qdb.worker()
    qdb.wait_done(1, timeout=30)
    assert row(qdb, job_id) == ("done", 1, 2)
    assert len(runs(qdb, job_id)) == 3
    assert qdb.query("SELECT job_id, attempt FROM test_effects") == [(job_id, 1)]  # the last run's alone


def test_a_job_snoozed_past_the_cap_ends_dead_with_the_reason(qdb: QueueDB) -> None:
    with qdb.producer() as producer:
        job_id = producer.enqueue("test.snooze", {"seconds": 0})
    qdb.worker("--max-snoozes", "2")
    qdb.wait_for(lambda: row(qdb, job_id)[0] == "dead", timeout=30, what="the job to end dead")
    assert row(qdb, job_id) == ("dead", 1, 2)
    assert len(runs(qdb, job_id)) == 3
    error = qdb.scalar("SELECT last_error FROM mysqlq_jobs WHERE id = %s", (job_id,))
    assert error.startswith("SnoozedTooOften: snoozed 2 times") and "--max-snoozes" in error
    qdb.wait_for(lambda: "job.dead" in qdb.logs(), timeout=10, what="the job.dead line")


def test_a_cancel_wins_over_a_snooze(qdb: QueueDB) -> None:
    with qdb.producer() as producer:
        job_id = producer.enqueue("test.snooze", {"seconds": 0.1, "wait": 2})
    qdb.worker()
    qdb.wait_for(lambda: runs(qdb, job_id), timeout=30, what="the job to start")
    qdb.cli("cancel", str(job_id), check=True)
    qdb.wait_for(lambda: "job.cancelled" in qdb.logs(), timeout=30, what="the worker to end it")
    assert row(qdb, job_id)[0] == "cancelled"
    with qdb.producer() as producer:
        producer.enqueue("test.record")  # the worker goes on; the cancelled job never runs again
    qdb.wait_for(lambda: [line for line in qdb.records() if "snooze-run" not in line], timeout=30,
                 what="the next job")
    assert len(runs(qdb, job_id)) == 1 and row(qdb, job_id)[0] == "cancelled"


def test_a_snooze_of_a_bad_length_fails_the_job_with_the_reason(qdb: QueueDB) -> None:
    with qdb.producer() as producer:
        producer.enqueue_many([Job("test.snooze", {"seconds": -1}, max_attempts=1)])
    qdb.worker()
    qdb.wait_for(lambda: qdb.statuses() == {"dead": 1}, timeout=30, what="the job to fail")
    error = qdb.scalar("SELECT last_error FROM mysqlq_jobs")
    assert error.startswith("ValueError: Snooze takes a number of seconds from 0 to")


def test_snooze_refuses_what_is_not_a_length() -> None:
    for bad in (-1, float("nan"), float("inf"), True, "30", 400 * 86400):
        with pytest.raises(ValueError, match="Snooze takes a number of seconds"):
            mysqlq.Snooze(bad)  # type: ignore[arg-type]
    assert mysqlq.Snooze(30).seconds == 30.0
