"""Workflows across the history (schema 17): a job that ended done without dependents moves from
``mysqlq_jobs`` into ``mysqlq_jobs_history``, and a job enqueued after it later finds it there,
done, its result reachable as if it had stayed live; what reads parents and dependents reads both
tables. An id in neither is still refused. A parent moved while a child naming it is enqueued: the
two meet on the parent's live row, whichever comes first."""

from __future__ import annotations

import json
import threading
import time
from collections.abc import Callable
from typing import Any

import pytest
from mysqlq_harness.jobs import COLUMNS

from mysqlq import InvalidJob, Job
from mysqlq.producer import workflows
from mysqlq.store import dependencies
from mysqlq.store.db import Cursor, transaction

from ..conftest import QueueDB

MOVE = (f"INSERT INTO mysqlq_jobs_history SELECT {COLUMNS} FROM mysqlq_jobs"
        " WHERE running_batch = %s AND dependents IS NULL AND (dedupe_key IS NULL OR dedupe_scope = 'active')"
        " FOR UPDATE")
DELETE = ("DELETE FROM mysqlq_jobs"
          " WHERE running_batch = %s AND dependents IS NULL AND (dedupe_key IS NULL OR dedupe_scope = 'active')")


def drain(qdb: QueueDB) -> None:
    result = qdb.cli("worker", "--burst")
    assert result.returncode == 0, result.stderr


def where(qdb: QueueDB, job_id: int) -> str | None:
    """The table holding a job: 'live', 'history' or None."""
    live = qdb.scalar("SELECT COUNT(*) FROM mysqlq_jobs WHERE id = %s", (job_id,))
    moved = qdb.scalar("SELECT COUNT(*) FROM mysqlq_jobs_history WHERE id = %s", (job_id,))
    assert live + moved <= 1
    return "live" if live else "history" if moved else None


def to_history(qdb: QueueDB, job_id: int) -> None:
    """Move a job that ended done into the history, as the worker's completion does (if it did not)."""
    if where(qdb, job_id) == "live":
        conn = qdb.connect()
        try:
            with transaction(conn), conn.cursor() as cur:
                cur.execute(f"INSERT INTO mysqlq_jobs_history SELECT {COLUMNS} FROM mysqlq_jobs"
                            " WHERE id = %s AND status = 'done' FOR UPDATE", (job_id,))
                cur.execute("DELETE FROM mysqlq_jobs WHERE id = %s AND status = 'done'", (job_id,))
        finally:
            conn.close()
    assert where(qdb, job_id) == "history"


def state(qdb: QueueDB, job_id: int) -> tuple[str, Any]:
    rows = qdb.query("SELECT status, result, last_error FROM mysqlq_jobs WHERE id = %s UNION ALL "
                     "SELECT status, result, last_error FROM mysqlq_jobs_history WHERE id = %s", (job_id, job_id))
    status, result, error = rows[0]
    return str(status), (json.loads(result) if result is not None else error)


def on_cursor(qdb: QueueDB, question: Callable[[Cursor], Any]) -> Any:
    conn = qdb.connect()
    try:
        with conn.cursor() as cur:
            return question(cur)
    finally:
        conn.close()


def parent_in_history(qdb: QueueDB, tag: str = "a") -> int:
    with qdb.producer() as producer:
        parent = producer.enqueue("test.step", {"tag": tag})
    drain(qdb)
    to_history(qdb, parent)
    return parent


def test_a_child_of_a_parent_in_the_history_runs_with_its_result(qdb: QueueDB) -> None:
    parent = parent_in_history(qdb)
    with qdb.producer() as producer:
        child = producer.enqueue("test.step", {"tag": "b"}, after=[parent])
    assert qdb.query("SELECT status, waiting_for FROM mysqlq_jobs WHERE id = %s", (child,)) == [("ready", 0)]
    assert qdb.query("SELECT parent_id, run_anyway FROM mysqlq_dependencies WHERE child_id = %s",
                     (child,)) == [(parent, 0)]
    assert where(qdb, parent) == "history"  # read, not touched: no dependents flag, not moved back
    assert qdb.scalar("SELECT dependents FROM mysqlq_jobs_history WHERE id = %s", (parent,)) is None
    drain(qdb)
    assert state(qdb, child) == ("done", ["a", "b"])  # the parent's result, read from the history
    records = [words for words in qdb.records() if int(words[0]) == child]
    assert records == [[str(child), "step", "b", str(parent)]]  # its one parent, done (no "early")


def test_parents_live_and_in_the_history_together(qdb: QueueDB) -> None:
    parent = parent_in_history(qdb)
    with qdb.producer() as producer:
        live = producer.enqueue("test.step", {"tag": "l"})
        dead = producer.enqueue("test.fail", max_attempts=1)
        child = producer.enqueue("test.step", {"tag": "c"}, after=[parent, live])
        again = producer.enqueue("test.step", {"tag": "c"}, after=[live, parent], dedupe_key="k")
        assert producer.enqueue("test.step", after=[parent], dedupe_key="k") == again  # a taken key: as before
    assert qdb.query("SELECT status, waiting_for FROM mysqlq_jobs WHERE id = %s", (child,)) == [("waiting", 1)]
    assert qdb.scalar("SELECT dependents FROM mysqlq_jobs WHERE id = %s", (live,)) == 1
    assert sorted(qdb.query("SELECT parent_id FROM mysqlq_dependencies WHERE child_id = %s", (again,))) == [
        (parent,), (live,)]
    drain(qdb)
    assert state(qdb, child)[0] == "done" and state(qdb, again)[0] == "done"
    assert [words[3] for words in qdb.records() if int(words[0]) == child] == [f"{parent},{live}"]
    with qdb.producer() as producer:  # a dead parent beside a done one in the history: cancelled, as before
        cancelled = producer.enqueue("test.step", after=[parent, dead])
        runs = producer.enqueue("test.step", after=[dead, parent], on_parent_failure="run")
    assert state(qdb, cancelled) == ("cancelled", f"job {dead} it waited for ended dead")
    assert qdb.query("SELECT status, waiting_for FROM mysqlq_jobs WHERE id = %s", (runs,)) == [("ready", 0)]


def test_a_chain_and_a_group_after_a_parent_in_the_history(qdb: QueueDB) -> None:
    parent = parent_in_history(qdb, "p")
    with qdb.producer() as producer:
        chain = producer.chain(Job("test.step", {"tag": "x"}, after=[parent]), Job("test.step", {"tag": "y"}))
        group = producer.group([Job("test.echo", {"value": 1})], then=Job("test.gather", after=[parent]))
    assert state(qdb, chain[0])[0] == "ready" and state(qdb, group.callback)[0] == "waiting"
    drain(qdb)
    assert state(qdb, chain[-1]) == ("done", ["p", "x", "y"])
    assert state(qdb, group.callback) == ("done", {"ids": [parent, *group.members], "results": [["p"], 1],
                                                   "statuses": ["done"]})


def test_an_id_in_neither_table_is_still_refused(qdb: QueueDB) -> None:
    parent = parent_in_history(qdb)
    purged = parent_in_history(qdb, "gone")
    qdb.query("DELETE FROM mysqlq_jobs_history WHERE id = %s", (purged,))  # as retention does
    top = qdb.scalar("SELECT MAX(id) FROM (SELECT id FROM mysqlq_jobs UNION ALL "
                     "SELECT id FROM mysqlq_jobs_history) AS every_job")
    with qdb.producer() as producer:
        for missing in (purged, 999999):
            refused = rf"job {missing} to wait for does not exist \(never enqueued, or purged\)"
            with pytest.raises(InvalidJob, match=refused):
                producer.enqueue("test.step", after=[parent, missing])
    assert qdb.scalar("SELECT MAX(id) FROM (SELECT id FROM mysqlq_jobs UNION ALL "
                      "SELECT id FROM mysqlq_jobs_history) AS every_job") == top  # nothing left behind
    assert qdb.scalar("SELECT COUNT(*) FROM mysqlq_dependencies") == 0


def test_parents_and_dependents_are_read_from_both_tables(qdb: QueueDB) -> None:
    with qdb.producer() as producer:
        _, middle, last = producer.chain(Job("test.step", {"tag": "a"}), Job("test.step", {"tag": "b"}),
                                         Job("test.step", {"tag": "c"}))
        other = producer.enqueue("test.step", {"tag": "o"})
    drain(qdb)
    # The first and middle steps had dependents (they stay live); the last and other had none.
    to_history(qdb, last)
    to_history(qdb, other)
    qdb.query("UPDATE mysqlq_jobs_history SET trace_context = 'moved', run_trace_context = NULL WHERE id = %s",
              (other,))
    qdb.query("UPDATE mysqlq_jobs SET run_trace_context = 'ran' WHERE id = %s", (middle,))
    with qdb.producer() as producer:
        late = producer.enqueue("test.step", {"tag": "z"}, after=[middle, other])
    parents = on_cursor(qdb, lambda cur: dependencies.parents_of(cur, late))
    assert [(p.id, p.status, p.result) for p in parents] == [(middle, "done", ["a", "b"]),
                                                            (other, "done", ["o"])]
    assert [(p.id, p.result) for p in on_cursor(qdb, lambda cur: dependencies.parents_of(
        cur, late, results=False))] == [(middle, None), (other, None)]
    assert [p.id for p in on_cursor(qdb, lambda cur: dependencies.parents_of(cur, late, limit=1))] == [middle]
    assert sorted(on_cursor(qdb, lambda cur: dependencies.parents_trace_contexts(cur, late, 10))) == [
        ("moved", False), ("ran", True)]
    assert on_cursor(qdb, lambda cur: dependencies.dependents_of(cur, middle)) == [(last, "done"), (late, "ready")]
    assert on_cursor(qdb, lambda cur: dependencies.dependents_of(cur, middle, limit=1)) == [(last, "done")]
    assert on_cursor(qdb, lambda cur: dependencies.dependents_of(cur, other)) == [(late, "ready")]
    shown = json.loads(qdb.cli("jobs", "show", str(late), "--json", check=True).stdout)
    assert shown["parents"] == [{"id": middle, "status": "done"}, {"id": other, "status": "done"}]
    shown = json.loads(qdb.cli("jobs", "show", str(middle), "--json", check=True).stdout)
    assert shown["dependents"] == [{"id": last, "status": "done"}, {"id": late, "status": "ready"}]


def test_retention_forgets_the_pairs_of_dependents_in_neither_table(qdb: QueueDB) -> None:
    with qdb.producer() as producer:
        parent = producer.enqueue("test.step", {"tag": "p"})
        moved = producer.enqueue("test.step", {"tag": "m"}, after=[parent])
        deleted = producer.enqueue("test.step", {"tag": "d"}, after=[parent])
    drain(qdb)
    to_history(qdb, moved)
    to_history(qdb, deleted)
    qdb.query("DELETE FROM mysqlq_jobs_history WHERE id = %s", (deleted,))
    assert on_cursor(qdb, lambda cur: dependencies.forget(cur, [moved, deleted])) == 1
    assert qdb.query("SELECT parent_id, child_id FROM mysqlq_dependencies") == [(parent, moved)]


def enqueue_after(qdb: QueueDB, parent: int) -> tuple[int, bool]:
    conn = qdb.connect()
    try:
        with transaction(conn), conn.cursor() as cur:
            return workflows.insert_counted(cur, Job("test.step", after=[parent]), qdb.settings())
    finally:
        conn.close()


def running(qdb: QueueDB, batch: int) -> int:
    """A parent running under a claim of batch ``batch``, nobody waiting for it yet."""
    with qdb.producer() as producer:
        parent = producer.enqueue("test.step", {"tag": "r"})
    qdb.query("UPDATE mysqlq_jobs SET status = 'running', running_batch = %s, batch_id = %s,"
              " attempts = 1, started_at = NOW(6), lease_until = NOW(6) + INTERVAL 1 HOUR WHERE id = %s",
              (batch, batch, parent))
    return parent


def complete(cur: Cursor, batch: int) -> int:
    """The worker's completion of a batch that returned nothing: its jobs nobody waits for move (the
    copy ends done, like the done_row statement of the worker's move)."""
    moved = cur.execute(MOVE, (batch,))
    cur.execute("UPDATE mysqlq_jobs_history SET status = 'done', running_batch = 0, lease_until = NULL,"
                " finished_at = NOW(6) WHERE batch_id = %s AND running_batch = %s", (batch, batch))
    cur.execute(DELETE, (batch,))
    return int(moved)


def blocked(thread: threading.Thread) -> None:
    """Give a thread time to reach a lock it waits for; it must still be waiting."""
    time.sleep(1.0)
    assert thread.is_alive()


def test_a_child_enqueued_first_keeps_its_parent_live(qdb: QueueDB) -> None:
    parent = running(qdb, 77)
    moves: list[int] = []
    conn = qdb.connect()
    try:
        with transaction(conn), conn.cursor() as cur:
            child, _ = workflows.insert_counted(cur, Job("test.step", after=[parent]), qdb.settings())

            def completion() -> None:
                other = qdb.connect()
                try:
                    with transaction(other), other.cursor() as ocur:
                        moves.append(complete(ocur, 77))
                finally:
                    other.close()

            thread = threading.Thread(target=completion)
            thread.start()
            blocked(thread)  # on the parent's row, locked by the enqueue
    finally:
        conn.close()
    thread.join(timeout=30)
    assert moves == [0]  # the parent has a dependent now: left to the releasing path
    assert where(qdb, parent) == "live"
    assert qdb.query("SELECT status, dependents FROM mysqlq_jobs WHERE id = %s", (parent,)) == [("running", 1)]
    assert qdb.query("SELECT status, waiting_for FROM mysqlq_jobs WHERE id = %s", (child,)) == [("waiting", 1)]


def test_a_parent_moved_while_its_child_is_enqueued_is_found_in_the_history(qdb: QueueDB) -> None:
    parent = running(qdb, 78)
    found: list[tuple[int, bool]] = []
    conn = qdb.connect()
    try:
        with transaction(conn), conn.cursor() as cur:
            assert complete(cur, 78) == 1
            thread = threading.Thread(target=lambda: found.append(enqueue_after(qdb, parent)))
            thread.start()
            blocked(thread)  # on the parent's live row, locked by the move
    finally:
        conn.close()
    thread.join(timeout=30)
    assert len(found) == 1 and found[0][1]
    child = found[0][0]
    assert where(qdb, parent) == "history"
    assert qdb.query("SELECT status, waiting_for FROM mysqlq_jobs WHERE id = %s", (child,)) == [("ready", 0)]
    assert qdb.query("SELECT parent_id FROM mysqlq_dependencies WHERE child_id = %s", (child,)) == [(parent,)]


def test_a_move_committed_after_the_enqueueing_transactions_snapshot_is_seen(qdb: QueueDB) -> None:
    """The enqueueing transaction read something before (its snapshot predates the move): the move
    is still seen, the history being read by a locking read, which reads the newest rows."""
    parent = running(qdb, 79)
    conn = qdb.connect()
    try:
        with transaction(conn), conn.cursor() as cur:
            cur.execute("SELECT COUNT(*) FROM mysqlq_jobs_history")  # the snapshot: before the move
            assert cur.fetchone()[0] == 0
            other = qdb.connect()
            try:
                with transaction(other), other.cursor() as ocur:
                    assert complete(ocur, 79) == 1
            finally:
                other.close()
            cur.execute("SELECT COUNT(*) FROM mysqlq_jobs_history")
            assert cur.fetchone()[0] == 0  # a plain read still sees the snapshot
            child, new = workflows.insert_counted(cur, Job("test.step", after=[parent]), qdb.settings())
            assert new
    finally:
        conn.close()
    assert qdb.query("SELECT status, waiting_for FROM mysqlq_jobs WHERE id = %s", (child,)) == [("ready", 0)]
