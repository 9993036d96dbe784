"""A flat hot path: with a quarter of a million done jobs in the table, the claim, its read-back,
outcomes and lease, the reaper, the poll, retention, the throughput figure, `mysqlq stats`, `jobs
list` and the dashboard's counts read about as many rows as they return, never the history; and
they read the same rows with a quarter of that history.

Each statement is checked twice: its plan (EXPLAIN: the index it walks, no filesort) and the rows
the server really read while running it (the session's Handler_read_* counters, which work the
same on MariaDB and MySQL). Writes run in a transaction that is rolled back, so the table stays
as built for every test of the module.
"""

from __future__ import annotations

import contextlib
import datetime as dt
import json
from collections.abc import Callable, Iterator
from typing import Any

import pytest

from mysqlq.cli.stats import _stats_text
from mysqlq.core.config import Dsn
from mysqlq.store import claims, expand, ops, stats, web, workers
from mysqlq.store.db import Connection, Cursor, connect
from mysqlq.store.sql import query

from ..conftest import MariaDBServer, fresh_database, with_database
from ..plans import explain_json, reads_per_updated_row, sorts_rows, tables

HISTORY_DOUBLINGS = 18  # 2**18 = 262,144 done jobs
SMALL_DOUBLINGS = 16  # a quarter of that: the same operations must read the same rows
READY = 300  # ready jobs in queue "hot", and as many in queue "other"
RECENT = 40  # done jobs that ended in the last minute
DEAD = 30  # dead jobs of queue "other", ended a day ago
SCHEDULED = 20  # jobs of queue "other" due in an hour
LIMIT = 50
COLUMNS = "queue, handler, payload, status, run_at, max_attempts, attempts, enqueued_at, finished_at"


@contextlib.contextmanager
def history(mariadb: MariaDBServer, doublings: int) -> Iterator[Connection]:
    """A database whose mysqlq_jobs holds 2**doublings old done jobs and a little live work."""
    with fresh_database(mariadb.dsn) as name:
        conn = connect(Dsn.parse(with_database(mariadb.dsn, name)))
        try:
            fill(conn, doublings)
            yield conn
        finally:
            conn.close()


def fill(conn: Connection, doublings: int) -> None:
    """Put 2**doublings old done jobs and a little live work in mysqlq_jobs."""
    with conn.cursor() as cur:
        cur.execute(f"INSERT INTO mysqlq_jobs ({COLUMNS}) VALUES ('hot', 'test.record', '{{}}', 'done', "
                    "NOW(6) - INTERVAL 10 DAY, 5, 1, NOW(6) - INTERVAL 10 DAY, NOW(6) - INTERVAL 10 DAY)")
        for _ in range(doublings):  # each pass doubles the history, older and older
            cur.execute(f"INSERT INTO mysqlq_jobs ({COLUMNS}) SELECT queue, handler, payload, status, "
                        "run_at - INTERVAL id SECOND, max_attempts, attempts, enqueued_at - INTERVAL id SECOND, "
                        "finished_at - INTERVAL id SECOND FROM mysqlq_jobs")
        for queue in ("hot", "other"):
            for _ in range(READY):
                cur.execute(f"INSERT INTO mysqlq_jobs ({COLUMNS}) VALUES (%s, 'test.record', '{{}}', 'ready', "
                            "NOW(6), 5, 0, NOW(6), NULL)", (queue,))
        for _ in range(DEAD):
            cur.execute(f"INSERT INTO mysqlq_jobs ({COLUMNS}) VALUES ('other', 'test.record', '{{}}', 'dead', "
                        "NOW(6) - INTERVAL 1 DAY, 5, 5, NOW(6) - INTERVAL 1 DAY, NOW(6) - INTERVAL 1 DAY)")
        for _ in range(SCHEDULED):
            cur.execute(f"INSERT INTO mysqlq_jobs ({COLUMNS}) VALUES ('other', 'test.record', '{{}}', "
                        "'scheduled', NOW(6) + INTERVAL 1 HOUR, 5, 0, NOW(6), NULL)")
        for _ in range(RECENT):
            cur.execute(f"INSERT INTO mysqlq_jobs ({COLUMNS}) VALUES ('hot', 'test.record', '{{}}', 'done', "
                        "NOW(6) - INTERVAL 30 SECOND, 5, 1, NOW(6) - INTERVAL 30 SECOND, NOW(6))")
        cur.execute("ANALYZE TABLE mysqlq_jobs")
        cur.fetchall()
        cur.execute("SELECT COUNT(*) FROM mysqlq_jobs WHERE status = 'done'")
        assert cur.fetchone()[0] == 2**doublings + RECENT


@pytest.fixture(scope="module")
def big(mariadb: MariaDBServer) -> Iterator[Connection]:
    with history(mariadb, HISTORY_DOUBLINGS) as conn:
        yield conn


@pytest.fixture(scope="module")
def small(mariadb: MariaDBServer) -> Iterator[Connection]:
    with history(mariadb, SMALL_DOUBLINGS) as conn:
        yield conn


def handler_reads(conn: Connection) -> int:
    with conn.cursor() as cur:
        cur.execute("SHOW SESSION STATUS LIKE 'Handler_read%'")
        return sum(int(value) for _, value in cur.fetchall())


def reads_of(conn: Connection, work: Callable[[Cursor], Any]) -> int:
    """How many rows the server read (index and table) while ``work`` ran its statements; writes
    are rolled back."""
    baseline = handler_reads(conn) - handler_reads(conn)  # what looking at the counters itself costs
    before = handler_reads(conn)
    conn.begin()
    try:
        with conn.cursor() as cur:
            work(cur)
            if cur.description is not None:
                cur.fetchall()
    finally:
        conn.rollback()
    return handler_reads(conn) - before + baseline


@contextlib.contextmanager
def joined(conn: Connection) -> Iterator[Connection]:
    """In place of mysqlq.store.db.transaction for work measured by :func:`reads_of`: its
    transaction joins the measure's, which is rolled back (a BEGIN of its own would commit it)."""
    yield conn


def rows_read(conn: Connection, sql: str, params: Any = None) -> int:
    """How many rows the server read (index and table) running ``sql``; writes are rolled back."""
    return reads_of(conn, lambda cur: cur.execute(sql, params))


def plan(conn: Connection, sql: str, params: Any = None, sorts: bool = False) -> list[dict[str, Any]]:
    """Every table access of ``sql``'s EXPLAIN FORMAT=JSON plan (which must not sort, unless ``sorts``)."""
    with conn.cursor() as cur:
        text = explain_json(cur, sql, params)
    assert sorts or not sorts_rows(text), text
    return list(tables(json.loads(text)))


CLAIM = {"queue": "hot", "batch_id": 1, "worker_id": 1, "worker": "w", "lease_us": 60_000_000, "limit": LIMIT}


def claimed(conn: Connection, work: Callable[[Cursor], Any]) -> int:
    """Rows read by ``work`` run right after a claim of LIMIT jobs under batch 1 (all rolled back)."""
    def both(cur: Cursor) -> None:
        cur.execute(query("claim_batch"), CLAIM)
        work(cur)
    return reads_of(conn, both) - rows_read(conn, query("claim_batch"), CLAIM)


def test_the_claim_walks_the_ready_index_and_reads_only_the_rows_it_claims(big: Connection) -> None:
    (access,) = plan(big, query("claim_batch"), CLAIM)
    assert access["key"] == "mysqlq_jobs_live"
    assert access["rows"] < 10 * READY  # the optimizer knows: a few ready rows, not the history
    # Each claimed row is read twice: on the index, then by position to update it (three times in
    # MySQL's counters).
    assert rows_read(big, query("claim_batch"), CLAIM) <= reads_per_updated_row(big) * LIMIT + 2


def test_the_skip_locked_claim_reads_only_the_rows_it_locks(big: Connection) -> None:
    params = {"queue": "hot", "limit": LIMIT}
    (access,) = plan(big, query("lock_ready_skip_locked"), params)
    assert access["key"] == "mysqlq_jobs_live"
    assert rows_read(big, query("lock_ready_skip_locked"), params) <= LIMIT + 2


def test_read_back_outcomes_and_lease_extension_read_only_the_batch(big: Connection) -> None:
    batch = {"batch_id": 1}
    for name in ("fetch_batch", "complete_batch", "extend_lease"):
        # The read-back sorts its batch by (priority, id): at most a batch of rows.
        (access,) = plan(big, query(name), {**batch, "lease_us": 1}, sorts=name == "fetch_batch")
        assert access["key"] == "mysqlq_jobs_live", name
    per_row = reads_per_updated_row(big)
    assert claimed(big, lambda cur: claims.fetch_batch(cur, 1)) <= per_row * LIMIT + 2
    assert claimed(big, lambda cur: workers.extend_lease(cur, 1, 60)) <= per_row * LIMIT + 2
    # The batch's completion, in its transaction (here the measurement's): copied into the history,
    # deleted, the rest marked done in place (none left here). Each reads the batch by its entries.
    for name in claims.MOVE_BATCH[:2]:
        accesses = [a for a in plan(big, query(name), batch) if a["table_name"] in ("mysqlq_jobs", "j")]
        assert [a["key"] for a in accesses] == ["mysqlq_jobs_live"], name

    def complete(cur: Cursor) -> None:
        for name in claims.MOVE_BATCH:
            cur.execute(query(name), batch)
    assert claimed(big, complete) <= 2 * per_row * LIMIT + 4


def test_the_reaper_reads_only_the_running_rows(big: Connection) -> None:
    def reap(cur: Cursor) -> None:
        cur.execute("UPDATE mysqlq_jobs SET lease_until = NOW(6) - INTERVAL 1 SECOND WHERE running_batch = 1")
        assert workers.reap(cur, [], True) == LIMIT
    # The claimed rows: once to find them (and the update's own reads), never the history.
    assert claimed(big, reap) <= 6 * LIMIT + 10


def test_where_jobs_without_a_key_stand_is_read_off_the_index_ends(big: Connection) -> None:
    """What a worker reads before each claim in a queue with keyed jobs (fairness.give_keyless_turns):
    index dives only, whatever the number of ready jobs ("hot" has 300, some given turns here)."""
    params = {"queue": "hot"}
    with big.cursor() as cur:
        cur.execute("UPDATE mysqlq_jobs SET turn = id * 1000 WHERE queue = 'hot' AND status = 'ready' "
                    "ORDER BY id LIMIT 100")
    try:
        assert not [access for access in plan(big, query("keyless_position"), params)
                    if access["table_name"] == "mysqlq_jobs"]  # "Select tables optimized away", every one
        assert rows_read(big, query("keyless_position"), params) <= 12
    finally:
        with big.cursor() as cur:
            cur.execute("UPDATE mysqlq_jobs SET turn = DEFAULT WHERE queue = 'hot' AND status = 'ready'")


def test_the_idle_poll_reads_a_handful_of_rows(big: Connection) -> None:
    queues = ["hot", "other", "idle"]
    sql, params = expand("poll", len(queues)), [*queues, *queues, "mysqlq:leader:test", *queues]
    # has_ready walks the ready index; MIN(scheduled_at) is read off the start of its index at
    # planning time ("Select tables optimized away": no table access at all).
    jobs = [access for access in plan(big, sql, params) if access["table_name"] == "mysqlq_jobs"]
    assert [access.get("key") for access in jobs] == ["mysqlq_jobs_live"]
    # Beside those, one look per queue by primary key for the paused queues and one for the history
    # settings (and the installation's): however many jobs there are, a handful.
    assert rows_read(big, sql, params) <= 14


def test_retention_reads_one_batch_of_a_state_range_and_deletes_it_by_primary_key(
        big: Connection, monkeypatch: pytest.MonkeyPatch) -> None:
    with big.cursor() as cur:
        cur.execute(query("cutoff"), {"age_us": 7 * 86400 * 10**6})
        cutoff = cur.fetchone()[0]
    params = {"status": "done", "cutoff": cutoff, "queue": "hot", "limit": 1000,
              "after_finished_at": "1000-01-01", "after_priority": ops.LOWEST_PRIORITY, "after_turn": 0,
              "after_id": 0}
    (access,) = plan(big, query("expired_jobs"), params)
    assert access["key"] == "mysqlq_jobs_live"
    # The batch, and one look where each branch of the walk's position (finished_at, priority, turn,
    # id) starts its range: a constant, however many jobs wait.
    assert rows_read(big, query("expired_jobs"), params) <= 1000 + 3
    with big.cursor() as cur:
        cur.execute(query("expired_jobs"), params)
        ids = [row[0] for row in cur.fetchall()]
    assert len(ids) == 1000
    sql, delete_params = expand("delete_jobs", len(ids)), [*ids, "done", cutoff]
    (access,) = plan(big, sql, delete_params)
    assert (access["key"], access["access_type"]) == ("PRIMARY", "range")
    assert rows_read(big, sql, delete_params) <= 2 * len(ids)
    # A whole step of the purge (finding the queues, the read, the delete) reads about as much.
    walk = ops.Walk("done", cutoff)
    monkeypatch.setattr(ops, "transaction", joined)
    assert reads_of(big, lambda cur: ops.delete_expired(cur, walk, 1000)) <= 3 * 1000 + 20


def test_the_throughput_figure_reads_only_the_jobs_of_its_window(big: Connection) -> None:
    sql, params = expand("throughput", 2), ["hot", "other", 300 * 10**6] * 2
    accesses = plan(big, sql, params, sorts=True)  # GROUP BY sorts the window's rows
    keys = {a["key"] for a in accesses if a["table_name"] in ("mysqlq_jobs", "mysqlq_jobs_history")}
    assert keys == {"mysqlq_jobs_live", "mysqlq_jobs_history_ended"}
    # Each job of the window is read on the index, then once more from the temporary table that groups them
    # (and a few more ends of ranges: each status and queue in each table).
    assert rows_read(big, sql, params) <= 3 * RECENT + 20


def test_jobs_list_reads_about_as_many_rows_as_it_shows(big: Connection) -> None:
    for filters in [{"queue": None, "status": None}, {"queue": "hot", "status": "done"},
                    {"queue": "hot", "status": "ready"}, {"queue": None, "status": "ready"},
                    {"queue": None, "status": "dead"}, {"queue": None, "status": "done"},
                    {"queue": None, "status": "running"}, {"queue": "other", "status": "scheduled"},
                    {"queue": "other", "status": None}, {"queue": "nosuch", "status": None},
                    {"queue": "hot", "status": None}]:
        def listing(cur: Cursor, filters: dict[str, Any] = filters) -> None:
            ops.list_jobs(cur, **filters, handler=None, limit=LIMIT)
        # One queue without a status merges a page of each status's range: up to 7 pages.
        pages = 7 if filters["status"] is None and filters["queue"] is not None else 2
        assert reads_of(big, listing) <= pages * 2 * LIMIT + 20, filters


def test_a_handler_filter_reads_a_window_of_history_however_rare_the_handler(big: Connection) -> None:
    rows = 2**HISTORY_DOUBLINGS + 2 * READY + DEAD + SCHEDULED + RECENT
    for status in (None, "done"):
        for queue in (None, "hot"):
            found: list[list[dict[str, Any]]] = []

            def listing(cur: Cursor, status: str | None = status, queue: str | None = queue,
                        found: list[list[dict[str, Any]]] = found) -> None:
                found.append(ops.list_jobs(cur, queue=queue, status=status, handler="test.rare", limit=LIMIT))
            reads = reads_of(big, listing)
            assert found == [[]]
            assert reads <= ops.HISTORY_WINDOW + 20 and reads < rows / 2, (status, queue, reads)
    # A common handler fills its page at once: the live jobs above the newest done ones, then a page.
    common = reads_of(big, lambda cur: ops.list_jobs(cur, queue=None, status="done", handler="test.record",
                                                     limit=LIMIT))
    assert common <= 2 * READY + DEAD + SCHEDULED + RECENT + 2 * LIMIT + 20


OPERATIONS: dict[str, Callable[[Cursor], Any]] = {
    "mysqlq stats": stats.queue_stats,
    "jobs list": lambda cur: ops.list_jobs(cur, queue=None, status=None, handler=None, limit=LIMIT),
    "jobs list --status done": lambda cur: ops.list_jobs(cur, queue=None, status="done", handler=None, limit=LIMIT),
    "jobs list --status dead": lambda cur: ops.list_jobs(cur, queue=None, status="dead", handler=None, limit=LIMIT),
    "jobs list --queue nosuch": lambda cur: ops.list_jobs(cur, queue="nosuch", status=None, handler=None, limit=LIMIT),
    "jobs list --handler H": lambda cur: ops.list_jobs(cur, queue=None, status=None, handler="test.record",
                                                       limit=LIMIT),
    "dashboard queues": lambda cur: web.live_counts(cur, web.queue_names(cur)),
    "dashboard chart": lambda cur: web.finished_per_minute(cur, 60),
    "finished counter": lambda cur: web.finished_between(cur, ops.cutoff(cur, 60), ops.cutoff(cur, -1)),
    "purge --dry-run": lambda cur: ops.count_expired(cur, "dead", dt.datetime(2000, 1, 1)),
}


def test_operations_read_as_many_rows_with_four_times_the_history(small: Connection, big: Connection) -> None:
    # Done jobs are counted up to a cap (10,000, below both histories), live ones exactly: every
    # figure an operator asks for reads the same rows, however long the history grows.
    # (Other tests' rolled-back claims may leave a few index entries for purge to remove: a little slack.)
    for name, work in OPERATIONS.items():
        few, many = reads_of(small, work), reads_of(big, work)
        assert abs(many - few) <= 2 * LIMIT, (name, few, many)
        assert many <= 2 * stats.HISTORY_CAP + 10 * (2 * READY + DEAD + SCHEDULED + RECENT), name


def test_stats_count_live_jobs_exactly_and_history_up_to_the_cap(big: Connection) -> None:
    with big.cursor() as cur:
        found = {row["queue"]: row for row in stats.queue_stats(cur)}
    assert found["hot"]["counts"] == {"ready": READY, "scheduled": 0, "running": 0, "done": stats.HISTORY_CAP,
                                      "dead": 0, "cancelled": 0, "blocked": 0, "waiting": 0}
    assert found["hot"]["capped"] == ["done"]
    assert found["hot"]["throughput"]["done"] == RECENT
    assert found["other"]["counts"] == {"ready": READY, "scheduled": SCHEDULED, "running": 0, "done": 0,
                                        "dead": DEAD, "cancelled": 0, "blocked": 0, "waiting": 0}
    assert found["other"]["capped"] == []


def test_the_measure_does_see_a_read_of_the_history(big: Connection) -> None:
    # The yardstick itself: a filter on a column without an index reads every row of the table.
    assert rows_read(big, "SELECT COUNT(*) FROM mysqlq_jobs WHERE handler = 'test.record'") >= 2**HISTORY_DOUBLINGS


def test_the_stats_table_shows_a_capped_count_with_a_plus(big: Connection) -> None:
    with big.cursor() as cur:
        table = _stats_text(stats.queue_stats(cur), as_json=False)
    hot = next(line.split() for line in table.splitlines() if line.startswith("hot "))
    assert hot[1:7] == [str(READY), "0", "0", f"{stats.HISTORY_CAP}+", "0", "0"]
