"""What an enqueue costs the server (statements per job) and what a bulk insert writes, byte for byte."""

from __future__ import annotations

from datetime import datetime, timedelta
from typing import Any

import pytest

from mysqlq import InvalidJob, Job, enqueue_on
from mysqlq.producer.enqueue import BULK_BYTES, BULK_CHUNK
from mysqlq.store.jobs import MAX_SHAPES

from ..conftest import QueueDB


def session_counters(producer: Any) -> dict[str, int]:
    """The statement counters of the producer's connections, summed: its pool's and its group commit's
    (plain enqueues go out on the latter), each opened first if it is not yet, the SHOWs of these
    readings left out. Only for a producer used by one thread at a time."""
    with producer.pool.database():  # opened now, not by the work measured (its schema check would count)
        pass
    if not producer.grouped._idle:
        producer.grouped._idle.append(producer.grouped._connection())
    found: dict[str, int] = {}
    for db in [*producer.pool._idle, *producer.grouped._idle]:
        shows = getattr(db.conn, "_counted", 0) + 1
        db.conn._counted = shows
        with db.conn.cursor() as cur:
            cur.execute("SHOW SESSION STATUS WHERE Variable_name IN ('Questions', 'Com_insert', 'Com_select')")
            for name, value in cur.fetchall():
                found[name] = found.get(name, 0) + int(value) - (shows if name == "Questions" else 0)
    return found


def test_a_single_enqueue_is_one_statement(qdb: QueueDB) -> None:
    with qdb.producer() as producer:
        producer.enqueue("test.record")  # connects and checks the schema once
        before = session_counters(producer)
        ids = [producer.enqueue("test.record", {"n": n}, dedupe_key=f"k{n % 5}") for n in range(20)]
        after = session_counters(producer)
    assert after["Questions"] - before["Questions"] == 20
    assert after["Com_insert"] - before["Com_insert"] == 20
    assert after["Com_select"] == before["Com_select"]  # no id read back, no schema check per job
    assert ids[5:10] == ids[:5] and len(set(ids)) == 5  # a taken key still answers with its job's id


def test_a_period_key_is_taken_in_the_enqueues_transaction_and_a_held_one_costs_one_statement(qdb: QueueDB) -> None:
    """A new job takes its key (one INSERT … ON DUPLICATE KEY UPDATE), is inserted, and names itself
    the key's holder; a held key is that first statement alone, which changes nothing."""
    with qdb.producer() as producer:
        producer.enqueue("test.record")
        before = session_counters(producer)
        first = producer.enqueue("test.record", dedupe_key="k", dedupe_scope="10m")
        middle = session_counters(producer)
        assert producer.enqueue("test.record", dedupe_key="k", dedupe_scope="10m") == first
        after = session_counters(producer)
    assert middle["Questions"] - before["Questions"] == 5  # BEGIN, take, insert, hold, COMMIT
    assert middle["Com_insert"] - before["Com_insert"] == 2
    assert after["Questions"] - middle["Questions"] == 3  # BEGIN, take, COMMIT
    assert after["Com_insert"] - middle["Com_insert"] == 1
    assert after["Com_select"] == before["Com_select"]


def test_a_bulk_enqueue_is_one_insert_per_chunk_in_one_transaction(qdb: QueueDB) -> None:
    jobs = [Job("test.record", {"i": i}) for i in range(2 * BULK_CHUNK + 1)]
    with qdb.producer() as producer:
        producer.enqueue("test.record")
        before = session_counters(producer)
        assert producer.enqueue_many(jobs) == len(jobs)
        after = session_counters(producer)
    assert after["Com_insert"] - before["Com_insert"] == 3
    assert after["Questions"] - before["Questions"] == 3 + 2  # the inserts, BEGIN and COMMIT


AWKWARD = ["%s", "%(x)s", "100%", "it's", 'say "hi"', "back\\slash", "nul\x00byte", "ünï©ødé ✓", "line\nbreak"]


def test_rendered_rows_store_exactly_what_the_drivers_binding_stores(qdb: QueueDB) -> None:
    """Every column of every job, whatever its mix of options and awkward characters (fairness keys
    too), is stored the same by enqueue and enqueue_many (rendered from cached templates) as by
    enqueue_on (bound by the driver, on the caller's connection)."""
    run_at = datetime(2031, 5, 6, 7, 8, 9, 123456)
    options: list[dict[str, Any]] = []
    for n, text in enumerate(AWKWARD):
        options.append({"payload": {"text": text, "n": n}, "queue": f"q{text}"[:100].replace("\n", " ")
                        .replace("\x00", " ").strip() or "q", "priority": n - 4, "max_attempts": n + 1,
                        "time_limit": n + 0.5 if n % 2 else None, "dedupe_key": f"key {text}",
                        "dedupe_scope": "active" if n % 2 else "forever",
                        "run_at": run_at + timedelta(seconds=n) if n % 3 == 0 else None,
                        "delay": 30 + n / 1000 if n % 3 == 1 else 0,
                        "fairness_key": f"tenant {text}" if text.isprintable() and n % 2 == 0 else None})
    # run_at as given, or else as microseconds after enqueued_at (both from the server's clock)
    columns = ("queue, handler, payload, status, priority, IF(run_at > '2030-01-01', run_at, NULL), "
               "IF(run_at > '2030-01-01', NULL, TIMESTAMPDIFF(MICROSECOND, enqueued_at, run_at)), max_attempts, "
               "time_limit, dedupe_key, dedupe_scope, fairness_key, turn < 18446744073709551615")
    # In the order of the options (each has its own priority): enqueue_many inserts its keyed jobs last.
    conn = qdb.connect()
    for option in options:
        enqueue_on(conn, Job("test.record", **option))
    conn.close()
    bound = qdb.query(f"SELECT {columns} FROM mysqlq_jobs ORDER BY priority")
    qdb.query("DELETE FROM mysqlq_jobs")
    with qdb.producer() as producer:
        for option in options:
            producer.enqueue("test.record", **option)
        single = qdb.query(f"SELECT {columns} FROM mysqlq_jobs ORDER BY priority")
        qdb.query("DELETE FROM mysqlq_jobs")
        assert producer.enqueue_many([Job("test.record", **option) for option in options]) == len(options)
    bulk = qdb.query(f"SELECT {columns} FROM mysqlq_jobs ORDER BY priority")
    assert single == bound and bulk == bound
    assert [row[5:7] for row in bound[:3]] == [(run_at, None), (None, 30_001_000), (None, 0)]
    assert bound[1][2] == b'{"text":"%(x)s","n":1}' and bound[1][0] == "q%(x)s"


def test_bulk_delay_is_counted_from_the_servers_clock(qdb: QueueDB) -> None:
    with qdb.producer() as producer:
        producer.enqueue_many([Job("test.record", delay=600), Job("test.record")])
    rows = qdb.query("SELECT status, TIMESTAMPDIFF(SECOND, enqueued_at, run_at) FROM mysqlq_jobs ORDER BY id")
    assert rows == [("scheduled", 600), ("ready", 0)]


def test_a_bad_job_in_a_later_chunk_rolls_back_the_chunks_already_sent(qdb: QueueDB) -> None:
    jobs = [Job("test.record", {"i": i}) for i in range(2 * BULK_CHUNK + 10)]
    jobs[2 * BULK_CHUNK + 3] = Job("test.record", priority=70000)
    seen: list[int] = []
    with qdb.producer() as producer:
        with pytest.raises(InvalidJob, match=rf"^item {2 * BULK_CHUNK + 3}: priority must be"):
            producer.enqueue_many(jobs, progress=seen.append)
        assert qdb.statuses() == {}
        assert producer.enqueue("test.record") > 0  # the connection is usable afterwards
        assert producer.enqueue_many(jobs[:5], progress=seen.append) == 5
    assert qdb.statuses() == {"ready": 6}
    assert seen[-1] == 5


def test_progress_hears_of_every_chunk(qdb: QueueDB) -> None:
    seen: list[int] = []
    with qdb.producer() as producer:
        producer.enqueue_many([Job("test.record") for _ in range(BULK_CHUNK + 7)], progress=seen.append)
    assert seen == [BULK_CHUNK, 7]


def test_more_distinct_job_options_than_the_renderer_keeps_are_all_stored(qdb: QueueDB) -> None:
    priorities = [n - MAX_SHAPES for n in range(MAX_SHAPES * 2 + 10)]
    with qdb.producer() as producer:
        producer.enqueue_many([Job("test.record", priority=p) for p in priorities])
        singles = [producer.enqueue("test.record", priority=p, time_limit=p + MAX_SHAPES + 1) for p in priorities[:20]]
    stored = [row[0] for row in qdb.query("SELECT priority FROM mysqlq_jobs ORDER BY id")]
    assert stored == priorities + priorities[:20]
    limits = [row[0] for row in qdb.query("SELECT time_limit FROM mysqlq_jobs WHERE id >= %s ORDER BY id",
                                          (singles[0],))]
    assert limits == [p + MAX_SHAPES + 1 for p in priorities[:20]]


def test_big_payloads_in_bulk_stay_under_the_servers_packet_limit(qdb: QueueDB) -> None:
    packet = int(qdb.scalar("SELECT @@max_allowed_packet"))
    big = "x" * (BULK_BYTES // 8)
    count = packet // len(big) + 8  # more payload bytes than one statement may carry
    with qdb.producer() as producer:
        before = session_counters(producer)
        assert producer.enqueue_many([Job("test.record", {"big": big, "n": n}) for n in range(count)]) == count
        after = session_counters(producer)
    assert after["Com_insert"] - before["Com_insert"] >= count * len(big) // BULK_BYTES
    assert qdb.scalar("SELECT COUNT(*) FROM mysqlq_jobs WHERE LENGTH(payload) > %s", (len(big),)) == count


def test_without_keys_the_payload_is_stored_as_json_and_keys_add_no_statement(qdb: QueueDB) -> None:
    """Encryption at rest (docs/security.md) costs no statement: with keys or without, an enqueue is one
    INSERT and a bulk one an INSERT per chunk; without keys the payload's bytes are its JSON, as ever."""
    from mysqlq.core.encryption import Keyring

    stored = {}
    for keys in (None, Keyring([("k1", bytes(range(32)))])):
        qdb.query("DELETE FROM mysqlq_jobs")
        with qdb.producer(keys=keys) as producer:
            producer.enqueue("test.record")
            before = session_counters(producer)
            for n in range(10):
                producer.enqueue("test.record", {"n": n, "text": "ünï ✓"}, dedupe_key=f"k{n}")
            assert producer.enqueue_many([Job("test.record", {"i": i}) for i in range(5)]) == 5
            after = session_counters(producer)
        assert after["Questions"] - before["Questions"] == 10 + 3  # the bulk's INSERT, BEGIN, COMMIT
        assert after["Com_insert"] - before["Com_insert"] == 11 and after["Com_select"] == before["Com_select"]
        stored[keys is not None] = bytes(qdb.scalar("SELECT payload FROM mysqlq_jobs WHERE dedupe_key = 'k0'"))
    assert stored[False] == '{"n":0,"text":"ünï ✓"}'.encode()
    assert stored[True].startswith(b"mysqlq-enc:1:k1:")
