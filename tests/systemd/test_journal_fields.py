"""Journal output: a worker's job events reach a real (private) journald with filterable fields."""

from __future__ import annotations

import os

from mysqlq_harness.journald import PrivateJournald
from mysqlq_harness.waiting import wait_for

from ..conftest import MYSQLQ, QueueDB


def test_a_jobs_story_is_found_by_job_id_with_its_fields(qdb: QueueDB, journald: PrivateJournald) -> None:
    with qdb.producer() as producer:
        done_id = producer.enqueue("test.record", {"tag": "journal"}, queue="jq")
        dead_id = producer.enqueue("test.fail", {}, queue="jq", max_attempts=1)
    env = qdb.env(MYSQLQ_LOG_FORMAT="journal")
    result = journald.run(MYSQLQ, "worker", "--burst", "--name", "journal-1", "--queue", "jq", env=env)
    assert result.returncode == 0, result.stderr
    assert result.stderr == ""  # everything went to the journal

    done = wait_for(lambda: journald.entries(f"JOB_ID={done_id}"), "the done job's entries", 30)
    [entry] = [e for e in done if e.get("MYSQLQ_EVENT") == "job.done"]
    assert entry["JOB_ID"] == str(done_id)
    assert entry["QUEUE"] == "jq"
    assert entry["HANDLER"] == "test.record"
    assert entry["WORKER"] == "journal-1"
    assert entry["ATTEMPT"] == "1"
    assert entry["BATCH_ID"].isdigit()
    assert entry["PRIORITY"] == "6"
    assert entry["SYSLOG_IDENTIFIER"] == "mysqlq"
    assert entry["MESSAGE"].startswith(f"job.done job_id={done_id} queue=jq handler=test.record attempt=1 ")
    assert int(entry["_PID"]) != os.getpid()

    # The batch the job came in tells the rest of its story (claimed, by whom).
    claimed = journald.entries(f"BATCH_ID={entry['BATCH_ID']}", "MYSQLQ_EVENT=batch.claimed")
    assert [e["WORKER"] for e in claimed] == ["journal-1"]

    dead = wait_for(lambda: journald.entries(f"JOB_ID={dead_id}"), "the dead job's entries", 30)
    [failure] = [e for e in dead if e.get("MYSQLQ_EVENT") == "job.dead"]
    assert failure["PRIORITY"] == "3"
    assert failure["ERROR"] == "ValueError: boom on attempt 1"
    assert failure["HANDLER"] == "test.fail" and failure["MAX_ATTEMPTS"] == "1"
    assert 'error="ValueError: boom on attempt 1"' in failure["MESSAGE"]

    errors = journald.entries("SYSLOG_IDENTIFIER=mysqlq", "PRIORITY=3")
    assert {e["JOB_ID"] for e in errors} == {str(dead_id)}
    started = journald.entries("MYSQLQ_EVENT=worker.started")
    assert len(started) == 1 and started[0]["WORKER"] == "journal-1"
    assert "password" not in started[0]["DSN"]
