"""A flat hot path: with a quarter of a million done jobs in the table, the claim, the poll, retention,
the throughput figure and `jobs list` read about as many rows as they return, never the history.

Each statement is checked twice: its plan (EXPLAIN: the index it walks, no filesort) and the rows
the server really read while running it (the session's Handler_read_* counters, which work the
same on MariaDB and MySQL). Writes run in a transaction that is rolled back, so the table stays
as built for every test of the module.
"""

from __future__ import annotations

import json
import secrets
from collections.abc import Iterator
from typing import Any

import pytest

from mysqlq.config import Dsn
from mysqlq.db import Connection, connect
from mysqlq.sql import query
from mysqlq.store import expand
from mysqlq.store.schema import migrate

from .conftest import MariaDBServer, with_database

HISTORY_DOUBLINGS = 18  # 2**18 = 262,144 done jobs
READY = 300  # ready jobs in queue "hot", and as many in queue "other"
RECENT = 40  # done jobs that ended in the last minute
LIMIT = 50


@pytest.fixture(scope="module")
def big(mariadb: MariaDBServer) -> Iterator[Connection]:
    """A database whose mysqlq_jobs holds a long history of done jobs and a little live work."""
    name = "mysqlq_t_" + secrets.token_hex(4)
    admin = connect(Dsn.parse(mariadb.dsn))
    with admin.cursor() as cur:
        cur.execute(f"CREATE DATABASE {name}")
    conn = connect(Dsn.parse(with_database(mariadb.dsn, name)))
    try:
        with conn.cursor() as cur:
            migrate(cur, name)
            columns = "queue, handler, payload, status, run_at, max_attempts, attempts, enqueued_at, finished_at"
            cur.execute(f"INSERT INTO mysqlq_jobs ({columns}) VALUES ('hot', 'test.record', '{{}}', 'done', "
                        "NOW(6) - INTERVAL 10 DAY, 5, 1, NOW(6) - INTERVAL 10 DAY, NOW(6) - INTERVAL 10 DAY)")
            for _ in range(HISTORY_DOUBLINGS):  # each pass doubles the history, older and older
                cur.execute(f"INSERT INTO mysqlq_jobs ({columns}) SELECT queue, handler, payload, status, "
                            "run_at - INTERVAL id SECOND, max_attempts, attempts, enqueued_at - INTERVAL id SECOND, "
                            "finished_at - INTERVAL id SECOND FROM mysqlq_jobs")
            for queue in ("hot", "other"):
                for _ in range(READY):
                    cur.execute(f"INSERT INTO mysqlq_jobs ({columns}) VALUES (%s, 'test.record', '{{}}', 'ready', "
                                "NOW(6), 5, 0, NOW(6), NULL)", (queue,))
            for _ in range(RECENT):
                cur.execute(f"INSERT INTO mysqlq_jobs ({columns}) VALUES ('hot', 'test.record', '{{}}', 'done', "
                            "NOW(6) - INTERVAL 30 SECOND, 5, 1, NOW(6) - INTERVAL 30 SECOND, NOW(6))")
            cur.execute("ANALYZE TABLE mysqlq_jobs")
            cur.fetchall()
            cur.execute("SELECT COUNT(*) FROM mysqlq_jobs WHERE status = 'done'")
            assert cur.fetchone()[0] == 2**HISTORY_DOUBLINGS + RECENT
        yield conn
    finally:
        conn.close()
        with admin.cursor() as cur:
            cur.execute(f"DROP DATABASE IF EXISTS {name}")
        admin.close()


def handler_reads(conn: Connection) -> int:
    with conn.cursor() as cur:
        cur.execute("SHOW SESSION STATUS LIKE 'Handler_read%'")
        return sum(int(value) for _, value in cur.fetchall())


def rows_read(conn: Connection, sql: str, params: Any = None) -> int:
    """How many rows the server read (index and table) running ``sql``; writes are rolled back."""
    baseline = handler_reads(conn) - handler_reads(conn)  # what looking at the counters itself costs
    before = handler_reads(conn)
    conn.begin()
    try:
        with conn.cursor() as cur:
            cur.execute(sql, params)
            cur.fetchall()
    finally:
        conn.rollback()
    return handler_reads(conn) - before + baseline


def plan(conn: Connection, sql: str, params: Any = None, sorts: bool = False) -> list[dict[str, Any]]:
    """Every table access of ``sql``'s EXPLAIN FORMAT=JSON plan (which must not sort, unless ``sorts``)."""
    with conn.cursor() as cur:
        cur.execute("EXPLAIN FORMAT=JSON " + sql, params)
        text = cur.fetchone()[0]
    assert sorts or "filesort" not in text, text
    return list(tables(json.loads(text)))


def tables(node: Any) -> Iterator[dict[str, Any]]:
    if isinstance(node, dict):
        if isinstance(node.get("table"), dict) and "access_type" in node["table"]:
            yield node["table"]
        for value in node.values():
            yield from tables(value)
    elif isinstance(node, list):
        for value in node:
            yield from tables(value)


CLAIM = {"queue": "hot", "batch_id": 1, "worker_id": 1, "worker": "w", "lease_us": 60_000_000, "limit": LIMIT}


def test_the_claim_walks_the_claim_index_and_reads_only_the_rows_it_claims(big: Connection) -> None:
    (access,) = plan(big, query("claim_batch"), CLAIM)
    assert access["key"] == "mysqlq_jobs_claim"
    assert access["rows"] < 10 * READY  # the optimizer knows: a few ready rows, not the history
    # Each claimed row is read twice: on the index, then by position to update it.
    assert rows_read(big, query("claim_batch"), CLAIM) <= 2 * LIMIT + 2


def test_the_skip_locked_claim_reads_only_the_rows_it_locks(big: Connection) -> None:
    params = {"queue": "hot", "limit": LIMIT}
    (access,) = plan(big, query("lock_ready_skip_locked"), params)
    assert access["key"] == "mysqlq_jobs_claim"
    assert rows_read(big, query("lock_ready_skip_locked"), params) <= LIMIT + 2


def test_the_idle_poll_reads_a_handful_of_rows(big: Connection) -> None:
    queues = ["hot", "other", "idle"]
    sql, params = expand("poll", len(queues)), [*queues, *queues, "mysqlq:leader:test"]
    # has_ready walks the claim index; MIN(run_at) of scheduled jobs is read off the end of
    # (status, run_at) at planning time ("Select tables optimized away": no table access at all).
    jobs = [access for access in plan(big, sql, params) if access["table_name"] == "mysqlq_jobs"]
    assert [access.get("key") for access in jobs] == ["mysqlq_jobs_claim"]
    assert rows_read(big, sql, params) <= 10


def test_retention_reads_one_batch_on_the_status_index_and_deletes_it_by_primary_key(big: Connection) -> None:
    with big.cursor() as cur:
        cur.execute(query("cutoff"), {"age_us": 7 * 86400 * 10**6})
        cutoff = cur.fetchone()[0]
    params = {"status": "done", "cutoff": cutoff, "queue": None, "limit": 1000,
              "after_run_at": "1000-01-01", "after_id": 0}
    (access,) = plan(big, query("expired_jobs"), params)
    assert access["key"] == "mysqlq_jobs_status_run_at"
    assert rows_read(big, query("expired_jobs"), params) <= 1000 + 2
    with big.cursor() as cur:
        cur.execute(query("expired_jobs"), params)
        ids = [row[0] for row in cur.fetchall()]
    assert len(ids) == 1000
    sql, delete_params = expand("delete_jobs", len(ids)), [*ids, "done", cutoff]
    (access,) = plan(big, sql, delete_params)
    assert (access["key"], access["access_type"]) == ("PRIMARY", "range")
    assert rows_read(big, sql, delete_params) <= 2 * len(ids)


def test_the_throughput_figure_reads_only_the_jobs_of_its_window(big: Connection) -> None:
    params = {"window_us": 300 * 10**6}
    (access,) = plan(big, query("throughput"), params, sorts=True)  # GROUP BY sorts the window's rows
    assert access["key"] == "mysqlq_jobs_finished"
    # Each job of the window is read on the index, then once more from the temporary table that groups them.
    assert rows_read(big, query("throughput"), params) <= 3 * RECENT


def test_jobs_list_reads_about_as_many_rows_as_it_shows(big: Connection) -> None:
    for filters in [{"queue": None, "status": None}, {"queue": "hot", "status": "done"},
                    {"queue": "hot", "status": "ready"}, {"queue": None, "status": "ready"}]:
        params = {**filters, "handler": None, "limit": LIMIT}
        assert rows_read(big, query("list_jobs"), params) <= 2 * READY + LIMIT + 2, filters


def test_the_measure_does_see_a_read_of_the_history(big: Connection) -> None:
    # The yardstick itself: a filter on a column without an index reads every row of the table.
    assert rows_read(big, "SELECT COUNT(*) FROM mysqlq_jobs WHERE handler = 'test.record'") >= 2**HISTORY_DOUBLINGS
