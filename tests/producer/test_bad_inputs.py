"""Inputs that used to escape as tracebacks: each is one line (CLI, exit 1) or InvalidJob, and writes nothing."""

from __future__ import annotations

import math
from typing import Any

import pytest

import mysqlq
from mysqlq.core.jobs import decode_payload

from ..conftest import QueueDB
from ..ops_fixtures import assert_one_line_error

DEEP = 100_000


def deep_list(depth: int) -> list[Any]:
    outer: list[Any] = []
    inner = outer
    for _ in range(depth - 1):
        inner.append([])
        inner = inner[0]
    return outer


def refused_by_the_cli(qdb: QueueDB, args: list[str], fragment: str, stdin: str = "") -> None:
    result = qdb.cli("enqueue", *args, stdin=stdin)
    assert_one_line_error(result, fragment)
    assert result.returncode == 1
    assert qdb.statuses() == {}


def refused_by_the_api(qdb: QueueDB, fragment: str, handler: str = "test.record", payload: Any = None,
                       **options: Any) -> None:
    with qdb.producer() as producer, pytest.raises(mysqlq.InvalidJob, match=fragment):
        producer.enqueue(handler, payload, **options)
    assert qdb.statuses() == {}


# ---------------------------------------------------------------------------- deep nesting


def test_cli_payload_nested_100000_deep(qdb: QueueDB) -> None:
    refused_by_the_cli(qdb, ["test.record", "-"], "payload is not valid JSON: nested too deeply",
                       stdin="[" * DEEP + "]" * DEEP)


def test_api_payload_nested_100000_deep(qdb: QueueDB) -> None:
    refused_by_the_api(qdb, "nested too deeply", payload=deep_list(DEEP))


def test_file_line_nested_100000_deep(qdb: QueueDB) -> None:
    path = qdb.tmp / "jobs.jsonl"
    path.write_text('{"handler": "test.record"}\n{"handler": "test.record", "payload": ' + "[" * DEEP + "]" * DEEP
                    + "}\n")
    assert_one_line_error(qdb.cli("enqueue", "--file", str(path)), "line 2: not valid JSON: nested too deeply")
    assert qdb.statuses() == {}


# ---------------------------------------------------------------------------- delays the schema cannot hold


@pytest.mark.parametrize("delay", ["inf", "nan", "-inf", "1e20"])
def test_cli_delay_out_of_range(qdb: QueueDB, delay: str) -> None:
    refused_by_the_cli(qdb, ["test.record", "{}", "--delay", delay], "delay must be a number of seconds >= 0")


@pytest.mark.parametrize("delay", [math.inf, math.nan, 1e20, 3e11, -1, "60", None])
def test_api_delay_out_of_range(qdb: QueueDB, delay: Any) -> None:
    refused_by_the_api(qdb, "delay must be a number of seconds >= 0 that ends before year 9999", delay=delay)


def test_a_delay_of_centuries_is_stored(qdb: QueueDB) -> None:
    with qdb.producer() as producer:
        job_id = producer.enqueue("test.record", delay=7000 * 365 * 86400)
    assert qdb.scalar("SELECT YEAR(run_at) FROM mysqlq_jobs WHERE id = %s", (job_id,)) > 9000


def test_api_run_at_before_the_schemas_range(qdb: QueueDB) -> None:
    import datetime

    refused_by_the_api(qdb, "run_at must be between", run_at=datetime.datetime(1, 1, 1))


def test_enqueue_many_with_a_bad_delay_writes_nothing(qdb: QueueDB) -> None:
    jobs = [mysqlq.Job("test.record", {"i": 1}), mysqlq.Job("test.record", {"i": 2}, delay=math.inf)]
    with qdb.producer() as producer, pytest.raises(mysqlq.InvalidJob, match="delay must be"):
        producer.enqueue_many(jobs)
    assert qdb.statuses() == {}


# ---------------------------------------------------------------------------- NaN and Infinity are not JSON


@pytest.mark.parametrize("text", ['{"x": NaN}', '[Infinity]', '-Infinity'])
def test_cli_payload_with_nan_or_infinity(qdb: QueueDB, text: str) -> None:
    refused_by_the_cli(qdb, ["--", "test.record", text], "payload is not valid JSON")


@pytest.mark.parametrize("value", [math.nan, math.inf, -math.inf])
def test_api_payload_with_nan_or_infinity(qdb: QueueDB, value: float) -> None:
    refused_by_the_api(qdb, "payload cannot be stored as JSON", payload={"x": [1, value]})


def test_enqueue_on_refuses_nan_and_writes_nothing(qdb: QueueDB) -> None:
    conn = qdb.connect()
    try:
        with pytest.raises(mysqlq.InvalidJob, match="payload cannot be stored as JSON"):
            mysqlq.enqueue_on(conn, mysqlq.Job("test.record", {"x": math.nan}))
        conn.commit()
    finally:
        conn.close()
    assert qdb.statuses() == {}


@pytest.mark.parametrize("stored", [b'{"x": NaN}', b"Infinity", b"[-Infinity]", b"[" * DEEP + b"]" * DEEP,
                                    b"\xff{}", b"{", b"", b"  ", b"1 2", b'{"a":1}x', b" [NaN] "])
def test_decode_payload_refuses_what_is_not_json(stored: bytes) -> None:
    # The worker's decode: a job whose stored payload is any of these is dead at once as invalid JSON.
    with pytest.raises(ValueError):
        decode_payload(stored)


def test_decode_payload_reads_json() -> None:
    assert decode_payload('{"a":[1,2.5,"é",null,true]}'.encode()) == {"a": [1, 2.5, "é", None, True]}
    assert decode_payload(b"1e400") == math.inf  # a number too large for a float is JSON; NaN is not
    # Whitespace around the value (not how mysqlq writes it) goes through the whole decoder, and is JSON.
    assert decode_payload(b' {"a": 1}\n') == {"a": 1}
    assert decode_payload(b"null") is None


# ---------------------------------------------------------------------------- enqueue_many given the wrong thing


@pytest.mark.parametrize(("given", "fragment"), [
    (42, "takes an iterable of mysqlq.Job, got int"),
    (None, "takes an iterable of mysqlq.Job, got NoneType"),
    ("test.record", "item 0 is str"),
    ([{"handler": "test.record"}], "item 0 is dict"),
    ([mysqlq.Job("test.record"), ("test.record", {})], "item 1 is tuple"),
])
def test_enqueue_many_given_something_else(qdb: QueueDB, given: Any, fragment: str) -> None:
    with qdb.producer() as producer, pytest.raises(mysqlq.InvalidJob, match=fragment):
        producer.enqueue_many(given)
    assert qdb.statuses() == {}


# ---------------------------------------------------------------------------- migrate against a newer schema


def test_migrate_refuses_a_newer_schema(qdb: QueueDB) -> None:
    qdb.query("INSERT INTO mysqlq_schema_version VALUES (999, NOW(6))")
    before = qdb.query("SELECT version FROM mysqlq_schema_version ORDER BY version")
    result = qdb.cli("migrate")
    assert_one_line_error(result, "the schema is at version 999, newer than this mysqlq knows")
    assert result.returncode == 1
    assert "up to date" not in result.stdout
    assert qdb.query("SELECT version FROM mysqlq_schema_version ORDER BY version") == before


def test_a_stored_payload_saying_nan_is_dead_at_once(qdb: QueueDB) -> None:
    with qdb.producer() as producer:
        job_id = producer.enqueue("test.record", {"x": 1})
    qdb.query("UPDATE mysqlq_jobs SET payload = %s WHERE id = %s", (b'{"x": NaN}', job_id))
    qdb.cli("worker", "--burst", check=True)
    status, attempts, error = qdb.query("SELECT status, attempts, last_error FROM mysqlq_jobs WHERE id = %s",
                                        (job_id,))[0]
    assert (status, attempts) == ("dead", 1)
    assert "payload is not valid JSON" in error
    assert qdb.records() == []  # the handler never ran
