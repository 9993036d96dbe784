"""A flat path with the history in its own table: with the done jobs moved into mysqlq_jobs_history
(as the worker's completion moves them), `mysqlq stats`, `jobs list`, the dashboard, the throughput
figure and retention read about as many rows as they return, the same with four times the history,
and each walks an index of each table (see test_ops_hot_path, the same with the history in the live
table)."""

from __future__ import annotations

import contextlib
import datetime as dt
from collections.abc import Iterator
from typing import Any

import pytest
from mysqlq_harness.jobs import COLUMNS

from mysqlq.core.config import Dsn
from mysqlq.store import ops, stats, web
from mysqlq.store.db import Connection, Cursor, connect

from ..conftest import MariaDBServer, fresh_database, with_database
from .test_ops_hot_path import DEAD, LIMIT, OPERATIONS, READY, RECENT, SCHEDULED, fill, joined, reads_of

DOUBLINGS = 17  # 2**17 = 131,072 done jobs in the history
SMALL_DOUBLINGS = 15  # a quarter of that


@contextlib.contextmanager
def moved_history(mariadb: MariaDBServer, doublings: int) -> Iterator[Connection]:
    """A database whose mysqlq_jobs_history holds 2**doublings old done jobs and RECENT young ones,
    beside a little live work in mysqlq_jobs."""
    with fresh_database(mariadb.dsn) as name:
        conn = connect(Dsn.parse(with_database(mariadb.dsn, name)))
        try:
            fill(conn, doublings)
            with conn.cursor() as cur:
                cur.execute(f"INSERT INTO mysqlq_jobs_history SELECT {COLUMNS} FROM mysqlq_jobs WHERE status = 'done'")
                cur.execute("DELETE FROM mysqlq_jobs WHERE status = 'done'")
                # Rebuilt without the deleted rows (which the server would purge in its own time
                # meanwhile), and analyzed.
                cur.execute("OPTIMIZE TABLE mysqlq_jobs, mysqlq_jobs_history")
                cur.fetchall()
                cur.execute("SELECT COUNT(*) FROM mysqlq_jobs_history")
                assert cur.fetchone()[0] == 2**doublings + RECENT
            yield conn
        finally:
            conn.close()


@pytest.fixture(scope="module")
def big(mariadb: MariaDBServer) -> Iterator[Connection]:
    with moved_history(mariadb, DOUBLINGS) as conn:
        yield conn


@pytest.fixture(scope="module")
def small(mariadb: MariaDBServer) -> Iterator[Connection]:
    with moved_history(mariadb, SMALL_DOUBLINGS) as conn:
        yield conn


LIVE = 2 * READY + DEAD + SCHEDULED


def test_operations_read_as_many_rows_with_four_times_the_moved_history(small: Connection, big: Connection) -> None:
    for name, work in OPERATIONS.items():
        few, many = reads_of(small, work), reads_of(big, work)
        assert abs(many - few) <= 2 * LIMIT, (name, few, many)
        assert many <= 2 * stats.HISTORY_CAP + 10 * (LIVE + RECENT), name


def test_jobs_list_reads_about_as_many_rows_as_it_shows(big: Connection) -> None:
    for filters in [{"queue": None, "status": None}, {"queue": "hot", "status": "done"},
                    {"queue": "hot", "status": "ready"}, {"queue": None, "status": "done"},
                    {"queue": None, "status": "dead"}, {"queue": "hot", "status": None},
                    {"queue": "nosuch", "status": None}]:
        found: list[list[dict[str, Any]]] = []

        def listing(cur: Cursor, filters: dict[str, Any] = filters, found: list[Any] = found) -> None:
            found.append(ops.list_jobs(cur, **filters, handler=None, limit=LIMIT))
        # A page of each table (one queue without a status: of each status's range), and the union's
        # copy of them.
        pages = 7 if filters["status"] is None and filters["queue"] is not None else 2
        assert reads_of(big, listing) <= pages * 3 * LIMIT + 40, filters
        if filters["queue"] != "nosuch" and filters["status"] in (None, "done"):
            assert len(found[0]) == LIMIT, filters


def test_the_dashboard_pages_read_a_page_of_each_table(big: Connection) -> None:
    for status in (None, "done"):
        found: list[ops.HistoryPage] = []

        def page(cur: Cursor, status: str | None = status, found: list[ops.HistoryPage] = found) -> None:
            found.append(web.jobs_page(cur, queue=None, status=status, handler=None, before=None, limit=LIMIT))
        assert reads_of(big, page) <= 3 * (LIMIT + 1) + LIVE + 40, status
        assert len(found[0].rows) == LIMIT


def test_stats_count_the_moved_history_up_to_the_cap(big: Connection) -> None:
    with big.cursor() as cur:
        found = {row["queue"]: row for row in stats.queue_stats(cur)}
    assert found["hot"]["counts"]["done"] == stats.HISTORY_CAP and found["hot"]["capped"] == ["done"]
    assert found["hot"]["counts"]["ready"] == READY
    assert found["hot"]["throughput"]["done"] == RECENT


def test_retention_of_the_history_reads_one_batch_and_deletes_it(big: Connection,
                                                                 monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(ops, "transaction", joined)  # retention's transaction joins the measure's
    with big.cursor() as cur:
        cutoff = ops.cutoff(cur, 7 * 86400)
    walk = ops.Walk("done", cutoff, table="history")  # the live table has no done jobs left here
    walk.current = "hot"
    deleted: list[int] = []

    def step(cur: Cursor) -> None:
        deleted.append(ops.delete_expired(cur, walk, 1000))
    assert reads_of(big, step) <= 3 * 1000 + 20
    assert deleted == [1000]
    # Purge's count of the expired jobs, and the walk of a whole status from the start (the live
    # table's empty range, then the history's batch).
    assert reads_of(big, lambda cur: ops.delete_expired(cur, ops.Walk("done", cutoff), 1000)) <= 3 * 1000 + 40
    assert reads_of(big, lambda cur: ops.count_expired(cur, "dead", dt.datetime(2000, 1, 1))) <= 20
