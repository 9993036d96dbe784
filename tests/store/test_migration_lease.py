"""The migration lock's lease is renewed while a statement runs: a statement longer than the lease (an
index build over a large table) does not let a second `mysqlq migrate` in; it waits, then finds
nothing left to do. Without the renewal, the second one would have started the same migration."""

from __future__ import annotations

import threading
import time
from typing import Any

import pytest
from mysqlq_harness.jobs import EVERY_JOB
from mysqlq_harness.waiting import wait_for

from mysqlq.store import schema
from mysqlq.store.sql import migrations

from ..conftest import QueueDB

LEASE = 1.0  # seconds; the slow statement below takes three leases
SLOW = "SELECT SLEEP(3)"


def migrate_in_thread(qdb: QueueDB, renew: bool, results: dict[str, Any], key: str) -> threading.Thread:
    def run() -> None:
        conn = qdb.connect()
        try:
            with conn.cursor() as cur:
                results[key] = schema.migrate(cur, qdb.name, wait=20, renew_on=qdb.connect if renew else None)
        except BaseException as exc:  # reported by the test
            results[key] = exc
        finally:
            conn.close()

    thread = threading.Thread(target=run)
    thread.start()
    return thread


def with_a_slow_last_migration(qdb: QueueDB, monkeypatch: pytest.MonkeyPatch) -> int:
    """The newest migration, unapplied again, replaced by one statement that outlasts the lease."""
    real = migrations()
    last = real[-1][0]
    monkeypatch.setattr(schema, "migrations", lambda: [*real[:-1], (last, [SLOW])])
    monkeypatch.setattr(schema, "MIGRATION_LEASE", LEASE)
    qdb.query("DELETE FROM mysqlq_schema_version WHERE version = %s", (last,))
    return last


def slow_statements_seen(qdb: QueueDB) -> int:
    return int(qdb.scalar("SELECT COUNT(*) FROM information_schema.processlist WHERE info = %s", (SLOW,)))


@pytest.mark.parametrize("renew", [True, False], ids=["renewed", "not-renewed"])
def test_a_second_migrate_waits_for_a_statement_longer_than_the_lease(
        qdb: QueueDB, monkeypatch: pytest.MonkeyPatch, renew: bool) -> None:
    last = with_a_slow_last_migration(qdb, monkeypatch)
    results: dict[str, Any] = {}
    first = migrate_in_thread(qdb, renew, results, "first")
    wait_for(lambda: slow_statements_seen(qdb) == 1, "the slow statement to start", 10)
    second = migrate_in_thread(qdb, renew, results, "second")
    # Two leases later the first is still in its statement: has the second started it too?
    overlapped = wait_for_overlap(qdb, timeout=2 * LEASE + 0.5)
    first.join(20)
    second.join(20)
    if renew:
        assert not overlapped
        assert results == {"first": [last], "second": []}  # it waited, then found the schema current
    else:  # the lease lapsed mid-statement: the second migrate ran the same migration beside it
        assert overlapped
        assert results["first"] == [last]
    assert qdb.scalar("SELECT holder FROM mysqlq_migration_lock") is None  # released at the end


def wait_for_overlap(qdb: QueueDB, timeout: float) -> bool:
    """True once two slow statements run at once (two migrations at work), within ``timeout``."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if slow_statements_seen(qdb) >= 2:
            return True
        time.sleep(0.05)
    return False


def test_a_worker_started_during_a_migration_waits_for_it_then_runs(qdb: QueueDB) -> None:
    import signal

    latest = max(version for version, _ in migrations())
    # A migration at work: the lock held, the newest version not yet recorded.
    qdb.query("UPDATE mysqlq_migration_lock SET holder = 'another', lease_until = NOW(6) + INTERVAL 60 SECOND")
    qdb.query("DELETE FROM mysqlq_schema_version WHERE version = %s", (latest,))
    # A job enqueued as a producer of the previous version would (the new one refuses the old schema).
    qdb.query("INSERT INTO mysqlq_jobs (queue, handler, payload, status, run_at, max_attempts, enqueued_at) "
              "VALUES ('default', 'test.record', '{}', 'ready', UTC_TIMESTAMP(6), 3, UTC_TIMESTAMP(6))")
    job_id = qdb.scalar("SELECT MAX(id) FROM mysqlq_jobs")
    waiting = qdb.worker()
    stopped = qdb.worker()
    wait_for(lambda: qdb.logs().count("worker.waiting_for_migration") == 2, "both workers to wait", 30)
    assert waiting.poll() is None and stopped.poll() is None  # waiting, not failed
    stopped.send_signal(signal.SIGTERM)  # a stop while waiting ends it at once, cleanly
    assert stopped.wait(10) == 0
    # The migration ends: the waiting worker starts and runs the job.
    qdb.query("INSERT INTO mysqlq_schema_version (version, applied_at) VALUES (%s, NOW(6))", (latest,))
    qdb.query("UPDATE mysqlq_migration_lock SET holder = NULL, lease_until = NOW(6)")
    wait_for(lambda: qdb.scalar(f"SELECT status FROM {EVERY_JOB} WHERE id = %s", (job_id,)) == "done",
             "the job to run", 30)
    assert "worker.migration_done" in qdb.logs() and waiting.poll() is None


def test_a_worker_of_an_older_schema_without_a_migration_still_refuses_in_one_line(qdb: QueueDB) -> None:
    latest = max(version for version, _ in migrations())
    qdb.query("DELETE FROM mysqlq_schema_version WHERE version = %s", (latest,))
    result = qdb.cli("worker", "--burst")
    assert result.returncode != 0
    assert "run `mysqlq migrate`" in result.stderr and "waiting_for_migration" not in result.stderr
