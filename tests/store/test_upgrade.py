"""Online upgrade: a database of an older schema, holding jobs in every state, is migrated to the
newest without losing or changing any job, and then every job runs to completion with real workers."""

from __future__ import annotations

import collections
import datetime as dt
import json
import threading
import time
from typing import Any

import pytest
from mysqlq_harness.jobs import EVERY_JOB

from mysqlq.store import execute, fairness, schema
from mysqlq.store.schema import IN_ID_RANGES, _in_id_ranges, latest_version, migrate
from mysqlq.store.sql import migrations

from ..conftest import QueueDB, numbers

# The columns every schema since version 1 has; version 5 added dedupe_scope. Since version 18, the
# columns a claim writes in place hold 0 or the epoch for "none", where they held NULL before, and a
# lease is kept only while its job runs: read as before.
COLUMNS = ("id, queue, handler, payload, status, priority, run_at, attempts, max_attempts, time_limit, "
           "NULLIF(batch_id, 0), NULLIF(worker_id, 0), worker, "
           "IF(status = 'running', NULLIF(lease_until, '1970-01-01 00:00:00'), NULL), enqueued_at, "
           "NULLIF(started_at, '1970-01-01 00:00:00'), finished_at, dedupe_key, last_error")
ROW = ("INSERT INTO mysqlq_jobs (queue, handler, payload, status, priority, run_at, attempts, max_attempts, "
       "batch_id, worker_id, worker, lease_until, enqueued_at, started_at, finished_at, dedupe_key, last_error) "
       "VALUES (%(queue)s, 'test.record', %(payload)s, %(status)s, %(priority)s, "
       "NOW(6) + INTERVAL %(due_s)s SECOND, %(attempts)s, 3, %(batch_id)s, %(worker_id)s, %(worker)s, "
       "%(lease_until)s, NOW(6) - INTERVAL 1 HOUR, %(started_at)s, %(finished_at)s, %(dedupe_key)s, %(error)s)")
# A day ago (UTC, the server's time zone for mysqlq): ended jobs this old are kept by retention.
PAST = (dt.datetime.now(dt.UTC) - dt.timedelta(days=1)).replace(tzinfo=None)


def at_version(qdb: QueueDB, version: int) -> None:
    """Turn the test's database into one that was migrated up to ``version`` only."""
    conn = qdb.connect()
    with conn.cursor() as cur:
        cur.execute("SHOW TABLES")
        for (table,) in cur.fetchall():
            cur.execute(f"DROP TABLE {table}")
        execute(cur, "create_version_table")
        for number, statements in migrations():
            if number <= version:
                for statement in statements:
                    if statement.startswith(IN_ID_RANGES):  # a backfill, run as migrate runs it
                        _in_id_ranges(cur, statement, lambda: None)
                    else:
                        cur.execute(statement)
                execute(cur, "record_version", {"version": number})
    conn.close()


def job(status: str, queue: str = "default", **fields: Any) -> dict[str, Any]:
    row = {"queue": queue, "payload": '{"n": 1}', "status": status, "priority": 0, "due_s": 0, "attempts": 0,
           "batch_id": None, "worker_id": None, "worker": None, "lease_until": None, "started_at": None,
           "finished_at": None, "dedupe_key": None, "error": None}
    if status == "running":  # claimed by a worker that is gone, its lease lapsed
        row.update(batch_id=77, worker_id=999_999, worker="gone", lease_until=PAST, started_at=PAST, attempts=1)
    if status in ("done", "dead", "cancelled"):
        row.update(finished_at=PAST, started_at=PAST, attempts=1, batch_id=5)
    if status == "dead":
        row.update(attempts=3, error="ValueError: no\nTraceback ...")
    return {**row, **fields}


JOBS = [
    job("ready"), job("ready", priority=-5), job("ready", queue="mail", priority=3, dedupe_key="r-1"),
    job("scheduled", due_s=2), job("scheduled", queue="mail", due_s=3, dedupe_key="s-1"),
    job("running"), job("running", queue="mail", dedupe_key="u-1"),
    job("done"), job("done", queue="mail", dedupe_key="d-1"),
    job("dead"), job("dead", queue="mail", dedupe_key="x-1"),
    job("cancelled"), job("cancelled", queue="mail", dedupe_key="c-1"),
]


def snapshot(qdb: QueueDB, columns: str = COLUMNS, history: bool = True) -> list[tuple[Any, ...]]:
    """Every job, live or (``history``: from schema 17) moved into the history, by id."""
    return qdb.query(f"SELECT {columns} FROM {EVERY_JOB if history else 'mysqlq_jobs'} ORDER BY id")


def states_agree(qdb: QueueDB) -> int:
    """Rows whose index columns disagree with their status (must be none): running_batch is the
    claim's token while a job runs and 0 otherwise, scheduled_at its run_at while it is scheduled."""
    return int(qdb.scalar("""SELECT COUNT(*) FROM mysqlq_jobs
                              WHERE NOT (running_batch <=> IF(status = 'running', batch_id, 0))
                                 OR NOT (scheduled_at <=> IF(status = 'scheduled', run_at, NULL))
                                 OR (status = 'ready' AND finished_at IS NOT NULL)"""))


@pytest.mark.parametrize("version", [1, 2, 5])
def test_an_upgrade_keeps_every_job_and_then_runs_them_all(qdb: QueueDB, version: int) -> None:
    at_version(qdb, version)
    conn = qdb.connect()
    with conn.cursor() as cur:
        for row in JOBS:
            cur.execute(ROW, row)
        if version >= 5:  # the dedupe scopes of version 5: some keys hold only while their job is active
            cur.execute("UPDATE mysqlq_jobs SET dedupe_scope = 'active' WHERE dedupe_key IN ('r-1', 'u-1', 'x-1')")
        # Enough history that the backfill takes several primary-key ranges.
        cur.execute("INSERT INTO mysqlq_jobs (queue, handler, payload, status, run_at, max_attempts, attempts, "
                    "enqueued_at, started_at, finished_at, batch_id) SELECT 'default', 'test.record', '{}', 'done', "
                    "NOW(6) - INTERVAL 2 DAY, 3, 1, NOW(6) - INTERVAL 2 DAY, NOW(6) - INTERVAL 2 DAY, "
                    f"NOW(6) - INTERVAL 2 DAY, 9 FROM {numbers(12000)}")
    columns = COLUMNS + (", dedupe_scope" if version >= 5 else "")
    before = snapshot(qdb, columns, history=False)

    with conn.cursor() as cur:
        assert migrate(cur, qdb.name) == list(range(version + 1, latest_version() + 1))
    conn.close()

    assert snapshot(qdb, columns) == before  # nothing lost, nothing changed
    # The jobs that had ended done moved into the history, but for the one whose key is kept forever.
    live_done = {row[0] for row in qdb.query("SELECT dedupe_key FROM mysqlq_jobs WHERE status = 'done'")}
    assert live_done == {"d-1"} and qdb.scalar("SELECT COUNT(*) FROM mysqlq_jobs_history") == 12_001
    assert states_agree(qdb) == 0
    # A producer of the previous version, still running, enqueues with its own INSERT: the new
    # columns' defaults make its job claimable all the same.
    qdb.query("INSERT INTO mysqlq_jobs (queue, handler, payload, status, priority, run_at, max_attempts, enqueued_at)"
              " VALUES ('mail', 'test.record', '{}', 'ready', 0, NOW(6), 3, NOW(6))")
    qdb.query("INSERT INTO mysqlq_jobs (queue, handler, payload, status, priority, run_at, max_attempts, enqueued_at)"
              " VALUES ('mail', 'test.record', '{}', 'scheduled', 0, NOW(6) + INTERVAL 1 SECOND, 3, NOW(6))")
    assert states_agree(qdb) == 0
    dead = [int(row[0]) for row in qdb.query("SELECT id FROM mysqlq_jobs WHERE status = 'dead' ORDER BY id")]
    assert qdb.cli("retry", *map(str, dead)).returncode == 0
    to_run = {int(row[0]) for row in qdb.query(
        "SELECT id FROM mysqlq_jobs WHERE status IN ('ready', 'scheduled', 'running')")}
    assert len(to_run) == 2 + 3 + 2 + 2 + 2  # the ready, scheduled, running, retried dead and new ones

    qdb.worker("--queue", "default,mail", "--no-processlist-check")
    qdb.wait_for(lambda: {int(r[0]) for r in qdb.records()} >= to_run, timeout=60, what="every job to run")
    qdb.wait_for(lambda: qdb.scalar("SELECT COUNT(*) FROM mysqlq_jobs WHERE status NOT IN ('done', 'cancelled')") == 0,
                 what="every outcome to be written")
    qdb.stop_workers()
    assert states_agree(qdb) == 0
    assert qdb.statuses() == {"done": len(JOBS) - 2 + 12_000 + 2, "cancelled": 2}
    # The lost worker's jobs ran again (attempt 2), the others once.
    attempts = {int(r[0]): int(r[1]) for r in qdb.records()}
    running_ids = {int(row[0]) for row in before if row[4] == "running"}
    assert {attempts[i] for i in running_ids} == {2}
    # An 'active' key was freed when its job ended, a 'forever' key is kept.
    keys = {row[0] for row in qdb.query(f"SELECT dedupe_key FROM {EVERY_JOB} WHERE dedupe_key IS NOT NULL")}
    assert keys == ({"s-1", "d-1", "c-1"} if version >= 5 else {"r-1", "s-1", "u-1", "d-1", "x-1", "c-1"})


def test_a_worker_of_an_older_version_refuses_the_new_schema_in_one_line(qdb: QueueDB) -> None:
    # What a worker one version behind sees: a schema newer than it knows.
    qdb.query("INSERT INTO mysqlq_schema_version VALUES (%s, NOW(6))", (latest_version() + 1,))
    result = qdb.cli("worker", "--burst")
    assert result.returncode == 1
    lines = result.stderr.strip().splitlines()
    assert lines == [f"mysqlq: error: the schema is at version {latest_version() + 1}, newer than this mysqlq "
                     f"knows ({latest_version()}): upgrade mysqlq"], result.stderr


# The one statement a producer of schema 15 sends to enqueue a job (mysqlq's insert_job with one
# job_values_due row, as that version wrote it), kept here as it was: the producers an upgrade must
# not stop are the ones already deployed.
PRODUCER_15 = ("INSERT INTO mysqlq_jobs (queue, handler, payload, status, priority, run_at, max_attempts, time_limit,"
               " enqueued_at, dedupe_key, dedupe_scope, concurrency_key, tags, trace_context)"
               " VALUES (%s, 'test.record', %s, 'ready', 0, UTC_TIMESTAMP(6), 3, NULL, UTC_TIMESTAMP(6), NULL,"
               " 'forever', NULL, NULL, NULL) ON DUPLICATE KEY UPDATE id = LAST_INSERT_ID(id)")


def test_a_producer_of_schema_15_enqueues_throughout_the_migration_and_every_job_runs_once(qdb: QueueDB) -> None:
    at_version(qdb, 15)
    enqueued: list[int] = []
    stop = threading.Event()
    failures: list[BaseException] = []

    def produce() -> None:
        conn = qdb.connect()
        try:
            with conn.cursor() as cur:
                while not stop.is_set():
                    cur.execute(PRODUCER_15, ("default", json.dumps({"n": len(enqueued)})))
                    conn.commit()
                    enqueued.append(int(cur.lastrowid))
                    time.sleep(0.002)
        except BaseException as exc:  # reported by the test below
            failures.append(exc)
        finally:
            conn.close()

    producer = threading.Thread(target=produce, daemon=True)
    producer.start()
    qdb.wait_for(lambda: len(enqueued) >= 50, what="the old producer to enqueue")
    result = qdb.cli("migrate", check=True)
    assert f"schema migrated to version {latest_version()}" in result.stdout
    during = len(enqueued)
    qdb.wait_for(lambda: len(enqueued) >= during + 50, what="the old producer to go on after the migration")
    stop.set()
    producer.join(timeout=30)
    assert not failures, failures
    assert len(set(enqueued)) == len(enqueued)

    proc = qdb.worker("--burst")
    assert proc.wait(timeout=120) == 0, qdb.logs()
    runs = collections.Counter(int(record[0]) for record in qdb.records())
    assert set(runs) == set(enqueued) and set(runs.values()) == {1}
    assert qdb.statuses() == {"done": len(enqueued)}


def migrate_stopped(qdb: QueueDB, conn: Any, monkeypatch: pytest.MonkeyPatch, after_ranges: int) -> None:
    """Run `mysqlq migrate` on ``conn`` as a process that dies once a statement run in primary-key
    ranges has committed that many ranges."""
    ranges = 0

    def stop() -> None:
        nonlocal ranges
        ranges += 1
        if ranges == after_ranges:
            raise KeyboardInterrupt

    with conn.cursor() as cur:
        real = schema._in_id_ranges
        monkeypatch.setattr(schema, "_in_id_ranges", lambda c, s, _: real(c, s, stop))
        with pytest.raises(KeyboardInterrupt):
            migrate(cur, qdb.name)
        monkeypatch.undo()


def test_a_migration_stopped_while_it_moves_the_history_resumes_with_nothing_lost_or_moved_twice(
        qdb: QueueDB, monkeypatch: pytest.MonkeyPatch) -> None:
    at_version(qdb, 16)
    conn = qdb.connect()
    with conn.cursor() as cur:
        cur.execute("INSERT INTO mysqlq_jobs (queue, handler, payload, status, run_at, max_attempts, attempts, "
                    "enqueued_at, started_at, finished_at, batch_id, result) SELECT 'default', 'test.record', "
                    "CONCAT('{\"n\": ', seq, '}'), IF(seq % 10 = 0, 'ready', 'done'), NOW(6), 3, 1, NOW(6), NOW(6), "
                    f"NOW(6), 9, IF(seq % 3 = 0, '[1]', NULL) FROM {numbers(23_000)}")
    before = snapshot(qdb, COLUMNS + ", result", history=False)
    migrate_stopped(qdb, conn, monkeypatch, after_ranges=2)
    conn.close()
    assert qdb.scalar("SELECT COALESCE(MAX(version), 0) FROM mysqlq_schema_version") == 16
    moved = int(qdb.scalar("SELECT COUNT(*) FROM mysqlq_jobs_history"))
    assert 0 < moved < 20_700  # stopped half-way: two ranges moved
    assert snapshot(qdb, COLUMNS + ", result") == before  # every job in exactly one table meanwhile

    conn = qdb.connect()
    with conn.cursor() as cur:
        assert migrate(cur, qdb.name) == [17, 18, 19, 20]
    conn.close()
    assert snapshot(qdb, COLUMNS + ", result") == before
    assert qdb.scalar("SELECT COUNT(*) FROM mysqlq_jobs_history") == 20_700
    assert qdb.statuses() == {"done": 20_700, "ready": 2_300}


def jobs_at_17(qdb: QueueDB) -> Any:
    """The test's database at schema 17 with JOBS in it; a connection to it (the caller closes it)."""
    at_version(qdb, 17)
    conn = qdb.connect()
    with conn.cursor() as cur:
        for row in JOBS:
            cur.execute(ROW, row)
    return conn


def test_a_migration_to_the_in_place_claim_stopped_half_way_resumes_and_every_job_runs_once(
        qdb: QueueDB, monkeypatch: pytest.MonkeyPatch) -> None:
    # Schema 18 sets the new defaults, fills the NULLs of older rows range by range, then rebuilds
    # the table: stopped after the history lost its column and in the middle of the fill, it resumes.
    conn = jobs_at_17(qdb)
    with conn.cursor() as cur:
        cur.execute("INSERT INTO mysqlq_jobs (queue, handler, payload, status, run_at, max_attempts, enqueued_at) "
                    f"SELECT 'default', 'test.record', CONCAT('{{\"n\": ', seq, '}}'), 'ready', NOW(6), 3, NOW(6) "
                    f"FROM {numbers(12_000)}")
    before = snapshot(qdb, COLUMNS)
    migrate_stopped(qdb, conn, monkeypatch, after_ranges=1)
    assert qdb.scalar("SELECT COALESCE(MAX(version), 0) FROM mysqlq_schema_version") == 17
    # A producer of the previous version goes on meanwhile (the defaults are set first).
    qdb.query(PRODUCER_15, ("default", '{"n": -1}'))
    assert qdb.scalar("SELECT COUNT(*) FROM mysqlq_jobs WHERE running_batch IS NULL") > 0  # the fill is half-way
    with conn.cursor() as cur:
        assert migrate(cur, qdb.name) == [18, 19, 20]
    conn.close()
    assert snapshot(qdb, COLUMNS)[:len(before)] == before
    assert states_agree(qdb) == 0
    to_run = {int(row[0]) for row in qdb.query("SELECT id FROM mysqlq_jobs WHERE status IN ('ready', 'scheduled', "
                                                "'running')")}
    assert len(to_run) == 12_000 + 1 + 3 + 2 + 2  # the filled, the new, the ready, scheduled and lost-running ones
    qdb.worker("--queue", "default,mail", "--no-processlist-check")
    qdb.wait_for(lambda: {int(r[0]) for r in qdb.records()} >= to_run, timeout=120, what="every job to run")
    qdb.stop_workers()
    runs = collections.Counter(int(record[0]) for record in qdb.records())
    assert set(runs) == to_run and set(runs.values()) == {1}


# What a worker of schema 18 sends to claim (its ORDER BY names no turn) and to end a batch done
# (the history's columns, which schema 19 leaves as they were).
CLAIM_18 = ("UPDATE mysqlq_jobs FORCE INDEX (mysqlq_jobs_live) SET status = 'running', running_batch = %(batch)s,"
            " batch_id = %(batch)s, worker_id = 1, attempts = attempts + 1, started_at = NOW(6),"
            " lease_until = NOW(6) + INTERVAL 60 SECOND WHERE running_batch = 0 AND status = 'ready'"
            " AND queue = 'default' ORDER BY running_batch, status, queue, finished_at, priority, id LIMIT 5")


def test_a_migration_to_fair_queues_stopped_after_its_alter_resumes_and_schema_18_workers_go_on(
        qdb: QueueDB, monkeypatch: pytest.MonkeyPatch) -> None:
    conn = jobs_at_17(qdb)
    with conn.cursor() as cur:
        with monkeypatch.context() as up_to_18:  # the jobs as the previous version left them
            up_to_18.setattr(schema, "migrations", lambda: [m for m in migrations() if m[0] <= 18])
            assert migrate(cur, qdb.name) == [18]
        # Stopped right after the ALTER committed (before the new table and the version's record).
        (alter, *_rest), = [statements for number, statements in migrations() if number == 19]
        cur.execute(alter)
    before = snapshot(qdb, COLUMNS)
    with conn.cursor() as cur:
        assert migrate(cur, qdb.name) == [19, 20]  # the ALTER finds its columns there: done
    assert snapshot(qdb, COLUMNS) == before
    assert qdb.scalar("SELECT COUNT(*) FROM mysqlq_jobs WHERE turn <> %s OR fairness_key IS NOT NULL",
                      (fairness.UNTURNED,)) == 0  # jobs of before: no key, no turn given
    # A worker of schema 18 still claims (in id order within a priority) and moves its done jobs.
    with conn.cursor() as cur:
        assert cur.execute(CLAIM_18, {"batch": 4242}) == 2  # the two ready jobs of the default queue
        cur.execute("START TRANSACTION")
        assert execute(cur, "move_done_batch", {"batch_id": 4242}) == 2
        assert execute(cur, "delete_done_batch", {"batch_id": 4242}) == 2
        cur.execute("COMMIT")
    conn.close()
    assert qdb.scalar("SELECT COUNT(*) FROM mysqlq_jobs_history WHERE batch_id = 4242") == 2


# What a producer of schema 19 sends to enqueue a job with a dedupe key (the columns of insert_job).
ENQUEUE_19 = ("INSERT INTO mysqlq_jobs (queue, handler, payload, status, priority, run_at, max_attempts, time_limit,"
              " enqueued_at, dedupe_key, dedupe_scope, concurrency_key, tags, trace_context)"
              " VALUES ('default', 'test.record', '{}', 'ready', 0, UTC_TIMESTAMP(6), 3, NULL, UTC_TIMESTAMP(6),"
              " %s, 'forever', NULL, NULL, NULL) ON DUPLICATE KEY UPDATE id = LAST_INSERT_ID(id)")


def test_a_migration_to_dedupe_periods_stopped_before_its_record_resumes_and_schema_19_producers_go_on(
        qdb: QueueDB) -> None:
    at_version(qdb, 19)
    conn = qdb.connect()
    with conn.cursor() as cur:
        cur.execute(ENQUEUE_19, ("before",))
        (create,), = [statements for number, statements in migrations() if number == 20]
        cur.execute(create)  # stopped right after the table was made, before the version's record
        cur.execute(ENQUEUE_19, ("during",))
        assert migrate(cur, qdb.name) == [20]  # the table is there already: done
        cur.execute(ENQUEUE_19, ("after",))
        before = cur.lastrowid
        cur.execute(ENQUEUE_19, ("before",))  # a key of schema 19 is still the job's own
        assert cur.lastrowid == qdb.scalar("SELECT id FROM mysqlq_jobs WHERE dedupe_key = 'before'") != before
    conn.close()
    assert qdb.scalar("SELECT COUNT(*) FROM mysqlq_jobs") == 3
    with qdb.producer() as producer:  # and the new version holds a key for a period beside them
        period = producer.enqueue("test.record", dedupe_key="before", dedupe_scope="1h")
        assert producer.enqueue("test.record", dedupe_key="before", dedupe_scope="1h") == period
    assert qdb.scalar("SELECT COUNT(*) FROM mysqlq_jobs") == 4
    assert latest_version() == 20
