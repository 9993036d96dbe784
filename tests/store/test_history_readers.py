"""Readers of finished jobs see the history: a job that ended done may have moved from the live table
mysqlq_jobs into mysqlq_jobs_history, and every listing, count, figure, look-up, operator's check
and retention's walk finds it there as it found it in the live table, once, beside the live jobs.

Jobs are planted in the live table and moved by hand (as the worker's completion moves them)."""

from __future__ import annotations

import datetime as dt
import json
from collections.abc import Iterator, Sequence
from typing import Any

import pytest
import structlog
from mysqlq_harness.jobs import COLUMNS

from mysqlq.leader.retention import Purge, Retention
from mysqlq.store import execute, execute_in, expand, ops, stats, web
from mysqlq.store.db import Cursor, Database
from mysqlq.store.sql import query

from ..conftest import QueueDB
from ..ops_fixtures import plant
from ..plans import explain_json, sorts_rows, tables

DAY = 86400.0
EVERY = "(SELECT id, status FROM mysqlq_jobs UNION ALL SELECT id, status FROM mysqlq_jobs_history) AS every_job"


def to_history(qdb: QueueDB, ids: Sequence[int]) -> None:
    """Move these jobs into the history, as the worker's completion does (one transaction)."""
    marks = ", ".join(["%s"] * len(ids))
    conn = qdb.connect()
    try:
        conn.begin()
        with conn.cursor() as cur:
            cur.execute(f"INSERT INTO mysqlq_jobs_history SELECT {COLUMNS} FROM mysqlq_jobs WHERE id IN ({marks})", ids)
            cur.execute(f"DELETE FROM mysqlq_jobs WHERE id IN ({marks})", ids)
        conn.commit()
    finally:
        conn.close()


def tag(qdb: QueueDB, ids: Sequence[int], name: str) -> None:
    for job_id in ids:
        qdb.query("INSERT INTO mysqlq_job_tags (job_id, tag) VALUES (%s, %s)", (job_id, name))
    marks = ", ".join(["%s"] * len(ids))
    for table in ("mysqlq_jobs", "mysqlq_jobs_history"):
        qdb.query(f"UPDATE {table} SET tags = %s WHERE id IN ({marks})", [json.dumps([name]), *ids])


@pytest.fixture
def cur(qdb: QueueDB) -> Iterator[Cursor]:
    conn = qdb.connect()
    try:
        with conn.cursor() as cursor:
            yield cursor
    finally:
        conn.close()


def ids_of(rows: Sequence[dict[str, Any]]) -> list[int]:
    return [int(row["id"]) for row in rows]


def in_live(qdb: QueueDB, ids: Sequence[int]) -> int:
    marks = ", ".join(["%s"] * len(ids))
    return int(qdb.scalar(f"SELECT COUNT(*) FROM mysqlq_jobs WHERE id IN ({marks})", ids))


def remaining(qdb: QueueDB, ids: Sequence[int]) -> int:
    marks = ", ".join(["%s"] * len(ids))
    return int(qdb.scalar(f"SELECT COUNT(*) FROM {EVERY} WHERE id IN ({marks})", ids))


# ---------------------------------------------------------------------------- listings


def test_listings_merge_the_history_with_the_live_jobs_newest_first(qdb: QueueDB, cur: Cursor) -> None:
    old = plant(qdb, "done", 4, ended_ago=60)
    kept = plant(qdb, "done", 1, ended_ago=30)  # a done job still in the live table (a previous version's)
    dead = plant(qdb, "dead", 1, ended_ago=20)
    newer = plant(qdb, "done", 2, ended_ago=10)
    ready = plant(qdb, "ready", 2)
    to_history(qdb, old + newer)
    everything = sorted(old + kept + dead + newer + ready, reverse=True)
    assert ids_of(ops.list_jobs(cur, queue=None, status=None, handler=None, limit=50)) == everything
    assert ids_of(ops.list_jobs(cur, queue=None, status=None, handler=None, limit=3)) == everything[:3]
    assert ids_of(ops.list_jobs(cur, queue="default", status=None, handler=None, limit=50)) == everything
    # Done jobs by finished_at, newest first, from both tables.
    done = newer[::-1] + kept + old[::-1]
    assert ids_of(ops.list_jobs(cur, queue=None, status="done", handler=None, limit=50)) == done
    assert ids_of(ops.list_jobs(cur, queue="default", status="done", handler=None, limit=4)) == done[:4]
    assert ids_of(ops.list_jobs(cur, queue=None, status="dead", handler=None, limit=50)) == dead
    # A handler's: a window of ids in both tables.
    assert ids_of(ops.list_jobs(cur, queue=None, status="done", handler="test.record", limit=50)) == sorted(
        old + kept + newer, reverse=True)
    assert ids_of(ops.list_jobs(cur, queue=None, status=None, handler="test.record", limit=5)) == everything[:5]
    assert ops.list_jobs(cur, queue=None, status=None, handler="test.other", limit=50) == []
    # Other queues' jobs stay out.
    assert ops.list_jobs(cur, queue="elsewhere", status=None, handler=None, limit=50) == []


def test_a_tag_finds_its_jobs_in_both_tables(qdb: QueueDB, cur: Cursor) -> None:
    moved = plant(qdb, "done", 3, ended_ago=60)
    live = plant(qdb, "ready", 2)
    tag(qdb, moved + live, "batch-7")
    to_history(qdb, moved)
    everything = sorted(moved + live, reverse=True)
    assert ids_of(ops.list_jobs(cur, queue=None, status=None, handler=None, limit=50, tag="batch-7")) == everything
    assert ids_of(ops.list_jobs(cur, queue=None, status="done", handler=None, limit=50, tag="batch-7")) == sorted(
        moved, reverse=True)
    assert ops.list_jobs(cur, queue=None, status=None, handler=None, limit=2, tag="batch-7")[0]["tags"] == ["batch-7"]
    page = ops.tagged(cur, "batch-7", queue="default", status=None, handler=None, before=None, limit=4)
    assert ids_of(page.rows) == everything[:4]


def test_jobs_show_and_the_newest_id_see_the_history(qdb: QueueDB, cur: Cursor) -> None:
    (moved,) = plant(qdb, "done", ended_ago=60)
    qdb.query("UPDATE mysqlq_jobs SET result = '\"ok\"' WHERE id = %s", (moved,))
    to_history(qdb, [moved])
    job = ops.get_job(cur, moved)
    assert job is not None and (job["id"], job["status"], job["result"]) == (moved, "done", b'"ok"')
    assert ops.get_job(cur, moved + 1) is None
    execute(cur, "newest_job_id")
    assert cur.fetchone()[0] == moved  # the only job is in the history
    (live,) = plant(qdb, "ready")
    execute(cur, "newest_job_id")
    assert cur.fetchone()[0] == live
    qdb.query("DELETE FROM mysqlq_jobs WHERE id = %s", (live,))
    execute(cur, "newest_job_id")
    assert cur.fetchone()[0] == moved
    result = qdb.cli("jobs", "show", str(moved), "--json", check=True)
    shown = json.loads(result.stdout)
    assert (shown["id"], shown["status"]) == (moved, "done")


# ---------------------------------------------------------------------------- acting on named jobs


def test_retry_and_cancel_of_a_done_job_in_the_history_say_it_is_done(qdb: QueueDB) -> None:
    (moved,) = plant(qdb, "done", ended_ago=60)
    to_history(qdb, [moved])
    result = qdb.cli("retry", str(moved))
    assert result.returncode != 0
    assert f"job {moved} is done" in result.stderr and "no job" not in result.stderr
    result = qdb.cli("cancel", str(moved))
    assert result.returncode != 0
    assert f"job {moved} is done" in result.stderr
    assert qdb.query("SELECT status FROM mysqlq_jobs_history WHERE id = %s", (moved,)) == [("done",)]
    assert f"no job with id {moved + 1}" in qdb.cli("retry", str(moved + 1)).stderr


def test_change_jobs_finds_each_named_job_once_in_either_table(qdb: QueueDB, cur: Cursor) -> None:
    (moved,) = plant(qdb, "done", ended_ago=60)
    (dead,) = plant(qdb, "dead", ended_ago=60)
    to_history(qdb, [moved])
    seen: list[dict[int, tuple[str, str]]] = []
    change = ops.change_jobs(cur, "retry_jobs", [moved, dead], ("dead",), lambda found: seen.append(dict(found)))
    assert seen == [{moved: ("done", "default"), dead: ("dead", "default")}]
    assert change.changed == 1 and change.queues == frozenset({"default"})


def test_a_queue_whose_jobs_are_all_in_the_history_has_jobs(qdb: QueueDB, cur: Cursor) -> None:
    moved = plant(qdb, "done", 2, queue="archive", ended_ago=60)
    to_history(qdb, moved)
    assert ops.queue_has_jobs(cur, "archive")
    assert not ops.queue_has_jobs(cur, "nosuch")
    assert "(it has no jobs yet)" not in qdb.cli("pause", "archive", check=True).stdout


# ---------------------------------------------------------------------------- counts and figures


def test_stats_count_and_measure_the_history(qdb: QueueDB, cur: Cursor) -> None:
    moved = plant(qdb, "done", 3, queue="archive", ended_ago=30)
    plant(qdb, "done", 2, queue="archive", ended_ago=30)  # still live
    old = plant(qdb, "done", 2, queue="old", ended_ago=DAY)
    plant(qdb, "ready", 1, queue="archive")
    to_history(qdb, moved + old)
    assert ops.queues_with(cur, "done") == ["archive", "old"]
    assert ops.all_queues(cur) == ["archive", "old"]
    assert ops.count_capped(cur, "done", 100) == {"archive": 5, "old": 2}
    assert ops.count_capped(cur, "done", 4) == {"archive": 5, "old": 2}  # 5: more than 4
    assert ops.count_capped(cur, "done", 2) == {"archive": 3, "old": 2}  # never above cap + 1
    assert ops.throughput(cur, 300) == {"archive": (5, 0)}
    found = {row["queue"]: row for row in stats.queue_stats(cur, cap=4)}
    assert found["archive"]["counts"]["done"] == 4 and found["archive"]["capped"] == ["done"]
    assert found["archive"]["counts"]["ready"] == 1
    assert found["archive"]["throughput"]["done"] == 5
    assert found["old"]["counts"]["done"] == 2 and found["old"]["capped"] == []
    assert found["old"]["throughput"]["done"] == 0


def test_the_dashboard_counts_and_lists_the_history(qdb: QueueDB, cur: Cursor) -> None:
    moved = plant(qdb, "done", 3, ended_ago=90)
    live = plant(qdb, "done", 1, ended_ago=90)
    dead = plant(qdb, "dead", 1, ended_ago=90)
    ready = plant(qdb, "ready", 1)
    to_history(qdb, moved)
    assert web.finished_queues(cur) == ["default"]
    assert "default" in web.queue_names(cur)
    per_minute = {(queue, status, ago): count for queue, status, ago, count in web.finished_per_minute(cur, 60)}
    assert per_minute == {("default", "done", 1): 4, ("default", "dead", 1): 1}
    after, upto = ops.cutoff(cur, 120), ops.cutoff(cur, -1)
    assert web.finished_between(cur, after, upto) == {("default", "done"): 4, ("default", "dead"): 1}
    everything = sorted(moved + live + dead + ready, reverse=True)
    page = web.jobs_page(cur, queue=None, status=None, handler=None, before=None, limit=3)
    assert ids_of(page.rows) == everything[:3] and page.searched_down_to == everything[2]
    page = web.jobs_page(cur, queue=None, status=None, handler=None, before=page.searched_down_to, limit=3)
    assert ids_of(page.rows) == everything[3:] and page.searched_down_to == 0
    done = sorted(moved + live, reverse=True)
    assert ids_of(web.jobs_page(cur, queue=None, status="done", handler=None, before=None, limit=50).rows) == done
    assert ids_of(web.jobs_page(cur, queue="default", status="done", handler=None, before=None,
                                limit=50).rows) == done
    assert ids_of(web.workflow(cur, moved[0], 50).jobs) == [moved[0]]


# ---------------------------------------------------------------------------- retention


def retention(qdb: QueueDB, **changes: object) -> Retention:
    settings = qdb.settings(**changes)
    return Retention(settings, Database(settings.dsn), structlog.get_logger("test"))


def test_retention_deletes_expired_jobs_of_both_tables_and_their_tags(qdb: QueueDB) -> None:
    moved_old = plant(qdb, "done", 5, ended_ago=8 * DAY)
    live_old = plant(qdb, "done", 2, ended_ago=8 * DAY)
    moved_young = plant(qdb, "done", 3, ended_ago=6 * DAY)
    other_queue = plant(qdb, "done", 2, queue="other", ended_ago=8 * DAY)
    cancelled = plant(qdb, "cancelled", 1, ended_ago=8 * DAY)
    tag(qdb, moved_old + moved_young + live_old, "t")
    to_history(qdb, moved_old + moved_young + other_queue)
    purge = Purge(Database(qdb.settings().dsn), [("done", 7 * DAY), ("cancelled", 7 * DAY)], batch=2)
    assert purge.counts() == {"done": 9, "cancelled": 1}
    assert purge.run() == {"done": 9, "cancelled": 1}
    assert remaining(qdb, moved_old + live_old + other_queue + cancelled) == 0
    assert remaining(qdb, moved_young) == 3
    tagged = sorted(int(row[0]) for row in qdb.query("SELECT job_id FROM mysqlq_job_tags"))
    assert tagged == sorted(moved_young)
    assert purge.counts() == {"done": 0, "cancelled": 0}


def test_purge_of_one_queue_and_dry_run_count_the_history(qdb: QueueDB) -> None:
    mine = plant(qdb, "done", 3, queue="mine", ended_ago=8 * DAY)
    theirs = plant(qdb, "done", 2, queue="theirs", ended_ago=8 * DAY)
    to_history(qdb, mine[:2] + theirs)
    result = qdb.cli("purge", "--done-older-than", "7d", "--dry-run", check=True)
    assert result.stdout.strip() == "would delete 5 done and 0 cancelled jobs that ended more than 7d ago"
    qdb.cli("purge", "--done-older-than", "7d", "--queue", "mine", check=True)
    assert remaining(qdb, mine) == 0 and remaining(qdb, theirs) == 2


def test_a_job_moved_while_its_queue_is_walked_is_deleted_from_the_history(qdb: QueueDB) -> None:
    live = plant(qdb, "done", 4, ended_ago=8 * DAY)
    db = Database(qdb.settings().dsn)
    walk = ops.Walk("done", db.run(lambda cur: ops.cutoff(cur, 7 * DAY)))
    assert db.run(lambda cur: ops.delete_expired(cur, walk, 2)) == 2  # the live table's first batch
    assert walk.table == "live" and not walk.done
    to_history(qdb, live[2:])  # they end up in the history meanwhile (as the migration moves old jobs)
    assert db.run(lambda cur: ops.delete_expired(cur, walk, 2)) == 2  # found there next
    assert remaining(qdb, live) == 0
    assert db.run(lambda cur: ops.delete_expired(cur, walk, 2)) == 0 and walk.done


def test_the_history_delete_rechecks_each_row(qdb: QueueDB, cur: Cursor) -> None:
    moved = plant(qdb, "done", 2, ended_ago=8 * DAY)
    to_history(qdb, moved)
    young = ops.cutoff(cur, 9 * DAY)
    assert execute_in(cur, "delete_history_jobs", moved, "done", young) == 0
    assert execute_in(cur, "delete_history_jobs", moved, "dead", ops.cutoff(cur, 7 * DAY)) == 0
    assert execute_in(cur, "delete_history_jobs", moved, "done", ops.cutoff(cur, 7 * DAY)) == 2


def test_the_retention_chore_deletes_from_the_history(qdb: QueueDB) -> None:
    moved = plant(qdb, "done", 3, ended_ago=8 * DAY)
    young = plant(qdb, "done", 1, ended_ago=DAY)
    to_history(qdb, moved + young)
    assert retention(qdb).run() == 60.0
    assert remaining(qdb, moved) == 0 and remaining(qdb, young) == 1


# ---------------------------------------------------------------------------- plans


def accesses(cur: Cursor, sql: str, params: Any, sorts: bool = False) -> dict[str, list[str | None]]:
    """Table → the keys its accesses use in ``sql``'s plan (which must not sort unless ``sorts``)."""
    text = explain_json(cur, sql, params)
    assert sorts or not sorts_rows(text), text
    found: dict[str, list[str | None]] = {}
    for access in tables(json.loads(text)):
        found.setdefault(access["table_name"], []).append(access.get("key"))
    return found


def test_the_readers_walk_an_index_of_each_table(qdb: QueueDB, cur: Cursor) -> None:
    plant(qdb, "done", 20, ended_ago=8 * DAY)
    to_history(qdb, plant(qdb, "done", 20, ended_ago=8 * DAY))
    plant(qdb, "ready", 5)
    cur.execute("ANALYZE TABLE mysqlq_jobs, mysqlq_jobs_history")
    cur.fetchall()
    cutoff = ops.cutoff(cur, 7 * DAY)
    ranged = {"status": "done", "queue": "default", "cutoff": cutoff, "limit": 10,
              "after_finished_at": ops.START, "after_priority": ops.LOWEST_PRIORITY, "after_turn": 0,
              "after_id": 0}
    assert accesses(cur, query("expired_jobs"), ranged) == {"mysqlq_jobs": ["mysqlq_jobs_live"]}
    assert accesses(cur, query("expired_history_jobs"), ranged) == {
        "mysqlq_jobs_history": ["mysqlq_jobs_history_ended"]}
    for name in ("expired_jobs", "expired_history_jobs"):  # on the index alone: no row read for a column
        (walk,) = tables(json.loads(explain_json(cur, query(name), ranged)))
        assert walk.get("using_index") is True, (name, walk)
    assert accesses(cur, query("count_expired"), ranged) == {
        "mysqlq_jobs": ["mysqlq_jobs_live"], "mysqlq_jobs_history": ["mysqlq_jobs_history_ended"]}
    for name in ("delete_jobs", "delete_history_jobs"):
        text = explain_json(cur, expand(name, 2), [1, 2, "done", cutoff])
        assert [access.get("key") for access in tables(json.loads(text))] == ["PRIMARY"], name
    listing = {"status": "done", "queue": "default", "handler": None, "limit": 10}
    # Each part walks its index in order, and the server does not sort their union (the caller merges).
    found = accesses(cur, query("list_jobs_in_state"), listing)
    assert found["mysqlq_jobs"] == ["mysqlq_jobs_live"]
    assert found["mysqlq_jobs_history"] == ["mysqlq_jobs_history_ended"]
    for name in ("list_jobs", "web_list_jobs"):
        found = accesses(cur, query(name), {**listing, "status": None, "queue": None, "before": None})
        assert found["mysqlq_jobs"] == ["PRIMARY"] and found["mysqlq_jobs_history"] == ["PRIMARY"], name
    capped = {"status": "done", "queue": "default", "cap": 11}
    found = accesses(cur, query("count_capped"), capped)
    assert found["mysqlq_jobs"] == ["mysqlq_jobs_live"]
    assert found["mysqlq_jobs_history"] == ["mysqlq_jobs_history_ended"]
    found = accesses(cur, query("next_queue"), {"status": "done", "after": ""})
    found = {name: keys for name, keys in found.items() if name.startswith("mysqlq_")}  # not the union of MINs
    assert set(found) <= {"mysqlq_jobs", "mysqlq_jobs_history"}  # read off the indexes, if at all
    assert all(key in (None, "mysqlq_jobs_live", "mysqlq_jobs_history_ended") for keys in found.values()
               for key in keys)
    found = accesses(cur, expand("throughput", 1), ["default", 10**9, "default", 10**9], sorts=True)
    assert found["mysqlq_jobs"] == ["mysqlq_jobs_live"]
    assert found["mysqlq_jobs_history"] == ["mysqlq_jobs_history_ended"]
    for name, params in [("web_finished_between", [dt.datetime(2000, 1, 1), dt.datetime(2100, 1, 1)]),
                         ("web_finished_per_minute", [60])]:
        found = accesses(cur, expand(name, 1), ["default", *params, "default", *params], sorts=True)
        assert found["mysqlq_jobs"] == ["mysqlq_jobs_live"], name
        assert found["mysqlq_jobs_history"] == ["mysqlq_jobs_history_ended"], name
