"""The producer API: single, bulk, delayed, deduplicated and transactional enqueues."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest

from mysqlq import InvalidJob, Job, SchemaError, enqueue_on
from mysqlq.core.jobs import encode_payload

from ..conftest import QueueDB


def test_enqueue_returns_the_id_of_a_ready_job(qdb: QueueDB) -> None:
    with qdb.producer() as producer:
        first = producer.enqueue("test.record", {"n": 1})
        second = producer.enqueue("test.record", {"n": 2}, queue="mail", priority=-5, max_attempts=3)
    assert second > first
    row = qdb.query("SELECT queue, handler, payload, status, priority, attempts, max_attempts FROM mysqlq_jobs "
                    "WHERE id = %s", (second,))[0]
    assert row == ("mail", "test.record", b'{"n":2}', "ready", -5, 0, 3)


def test_delay_and_run_at_make_a_scheduled_job_due_later(qdb: QueueDB) -> None:
    with qdb.producer() as producer:
        delayed = producer.enqueue("test.record", delay=60)
        later = producer.enqueue("test.record", run_at=datetime.now(UTC) + timedelta(hours=1))
    rows = qdb.query("SELECT id, status, TIMESTAMPDIFF(SECOND, NOW(6), run_at) FROM mysqlq_jobs ORDER BY id")
    assert rows[0][:2] == (delayed, "scheduled") and 55 <= rows[0][2] <= 60
    assert rows[1][:2] == (later, "scheduled") and 3590 <= rows[1][2] <= 3600


def test_a_taken_dedupe_key_returns_the_existing_job(qdb: QueueDB) -> None:
    with qdb.producer() as producer:
        first = producer.enqueue("test.record", {"v": 1}, dedupe_key="invoice-7")
        again = producer.enqueue("test.record", {"v": 2}, dedupe_key="invoice-7")
        other = producer.enqueue("test.record", {"v": 3}, dedupe_key="invoice-8")
    assert again == first != other
    assert qdb.scalar("SELECT COUNT(*) FROM mysqlq_jobs") == 2
    assert qdb.scalar("SELECT payload FROM mysqlq_jobs WHERE id = %s", (first,)) == b'{"v":1}'


def test_bulk_enqueue_inserts_all_and_skips_taken_dedupe_keys(qdb: QueueDB) -> None:
    with qdb.producer() as producer:
        producer.enqueue("test.record", dedupe_key="k1")
        jobs = [Job("test.record", {"i": i}, queue="bulk") for i in range(2500)]
        jobs.append(Job("test.record", dedupe_key="k1"))
        assert producer.enqueue_many(jobs) == 2500
    assert qdb.scalar("SELECT COUNT(*) FROM mysqlq_jobs WHERE queue = 'bulk'") == 2500
    order = [row[0] for row in qdb.query("SELECT payload FROM mysqlq_jobs WHERE queue = 'bulk' ORDER BY id")]
    assert order[0] == b'{"i":0}' and order[-1] == b'{"i":2499}'


def test_bulk_enqueue_writes_nothing_when_one_job_is_bad(qdb: QueueDB) -> None:
    with qdb.producer() as producer, pytest.raises(InvalidJob, match="queue name must not be empty"):
        producer.enqueue_many([Job("test.record"), Job("test.record", queue="")])
    assert qdb.scalar("SELECT COUNT(*) FROM mysqlq_jobs") == 0


def test_transaction_commit_makes_the_job_and_the_callers_row_exist(qdb: QueueDB) -> None:
    qdb.query("CREATE TABLE orders (id INT PRIMARY KEY)")
    with qdb.producer() as producer, producer.transaction() as tx:
        with tx.cursor() as cur:
            cur.execute("INSERT INTO orders (id) VALUES (1)")
        job_id = tx.enqueue("test.record", {"order": 1})
    assert qdb.scalar("SELECT COUNT(*) FROM orders") == 1
    assert qdb.scalar("SELECT status FROM mysqlq_jobs WHERE id = %s", (job_id,)) == "ready"


def test_transaction_rollback_leaves_no_job(qdb: QueueDB) -> None:
    qdb.query("CREATE TABLE orders (id INT PRIMARY KEY)")
    with qdb.producer() as producer, pytest.raises(RuntimeError), producer.transaction() as tx:
        with tx.cursor() as cur:
            cur.execute("INSERT INTO orders (id) VALUES (1)")
        tx.enqueue("test.record", {"order": 1})
        raise RuntimeError("payment declined")
    assert qdb.scalar("SELECT COUNT(*) FROM orders") == 0
    assert qdb.scalar("SELECT COUNT(*) FROM mysqlq_jobs") == 0


def test_enqueue_on_the_callers_own_connection_follows_its_transaction(qdb: QueueDB) -> None:
    conn = qdb.connect()
    conn.begin()
    kept = enqueue_on(conn, Job("test.record", {"kept": True}))
    conn.commit()
    conn.begin()
    enqueue_on(conn, Job("test.record", {"kept": False}))
    conn.rollback()
    conn.close()
    assert [row[0] for row in qdb.query("SELECT id FROM mysqlq_jobs")] == [kept]


@pytest.mark.parametrize(
    ("job", "message"),
    [
        (Job(""), "handler name must not be empty"),
        (Job("h" * 101), "limit is 100"),
        (Job("ok", queue=" padded"), "whitespace"),
        (Job("ok", {1, 2}), "cannot be stored as JSON"),
        (Job("ok", float("nan")), "cannot be stored as JSON"),
        (Job("ok", delay=-1), "delay must be a number of seconds >= 0"),
        (Job("ok", priority=40000), "priority must be"),
        (Job("ok", max_attempts=0), "max attempts"),
        (Job("ok", dedupe_key="k" * 192), "dedupe key"),
        (Job("ok", "x" * 2_000_000), "the limit is"),
    ],
)
def test_bad_jobs_are_refused_and_nothing_is_written(qdb: QueueDB, job: Job, message: str) -> None:
    with qdb.producer() as producer, pytest.raises(InvalidJob, match=message):
        producer.enqueue_many([job])
    assert qdb.scalar("SELECT COUNT(*) FROM mysqlq_jobs") == 0


def test_payload_size_limit_counts_encoded_bytes() -> None:
    assert encode_payload({"a": "é"}, 100) == '{"a":"é"}'.encode()
    with pytest.raises(InvalidJob, match="payload is 10 bytes; the limit is 9"):
        encode_payload({"a": "é"}, 9)


def test_producer_refuses_a_database_without_the_schema(qdb: QueueDB) -> None:
    qdb.query("DROP TABLE mysqlq_schema_version")
    with qdb.producer() as producer, pytest.raises(SchemaError, match="run `mysqlq migrate`"):
        producer.enqueue("test.record")
