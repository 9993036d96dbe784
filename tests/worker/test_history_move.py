"""The live jobs apart from their history (schema 17): a job that ends done moves from mysqlq_jobs into
mysqlq_jobs_history in the transaction that ends it, on every path that completes a job, fenced by
its batch; a job is in exactly one table; jobs with a dedupe key kept forever, and jobs others wait
for, stay live."""

from __future__ import annotations

import collections
import threading

import MySQLdb
import pytest

from mysqlq import Dsn, Job
from mysqlq.store import claims
from mysqlq.store.db import Connection, Cursor, connect

from ..conftest import QueueDB


def in_both(qdb: QueueDB) -> int:
    return int(qdb.scalar("SELECT COUNT(*) FROM mysqlq_jobs j JOIN mysqlq_jobs_history h ON h.id = j.id"))


def test_done_jobs_move_into_the_history_on_every_path_and_each_is_in_one_table(qdb: QueueDB) -> None:
    qdb.query("CREATE TABLE test_effects (job_id BIGINT NOT NULL, attempt INT NOT NULL, KEY (job_id))")
    with qdb.producer() as producer:
        plain = producer.enqueue_many([Job("test.record", {"tag": str(i)}) for i in range(2000)])
        assert plain == 2000
        with_result = producer.enqueue("test.echo", {"value": 7})
        transactional = producer.enqueue("test.techo", {"value": 8})
        forever = producer.enqueue("test.record", dedupe_key="order-1")
        active = producer.enqueue("test.record", dedupe_key="order-2", dedupe_scope="active")
        dead = producer.enqueue("test.fail", max_attempts=1)
        chain = producer.chain(Job("test.step", {"tag": "a"}), Job("test.step", {"tag": "b"}))
    procs = [qdb.worker("--burst", "--batch-size", "50") for _ in range(3)]
    for proc in procs:
        assert proc.wait(timeout=120) == 0, qdb.logs()
    runs = collections.Counter(record[0] for record in qdb.records())
    assert len(runs) >= 2000 + 2 and set(runs.values()) == {1}  # every job ran once
    assert in_both(qdb) == 0
    live = {int(row[0]): row[1] for row in qdb.query("SELECT id, status FROM mysqlq_jobs")}
    # What stays live: the dead job, the one whose key is kept forever, the chain's parent.
    assert live == {dead: "dead", forever: "done", chain[0]: "done"}
    moved = dict(qdb.query("SELECT status, COUNT(*) FROM mysqlq_jobs_history GROUP BY status"))
    assert moved == {"done": 2000 + 4}
    # A moved job is whole: its result, its freed 'active' key, its times, its attempt.
    row = qdb.query("SELECT result, dedupe_key, finished_at IS NOT NULL, started_at IS NOT NULL, attempts, "
                    "running_batch, lease_until, worker IS NOT NULL FROM mysqlq_jobs_history WHERE id = %s",
                    (with_result,))
    assert row == [(b"7", None, 1, 1, 1, None, None, 1)]  # with its worker's name, written as the job moved
    assert qdb.scalar("SELECT dedupe_key FROM mysqlq_jobs_history WHERE id = %s", (active,)) is None
    assert qdb.query("SELECT job_id FROM test_effects") == [(transactional,)]
    with qdb.producer() as producer:
        assert producer.job(with_result).result == 7
        assert producer.job(transactional).status == "done"
        # The key kept forever still names its job; the freed one may be taken again.
        assert producer.enqueue("test.record", dedupe_key="order-1") == forever
        assert producer.enqueue("test.record", dedupe_key="order-2", dedupe_scope="active") != active
    shown = qdb.cli("jobs", "show", str(with_result), check=True).stdout
    assert "done" in shown


def claimed(qdb: QueueDB, batch_id: int, count: int) -> list[int]:
    with qdb.producer() as producer:
        ids = [producer.enqueue("test.record") for _ in range(count)]
    conn = connect(Dsn.parse(qdb.dsn))
    try:
        with conn.cursor() as cur:
            assert claims.claim_update(cur, "default", batch_id, 0, 60, count) == count
    finally:
        conn.close()
    return ids


def test_a_completion_moves_only_the_jobs_its_batch_still_holds(qdb: QueueDB) -> None:
    ids = claimed(qdb, 111, 3)
    # The reaper gave one back meanwhile, and an operator cancelled another.
    qdb.query("UPDATE mysqlq_jobs SET status = 'ready', running_batch = 0, batch_id = 0 "
              "WHERE id = %s", (ids[0],))
    qdb.query("UPDATE mysqlq_jobs SET status = 'cancelled', running_batch = 0, finished_at = NOW(6) WHERE id = %s",
              (ids[1],))
    conn = connect(Dsn.parse(qdb.dsn))
    try:
        with conn.cursor() as cur:
            assert claims.complete_batch(cur, 111) == 1
            assert claims.complete(cur, 111, ids) == 0  # again: nothing left to move
            assert claims.completed_ids(cur, 111, ids) == {ids[2]}
    finally:
        conn.close()
    assert dict(qdb.query("SELECT id, status FROM mysqlq_jobs")) == {ids[0]: "ready", ids[1]: "cancelled"}
    assert [row[0] for row in qdb.query("SELECT id FROM mysqlq_jobs_history")] == [ids[2]]


def test_a_completion_that_waits_for_a_taken_over_job_moves_it_not(qdb: QueueDB) -> None:
    """The copy's locking read waits for a job another transaction is taking over, then sees it is no
    longer the batch's: it is neither copied nor deleted, and the rest moves."""
    ids = claimed(qdb, 111, 3)
    other = connect(Dsn.parse(qdb.dsn))
    conn = connect(Dsn.parse(qdb.dsn))
    try:
        with other.cursor() as cur:  # the reaper, in the middle of giving a job back
            other.begin()
            cur.execute("UPDATE mysqlq_jobs SET status = 'ready', running_batch = 0, "
                        "batch_id = 0 WHERE id = %s", (ids[1],))
        moved: list[int] = []
        thread = threading.Thread(target=lambda: moved.append(claims.complete_batch(conn.cursor(), 111)))
        thread.start()
        thread.join(timeout=1.0)
        assert thread.is_alive()  # waiting for the reaper's lock
        other.commit()
        thread.join(timeout=30)
        assert moved == [2]
    finally:
        other.close()
        conn.close()
    assert dict(qdb.query("SELECT id, status FROM mysqlq_jobs")) == {ids[1]: "ready"}
    assert sorted(row[0] for row in qdb.query("SELECT id FROM mysqlq_jobs_history")) == [ids[0], ids[2]]


def lock_and_wait_briefly(other: Connection, conn: Connection, job_id: int) -> int:
    """``other`` holds a lock on the job's row in an open transaction; ``conn`` waits for a lock at
    most a second. Returns ``conn``'s connection id."""
    with other.cursor() as cur:
        other.begin()
        cur.execute("SELECT id FROM mysqlq_jobs WHERE id = %s FOR UPDATE", (job_id,))
    with conn.cursor() as cur:
        cur.execute("SET SESSION innodb_lock_wait_timeout = 1")
        cur.execute("SELECT CONNECTION_ID()")
        return int(cur.fetchone()[0])


def open_transactions(qdb: QueueDB, connection_id: int) -> int:
    return int(qdb.scalar("SELECT COUNT(*) FROM information_schema.INNODB_TRX WHERE trx_mysql_thread_id = %s",
                          (connection_id,)))


def test_a_completion_that_fails_half_way_in_the_claims_query_leaves_no_transaction_open(qdb: QueueDB) -> None:
    """A lock wait timeout ends only its statement: the claim's query rolls the completion's
    transaction back before the error goes on, so the next query does not run inside it."""
    ids = claimed(qdb, 111, 3)
    other = connect(Dsn.parse(qdb.dsn))
    conn = connect(Dsn.parse(qdb.dsn), multi_statements=True)
    try:
        connection_id = lock_and_wait_briefly(other, conn, ids[2])
        with pytest.raises(MySQLdb.OperationalError) as failed:
            claims.claim_and_fetch(conn, "default", 222, 0, 60, 10, ended=111)
        assert failed.value.args[0] == 1205
        assert open_transactions(qdb, connection_id) == 0
        other.rollback()
        completed, claimed_now, jobs = claims.claim_and_fetch(conn, "default", 222, 0, 60, 10, ended=111)
        assert (completed, claimed_now, jobs) == (3, 0, [])
    finally:
        other.close()
        conn.close()
    assert qdb.scalar("SELECT COUNT(*) FROM mysqlq_jobs") == 0
    assert sorted(row[0] for row in qdb.query("SELECT id FROM mysqlq_jobs_history")) == ids


def test_the_claim_says_which_jobs_keep_their_key_and_a_completion_marks_in_place_only_when_told(
        qdb: QueueDB) -> None:
    """fetch_batch flags a job whose dedupe key is kept forever (it stays live when done). A completion
    told none is among its jobs leaves such a job running, so the count it returns is short and the
    caller finds it as a job the completion did not end; told there may be one, it marks it done."""
    with qdb.producer() as producer:
        forever = producer.enqueue("test.record", dedupe_key="order-1")
        active = producer.enqueue("test.record", dedupe_key="order-2", dedupe_scope="active")
        plain = producer.enqueue("test.record")
    conn = connect(Dsn.parse(qdb.dsn), multi_statements=True)
    try:
        with conn.cursor() as cur:
            assert claims.claim_update(cur, "default", 333, 0, 60, 10) == 3
            keeps = {job.id: job.keeps_key for job in claims.fetch_batch(cur, 333)}
            assert keeps == {forever: 1, active: 0, plain: 0}
            ids = [forever, active, plain]
            assert claims.complete(cur, 333, ids, in_place=False, merged=True) == 2
            assert claims.completed_ids(cur, 333, ids) == {active, plain}
            assert claims.complete(cur, 333, ids, in_place=True, merged=True) == 1
            assert claims.completed_ids(cur, 333, ids) == set(ids)
    finally:
        conn.close()
    assert qdb.query("SELECT id, status FROM mysqlq_jobs") == [(forever, "done")]
    assert sorted(row[0] for row in qdb.query("SELECT id FROM mysqlq_jobs_history")) == [active, plain]


@pytest.mark.parametrize("which", ["listed", "the batch's rest"])
def test_a_few_jobs_completed_in_one_query_are_fenced_and_a_failure_half_way_leaves_no_transaction_open(
        qdb: QueueDB, which: str) -> None:
    """complete(merged=True) and complete_batch(merged=True) send their transaction as one query: only
    the jobs its batch still holds move, and a lock wait timeout in it is rolled back before the error
    goes on."""
    ids = claimed(qdb, 111, 3)

    def complete(cur: Cursor) -> int:
        if which == "listed":
            return claims.complete(cur, 111, ids, merged=True)
        return claims.complete_batch(cur, 111, merged=True)

    qdb.query("UPDATE mysqlq_jobs SET status = 'ready', running_batch = 0, batch_id = 0 "
              "WHERE id = %s", (ids[0],))  # the reaper gave one back
    other = connect(Dsn.parse(qdb.dsn))
    conn = connect(Dsn.parse(qdb.dsn), multi_statements=True)
    try:
        connection_id = lock_and_wait_briefly(other, conn, ids[2])
        with conn.cursor() as cur:
            with pytest.raises(MySQLdb.OperationalError) as failed:
                complete(cur)
            assert failed.value.args[0] == 1205
            assert open_transactions(qdb, connection_id) == 0
            other.rollback()
            assert complete(cur) == 2
            assert complete(cur) == 0  # again: nothing left to move
    finally:
        other.close()
        conn.close()
    assert dict(qdb.query("SELECT id, status FROM mysqlq_jobs")) == {ids[0]: "ready"}
    assert sorted(row[0] for row in qdb.query("SELECT id FROM mysqlq_jobs_history")) == ids[1:]


def test_a_worker_writing_as_it_goes_ends_every_job_where_it_belongs(qdb: QueueDB) -> None:
    """Successes written a few at a time while the batch runs (one query each), jobs whose key is
    kept forever among them and not: every job runs once and ends done in the right table."""
    with qdb.producer() as producer:
        kept = [producer.enqueue("test.record", {"sleep": 0.02}, dedupe_key=f"k-{i}") for i in range(10)]
        moved = producer.enqueue_many([Job("test.record", {"sleep": 0.02}) for _ in range(30)])
        assert moved == 30
    procs = [qdb.worker("--burst", "--batch-size", "20", "--concurrency", "2", "--flush-interval", "0.03")
             for _ in range(2)]
    for proc in procs:
        assert proc.wait(timeout=120) == 0, qdb.logs()
    runs = collections.Counter(record[0] for record in qdb.records())
    assert len(runs) == 40 and set(runs.values()) == {1}
    assert dict(qdb.query("SELECT id, status FROM mysqlq_jobs")) == dict.fromkeys(kept, "done")
    assert qdb.scalar("SELECT COUNT(*) FROM mysqlq_jobs_history WHERE status = 'done'") == 30
    assert in_both(qdb) == 0
