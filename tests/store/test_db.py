"""Connections: transient errors are retried on a fresh connection, others are not."""

from __future__ import annotations

import threading

import MySQLdb
import pytest

from mysqlq.core.config import Dsn, Isolation
from mysqlq.store.db import CLI_RETRY, Cursor, Database, RetryPolicy, connect, is_transient, transaction

from ..conftest import QueueDB, numbers


def test_a_real_deadlock_is_retried_until_the_work_succeeds(qdb: QueueDB) -> None:
    qdb.query("CREATE TABLE t (id INT PRIMARY KEY, v INT) ENGINE=InnoDB")
    qdb.query("INSERT INTO t VALUES (1, 0), (2, 0)")
    qdb.query("CREATE TABLE ballast (id INT PRIMARY KEY) ENGINE=InnoDB")
    other = qdb.connect()
    other.begin()
    with other.cursor() as cur:
        # InnoDB rolls back the lighter transaction: make ours the victim, so the retry is exercised.
        cur.execute(f"INSERT INTO ballast SELECT seq FROM {numbers(1000)}")
        cur.execute("UPDATE t SET v = v + 1 WHERE id = 2")
    locked_row_1 = threading.Event()
    attempts = []

    def unit(cur: Cursor) -> int:
        attempts.append(1)
        conn = cur.connection
        conn.begin()
        try:
            cur.execute("UPDATE t SET v = v + 10 WHERE id = 1")
            locked_row_1.set()
            cur.execute("UPDATE t SET v = v + 10 WHERE id = 2")  # waits for `other`, which wants row 1
            conn.commit()
        except BaseException:
            conn.rollback()
            raise
        return len(attempts)

    def close_the_cycle() -> None:
        locked_row_1.wait(10)
        with other.cursor() as cur:
            try:
                cur.execute("UPDATE t SET v = v + 1 WHERE id = 1")
                other.commit()
            except MySQLdb.OperationalError:
                other.rollback()

    closer = threading.Thread(target=close_the_cycle)
    closer.start()
    db = Database(Dsn.parse(qdb.dsn), retry=RetryPolicy(attempts=5, first_delay=0.01))
    result = db.run(unit)
    closer.join(10)
    other.close()
    db.close()
    assert result == 2  # the first attempt was the deadlock victim, the second committed
    assert qdb.scalar("SELECT v FROM t WHERE id = 1") == 11
    assert qdb.scalar("SELECT v FROM t WHERE id = 2") == 11


def test_a_lost_connection_is_reopened_and_the_work_retried(qdb: QueueDB) -> None:
    db = Database(Dsn.parse(qdb.dsn), retry=RetryPolicy(attempts=3, first_delay=0.01))
    first = db.run(lambda cur: (cur.execute("SELECT CONNECTION_ID()"), cur.fetchone()[0])[1])
    qdb.query("KILL %s", (first,))
    second = db.run(lambda cur: (cur.execute("SELECT CONNECTION_ID()"), cur.fetchone()[0])[1])
    assert second != first
    db.close()


def test_errors_that_a_retry_cannot_cure_are_raised_at_once(qdb: QueueDB) -> None:
    db = Database(Dsn.parse(qdb.dsn), retry=CLI_RETRY)
    calls = []

    def unit(cur: Cursor) -> None:
        calls.append(1)
        cur.execute("SELECT * FROM no_such_table")

    with pytest.raises(MySQLdb.ProgrammingError):
        db.run(unit)
    assert len(calls) == 1
    db.close()


def test_which_errors_are_transient() -> None:
    assert is_transient(MySQLdb.OperationalError(1213, "Deadlock found"))
    assert is_transient(MySQLdb.OperationalError(1205, "Lock wait timeout exceeded"))
    assert is_transient(MySQLdb.OperationalError(2006, "MySQL server has gone away"))
    assert is_transient(MySQLdb.OperationalError(2013, "Lost connection"))
    assert not is_transient(MySQLdb.OperationalError(1054, "Unknown column"))
    assert not is_transient(MySQLdb.ProgrammingError(1146, "Table doesn't exist"))


def test_a_single_enqueue_reopens_a_lost_connection_and_answers_the_dedupe_holder(qdb: QueueDB) -> None:
    """Producer.enqueue sends its INSERT without a cursor (Database.run_on): a killed connection is
    reopened and the INSERT retried, and a taken dedupe key still answers the holder's id."""
    with qdb.producer() as producer:
        first = producer.enqueue("test.record", {"n": 1}, dedupe_key="k")
        db = producer.grouped._idle[-1]  # a lone enqueue's connection: the group commit's first writer
        connection_id = db.run(lambda cur: (cur.execute("SELECT CONNECTION_ID()"), cur.fetchone()[0])[1])
        qdb.query("KILL %s", (connection_id,))
        second = producer.enqueue("test.record", {"n": 2})
        assert producer.enqueue("test.record", {"n": 3}, dedupe_key="k") == first
    assert second > first
    assert qdb.scalar("SELECT COUNT(*) FROM mysqlq_jobs") == 2


def test_connections_take_one_statement_per_query_unless_asked(qdb: QueueDB) -> None:
    """The driver would take several statements per query on every connection; mysqlq's take one
    (a ``;`` smuggled into SQL runs nothing more), except the worker's own, which asks."""

    def stacked(cur: Cursor) -> list[tuple[int, ...]]:
        cur.execute("SELECT 1; SELECT 2")
        rows = list(cur.fetchall())
        while cur.nextset():
            rows += cur.fetchall()
        return rows

    plain, worker = Database(Dsn.parse(qdb.dsn)), Database(Dsn.parse(qdb.dsn), multi_statements=True)
    try:
        with pytest.raises(MySQLdb.ProgrammingError):
            plain.run(stacked)
        assert worker.run(stacked) == [(1,), (2,)]
    finally:
        plain.close()
        worker.close()


def test_connections_are_in_utc_and_take_the_isolation_level_asked(qdb: QueueDB) -> None:
    """Each connection sets its session's time zone (the driver's init_command) and, for a worker's
    --isolation, its transaction isolation level."""

    def session(cur: Cursor) -> tuple[str, set[str]]:
        cur.execute("SELECT @@session.time_zone")
        (zone,) = cur.fetchone()
        cur.execute("SHOW SESSION VARIABLES WHERE Variable_name IN ('tx_isolation', 'transaction_isolation')")
        return zone, {value for _, value in cur.fetchall()}

    for isolation in Isolation:
        db = Database(Dsn.parse(qdb.dsn), isolation=isolation)
        try:
            assert db.run(session) == ("+00:00", {isolation.replace(" ", "-")})
        finally:
            db.close()


def test_a_transaction_inside_another_on_one_connection_is_refused_and_nothing_of_it_commits(qdb: QueueDB) -> None:
    """The server takes a second BEGIN as a COMMIT of the first: transaction() refuses to open one
    inside another, the outer one rolls back with the error, and the connection opens the next."""
    qdb.query("CREATE TABLE test_guard (n INT NOT NULL)")
    conn = connect(Dsn.parse(qdb.dsn))
    try:
        with pytest.raises(RuntimeError, match="inside another"), transaction(conn):
            conn.cursor().execute("INSERT INTO test_guard VALUES (1)")
            with transaction(conn):
                conn.cursor().execute("INSERT INTO test_guard VALUES (2)")
        assert qdb.query("SELECT n FROM test_guard") == []
        with transaction(conn):
            conn.cursor().execute("INSERT INTO test_guard VALUES (3)")
        assert qdb.query("SELECT n FROM test_guard") == [(3,)]
    finally:
        conn.close()
