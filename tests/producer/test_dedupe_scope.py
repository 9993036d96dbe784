"""Dedupe scopes: a key held until the job is purged ("forever"), or only while it is queued or running ("active")."""

from __future__ import annotations

import json
from collections.abc import Callable

import pytest
from mysqlq_harness.jobs import EVERY_JOB

from mysqlq import InvalidJob, Job, enqueue_on
from mysqlq.store import claims, workers
from mysqlq.store.db import Cursor

from ..conftest import QueueDB


def claim_next(qdb: QueueDB, batch_id: int = 7, worker_id: int = 1, limit: int = 100) -> int:
    """Claim the next ready jobs of the default queue as worker ``worker_id`` would; returns how many."""
    return run_store(qdb, lambda cur: claims.claim_update(cur, "default", batch_id, worker_id, 60, limit))


def run_store(qdb: QueueDB, unit: Callable[[Cursor], int]) -> int:
    """Run one mysqlq.store function on a connection of its own (autocommit)."""
    conn = qdb.connect()
    try:
        with conn.cursor() as cur:
            return unit(cur)
    finally:
        conn.close()


def test_active_refuses_while_ready_or_running_and_accepts_once_done(qdb: QueueDB) -> None:
    with qdb.producer() as producer:
        first = producer.enqueue("test.record", {"n": 1}, dedupe_key="sync-7", dedupe_scope="active")
        assert producer.enqueue("test.record", {"n": 2}, dedupe_key="sync-7", dedupe_scope="active") == first
        assert claim_next(qdb) == 1
        assert producer.enqueue("test.record", {"n": 3}, dedupe_key="sync-7", dedupe_scope="active") == first
        assert run_store(qdb, lambda cur: claims.complete_one(cur, 7, first)) == 1
        second = producer.enqueue("test.record", {"n": 4}, dedupe_key="sync-7", dedupe_scope="active")
    assert second != first
    assert qdb.query(f"SELECT id, status, dedupe_key, payload FROM {EVERY_JOB} ORDER BY id") == [
        (first, "done", None, b'{"n":1}'), (second, "ready", "sync-7", b'{"n":4}')]


def test_forever_keeps_refusing_after_the_job_is_done(qdb: QueueDB) -> None:
    with qdb.producer() as producer:
        first = producer.enqueue("test.record", dedupe_key="invoice-7")
        assert claim_next(qdb) == 1
        assert run_store(qdb, lambda cur: claims.complete_batch(cur, 7)) == 1
        assert producer.enqueue("test.record", dedupe_key="invoice-7") == first
        assert producer.enqueue("test.record", dedupe_key="invoice-7", dedupe_scope="forever") == first
    assert qdb.query(f"SELECT status, dedupe_key, dedupe_scope FROM {EVERY_JOB}") == [("done", "invoice-7", "forever")]


def test_every_way_a_job_ends_frees_an_active_key(qdb: QueueDB) -> None:
    """Done (a whole batch, listed ids), dead (buried, or lost with its worker on its last attempt), cancelled."""
    keys = ("batch", "listed", "buried", "reaped")
    with qdb.producer() as producer:
        ids = {key: producer.enqueue("test.record", dedupe_key=key, dedupe_scope="active", max_attempts=1)
               for key in keys}
        for number in range(1, 5):  # each job claimed in a batch of its own, by a worker of its own
            assert claim_next(qdb, batch_id=number, worker_id=number, limit=1) == 1
        assert run_store(qdb, lambda cur: claims.complete_batch(cur, 1)) == 1
        assert run_store(qdb, lambda cur: claims.complete(cur, 2, [ids["listed"]])) == 1
        assert run_store(qdb, lambda cur: claims.bury(cur, 3, ids["buried"], "boom")) == 1
        assert run_store(qdb, lambda cur: workers.reap(cur, [4], False)) == 1
        ids["cancelled"] = producer.enqueue("test.record", dedupe_key="cancelled", dedupe_scope="active", delay=60)
        qdb.cli("cancel", str(ids["cancelled"]), check=True)
        assert dict(qdb.query(f"SELECT id, status FROM {EVERY_JOB}")) == {
            ids["batch"]: "done", ids["listed"]: "done", ids["buried"]: "dead", ids["reaped"]: "dead",
            ids["cancelled"]: "cancelled"}
        assert qdb.scalar(f"SELECT COUNT(*) FROM {EVERY_JOB} WHERE dedupe_key IS NOT NULL") == 0
        again = {key: producer.enqueue("test.record", dedupe_key=key, dedupe_scope="active") for key in ids}
    assert not set(again.values()) & set(ids.values())
    assert qdb.scalar("SELECT COUNT(*) FROM mysqlq_jobs WHERE status = 'ready' AND dedupe_key IS NOT NULL") == 5


def test_a_lost_worker_keeps_an_active_key_when_its_job_goes_back_to_ready(qdb: QueueDB) -> None:
    with qdb.producer() as producer:
        first = producer.enqueue("test.record", dedupe_key="k", dedupe_scope="active", max_attempts=2)
        assert claim_next(qdb, worker_id=3) == 1
        assert run_store(qdb, lambda cur: workers.reap(cur, [3], False)) == 1
        assert producer.enqueue("test.record", dedupe_key="k", dedupe_scope="active") == first
    assert qdb.query("SELECT status, dedupe_key FROM mysqlq_jobs") == [("ready", "k")]


def test_an_active_key_is_kept_while_the_job_waits_to_retry(qdb: QueueDB) -> None:
    with qdb.producer() as producer:
        first = producer.enqueue("test.record", dedupe_key="k", dedupe_scope="active")
        assert claim_next(qdb) == 1
        assert run_store(qdb, lambda cur: claims.retry(cur, 7, first, 60, "try again")) == 1
        assert producer.enqueue("test.record", dedupe_key="k", dedupe_scope="active") == first
    assert qdb.query("SELECT status, dedupe_key FROM mysqlq_jobs") == [("scheduled", "k")]


def test_a_worker_frees_active_keys_of_the_jobs_it_finishes(qdb: QueueDB) -> None:
    with qdb.producer() as producer:
        producer.enqueue_many([Job("test.record", dedupe_key=f"a{i}", dedupe_scope="active") for i in range(3)]
                              + [Job("test.fail", dedupe_key="f", dedupe_scope="active", max_attempts=1),
                                 Job("test.record", dedupe_key="kept")])
    proc = qdb.worker("--burst")
    assert proc.wait(timeout=60) == 0, qdb.logs()
    assert qdb.query(f"SELECT status, dedupe_key FROM {EVERY_JOB} ORDER BY id") == [
        ("done", None), ("done", None), ("done", None), ("dead", None), ("done", "kept")]


def test_cli_and_jsonl_take_a_dedupe_scope(qdb: QueueDB) -> None:
    first = qdb.cli("enqueue", "test.record", "{}", "--dedupe-key", "c", "--dedupe-scope", "active", check=True)
    lines = [json.dumps({"handler": "test.record", "dedupe_key": "j1", "dedupe_scope": "active"}),
             json.dumps({"handler": "test.record", "dedupe_key": "j2"})]
    path = qdb.tmp / "jobs.jsonl"
    path.write_text("\n".join(lines) + "\n")
    qdb.cli("enqueue", "--file", str(path), check=True)
    assert qdb.query("SELECT id, dedupe_key, dedupe_scope FROM mysqlq_jobs ORDER BY id") == [
        (int(first.stdout), "c", "active"), (int(first.stdout) + 1, "j1", "active"),
        (int(first.stdout) + 2, "j2", "forever")]
    bad = qdb.cli("enqueue", "test.record", "--dedupe-scope", "sometimes")
    assert bad.returncode == 2 and "sometimes" in bad.stderr
    path.write_text(json.dumps({"handler": "test.record", "dedupe_scope": "weekly"}) + "\n")
    bad = qdb.cli("enqueue", "--file", str(path))
    assert bad.returncode == 1
    assert bad.stderr.strip().splitlines() == [f"mysqlq: error: {path}: line 1: dedupe scope must be 'forever', "
                                               "'active' or a period ('10m', '1h', seconds or a timedelta, more "
                                               "than 0 and at most 1e+09 s), got 'weekly'; nothing was enqueued"]


def test_an_unknown_scope_is_refused_and_nothing_is_written(qdb: QueueDB) -> None:
    refused = pytest.raises(InvalidJob, match="dedupe scope must be 'forever', 'active' or a period")
    with qdb.producer() as producer, refused:
        producer.enqueue("test.record", dedupe_key="k", dedupe_scope="until-done")
    assert qdb.scalar("SELECT COUNT(*) FROM mysqlq_jobs") == 0


def test_transactions_and_caller_connections_take_a_dedupe_scope(qdb: QueueDB) -> None:
    with qdb.producer() as producer:
        with producer.transaction() as tx:
            in_tx = tx.enqueue("test.record", dedupe_key="tx", dedupe_scope="active")
        conn = qdb.connect()
        try:
            on_conn = enqueue_on(conn, Job("test.record", dedupe_key="conn", dedupe_scope="active"), qdb.settings())
            conn.commit()
        finally:
            conn.close()
        assert claim_next(qdb) == 2
        assert run_store(qdb, lambda cur: claims.complete_batch(cur, 7)) == 2
        assert producer.enqueue("test.record", dedupe_key="tx", dedupe_scope="active") not in (in_tx, on_conn)
        assert producer.enqueue("test.record", dedupe_key="conn", dedupe_scope="active") not in (in_tx, on_conn)
    assert qdb.scalar("SELECT COUNT(*) FROM mysqlq_jobs WHERE status = 'ready'") == 2
