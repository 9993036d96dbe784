"""Payloads, results and errors encrypted at rest: with keys, every way of enqueueing writes the payload
sealed (AES-256-GCM, bound to its queue and handler), the worker hands handlers plain values and
writes results and errors sealed (bound to the job's id); a value moved to another job is refused; a
worker without the key does not run the job, says which key it lacks, and leaves it to be retried;
`mysqlq keys rotate` moves waiting jobs to the newest key; readers without the keys see no secret."""

from __future__ import annotations

import base64
import json
import os
import pathlib
from typing import Any

import pytest
from mysqlq_harness.jobs import EVERY_JOB

from mysqlq import Job, enqueue_on
from mysqlq.core.encryption import EncryptedValue
from mysqlq.core.keyfile import read_keys
from mysqlq.web import WebSettings, create_app

from ..conftest import QueueDB

SECRET = "card 4111-1111-1111-1111"
K1 = base64.b64encode(bytes(range(32))).decode()
K2 = base64.b64encode(bytes(range(32, 64))).decode()


def keys_file(qdb: QueueDB, name: str, *lines: str) -> pathlib.Path:
    """A keys file of ``lines`` ('<id> <base64 key>'), readable by its owner only."""
    path = qdb.tmp / name
    path.write_text("".join(line + "\n" for line in lines))
    path.chmod(0o600)
    return path


def with_keys(qdb: QueueDB, path: pathlib.Path | None) -> dict[str, str]:
    """The environment of a `mysqlq` command with these keys (None: none)."""
    return qdb.env(MYSQLQ_ENCRYPTION_KEYS_FILE=str(path)) if path else qdb.env()


def raw(qdb: QueueDB, column: str, job_id: int) -> Any:
    value = qdb.scalar(f"SELECT {column} FROM {EVERY_JOB} WHERE id = %s", (job_id,))
    return bytes(value) if isinstance(value, bytes | bytearray) else value


def burst(qdb: QueueDB, keys: pathlib.Path | None, *args: str) -> None:
    result = qdb.cli("worker", "--burst", "--retry-base", "0.05", *args, env=with_keys(qdb, keys))
    assert result.returncode == 0, result.stderr


def test_every_way_of_enqueueing_writes_the_payload_sealed_and_handlers_see_it_plain(qdb: QueueDB) -> None:
    k1 = keys_file(qdb, "keys", f"k1 {K1}")
    keys = read_keys(k1, "test")
    value = {"secret": SECRET}
    with qdb.producer(keys=keys) as producer:
        ids = [producer.enqueue("test.echo", {"value": value}),
               producer.enqueue("test.echo", {"value": value}, tags=["t"], fairness_key="tenant")]
        producer.enqueue_many([Job("test.echo", {"value": value}), Job("test.echo", {"value": value}, tags=["t"])])
        with producer.transaction() as tx:
            tx.enqueue("test.echo", {"value": value})
        chain = producer.chain(Job("test.echo", {"value": value}), Job("test.echo", {"value": value}))
    conn = qdb.connect()
    enqueue_on(conn, Job("test.echo", {"value": value}), qdb.settings(keys=keys))
    conn.close()
    qdb.cli("enqueue", "test.echo", json.dumps({"value": value}), env=with_keys(qdb, k1), check=True)
    payloads = [bytes(row[0]) for row in qdb.query("SELECT payload FROM mysqlq_jobs ORDER BY id")]
    assert len(payloads) == 9 and chain
    assert all(payload.startswith(b"mysqlq-enc:1:k1:") and b"4111" not in payload for payload in payloads)

    burst(qdb, k1)
    results = [bytes(row[0]) for row in qdb.query(f"SELECT result FROM {EVERY_JOB} ORDER BY id")]
    assert all(result.startswith(b"mysqlq-enc:1:k1:") and b"4111" not in result for result in results)
    with qdb.producer(keys=keys) as producer:
        states = [producer.job(job_id) for job_id in ids]
    assert [(state.status, state.result, state.payload) for state in states if state] == \
        [("done", value, {"value": value})] * 2


def test_results_and_errors_are_sealed_and_bound_to_their_job(qdb: QueueDB) -> None:
    k1 = keys_file(qdb, "keys", f"k1 {K1}")
    keys = read_keys(k1, "test")
    with qdb.producer(keys=keys) as producer:
        failing = producer.enqueue("test.fail", {"n": 1}, max_attempts=1)
        done = [producer.enqueue("test.echo", {"value": n}) for n in ("first", "second")]
    burst(qdb, k1)
    error = raw(qdb, "last_error", failing)
    assert error.startswith("mysqlq-enc:1:k1:") and "boom" not in error
    with qdb.producer(keys=keys) as producer:
        state = producer.job(failing)
        assert state is not None and state.status == "dead"
        assert (state.error or "").startswith("ValueError: boom on attempt 1")
    with qdb.producer(keys=None) as keyless:
        state = keyless.job(failing)
        assert state is not None and state.error == "(encrypted with key k1)"
        with pytest.raises(EncryptedValue, match="result is encrypted with key k1, which this process does not have"):
            keyless.job(done[0]).result  # noqa: B018
    # A result copied onto another job does not open there.
    qdb.query(f"UPDATE mysqlq_jobs_history h JOIN {EVERY_JOB} ON every_job.id = %s SET h.result = every_job.result "
              "WHERE h.id = %s", (done[0], done[1]))
    with qdb.producer(keys=keys) as producer:
        state = producer.job(done[1])
        assert state is not None
        with pytest.raises(EncryptedValue, match="result is encrypted with key k1"):
            state.result  # noqa: B018
        first = producer.job(done[0])
        assert first is not None and first.result == "first"


def test_a_payload_moved_to_another_job_is_refused_not_run(qdb: QueueDB) -> None:
    k1 = keys_file(qdb, "keys", f"k1 {K1}")
    keys = read_keys(k1, "test")
    with qdb.producer(keys=keys) as producer:
        source = producer.enqueue("test.echo", {"value": SECRET}, delay=3600)
        other_handler = producer.enqueue("test.record", {"tag": "mine"}, max_attempts=1)
        other_queue = producer.enqueue("test.echo", {"value": "x"}, queue="other", max_attempts=1)
    for target in (other_handler, other_queue):
        qdb.query("UPDATE mysqlq_jobs AS t JOIN (SELECT payload FROM mysqlq_jobs WHERE id = %s) AS s "
                  "SET t.payload = s.payload WHERE t.id = %s", (source, target))
    burst(qdb, k1, "--queue", "default,other")
    assert qdb.records() == []  # test.record never ran
    for target in (other_handler, other_queue):
        assert raw(qdb, "status", target) == "dead"
        error = raw(qdb, "last_error", target)
        assert error.startswith("payload encrypted with key k1 does not authenticate: it was moved from another job")
        assert raw(qdb, "result", target) is None
    assert raw(qdb, "status", source) == "scheduled"


def test_a_worker_without_the_key_does_not_run_the_job_and_names_the_key(qdb: QueueDB) -> None:
    k1 = keys_file(qdb, "k1", f"k1 {K1}")
    k2 = keys_file(qdb, "k2", f"k2 {K2}")
    with qdb.producer(keys=read_keys(k2, "test")) as producer:
        job_id = producer.enqueue("test.record", {"tag": "secret"}, max_attempts=5)
    for keys in (k1, None):  # a worker with other keys, and one with none at all
        qdb.query("UPDATE mysqlq_jobs SET run_at = NOW(6), status = 'ready', scheduled_at = NULL WHERE id = %s",
                  (job_id,))
        burst(qdb, keys, "--retry-base", "600")  # its retry is not due before the burst ends
        assert raw(qdb, "status", job_id) == "scheduled"  # retried as usual, not run, not lost
        error = raw(qdb, "last_error", job_id)
        assert error.startswith("payload is encrypted with key k2, which this process does not have"), error
        assert error.endswith("not run")
    assert qdb.records() == []
    assert raw(qdb, "attempts", job_id) == 2
    qdb.query("UPDATE mysqlq_jobs SET run_at = NOW(6), status = 'ready', scheduled_at = NULL WHERE id = %s", (job_id,))
    both = keys_file(qdb, "both", f"k1 {K1}", f"k2 {K2}")
    burst(qdb, both)  # a worker that has the key takes it
    assert raw(qdb, "status", job_id) == "done"
    assert [record[-1] for record in qdb.records()] == ["secret"]


def test_rotation_moves_waiting_jobs_to_the_newest_key_so_the_old_one_can_go(qdb: QueueDB) -> None:
    k1 = keys_file(qdb, "k1", f"k1 {K1}")
    with qdb.producer(keys=read_keys(k1, "test")) as producer:
        ready = producer.enqueue("test.record", {"tag": "ready"})
        later = producer.enqueue("test.record", {"tag": "later"}, delay=0.5)
        old_run = producer.enqueue("test.record", {"tag": "old"}, queue="first")
    with qdb.producer(keys=None) as producer:
        plain = producer.enqueue("test.record", {"tag": "plain"})
    both = keys_file(qdb, "both", f"k1 {K1}", f"k2 {K2}")
    burst(qdb, both, "--queue", "first")  # an older key still opens: k1's job runs under k1 + k2
    assert raw(qdb, "status", old_run) == "done"
    rotated = qdb.cli("keys", "rotate", env=with_keys(qdb, both), check=True).stdout
    assert rotated.startswith("re-encrypted 3 job(s) with key k2; 0 already were")
    for job_id in (ready, later, plain):
        payload = raw(qdb, "payload", job_id)
        assert payload.startswith(b"mysqlq-enc:1:k2:") and b"ready" not in payload
    again = qdb.cli("keys", "rotate", env=with_keys(qdb, both), check=True).stdout
    assert again.startswith("re-encrypted 0 job(s) with key k2; 3 already were")
    only_k2 = keys_file(qdb, "k2", f"k2 {K2}")  # the old key dropped
    qdb.query("UPDATE mysqlq_jobs SET run_at = NOW(6), status = 'ready', scheduled_at = NULL WHERE id = %s", (later,))
    burst(qdb, only_k2)
    assert {record[-1] for record in qdb.records()} == {"old", "ready", "later", "plain"}
    assert qdb.statuses() == {"done": 4}


def test_rotation_leaves_a_job_claimed_meanwhile_alone(qdb: QueueDB) -> None:
    from mysqlq.store import encryption as store

    k1 = keys_file(qdb, "k1", f"k1 {K1}")
    with qdb.producer(keys=read_keys(k1, "test")) as producer:
        taken = producer.enqueue("test.record", {"tag": "taken"})
        waiting = producer.enqueue("test.record", {"tag": "waiting"})
    keys = read_keys(keys_file(qdb, "both", f"k1 {K1}", f"k2 {K2}"), "test")
    conn = qdb.connect()
    try:
        with conn.cursor() as cur:
            rows = store._read(cur, 0, 10)
        writes = [store._resealed(keys, int(r[0]), str(r[1]), str(r[2]), bytes(r[3]), r[4]) for r in rows]
        # A worker claims one between the read and the write: the fenced write leaves it alone.
        qdb.query("UPDATE mysqlq_jobs SET status = 'running', running_batch = 7, batch_id = 7 WHERE id = %s",
                  (taken,))
        assert store._write(conn, [write for write in writes if write]) == 1
    finally:
        conn.close()
    assert raw(qdb, "payload", taken).startswith(b"mysqlq-enc:1:k1:")
    assert raw(qdb, "payload", waiting).startswith(b"mysqlq-enc:1:k2:")


def test_jobs_show_the_dashboard_and_metrics_print_no_secret_without_the_keys(qdb: QueueDB) -> None:
    k1 = keys_file(qdb, "keys", f"k1 {K1}")
    keys = read_keys(k1, "test")
    with qdb.producer(keys=keys) as producer:
        done = producer.enqueue("test.echo", {"value": SECRET})
        dead = producer.enqueue("test.fail", {"value": SECRET}, max_attempts=1)
    burst(qdb, k1)
    for job_id in (done, dead):
        shown = qdb.cli("jobs", "show", str(job_id), check=True).stdout
        assert "4111" not in shown and "boom" not in shown and "(encrypted with key k1)" in shown
        as_json = json.loads(qdb.cli("jobs", "show", str(job_id), "--json", check=True).stdout)
        assert as_json["payload"] == "(encrypted with key k1)"
    listed = qdb.cli("jobs", "list", check=True).stdout
    assert "boom" not in listed and "mysqlq-enc" not in listed and "(encrypted with key k1)" in listed
    client = create_app(WebSettings(qdb.settings(keys=None))).test_client()
    pages = [client.get(path).get_data(as_text=True) for path in
             (f"/jobs/{done}", f"/jobs/{dead}", "/jobs", "/metrics", "/")]
    assert not any("4111" in page or "boom" in page or "mysqlq-enc" in page for page in pages)
    assert "(encrypted with key k1)" in pages[0] and "(encrypted with key k1)" in pages[2]
    # A holder of the keys reads them.
    shown = qdb.cli("jobs", "show", str(dead), env=with_keys(qdb, k1), check=True).stdout
    assert SECRET in shown and "ValueError: boom on attempt 1" in shown
    page = create_app(WebSettings(qdb.settings(keys=keys))).test_client().get(f"/jobs/{done}").get_data(as_text=True)
    assert SECRET in page


@pytest.mark.parametrize(("content", "mode", "message"), [
    (f"k1 {K1}\nk2\n", 0o600, "line 2: expected '<key id> <base64 key>'"),
    ("k1 " + base64.b64encode(b"short").decode() + "\n", 0o600, "line 1: key k1 is 5 bytes; AES-256 needs 32"),
    (f"k1 {K1}\nk1 {K2}\n", 0o600, "line 2: key id k1 is given twice"),
    (f"k1 {K1}\n", 0o644, "may be read by others (mode 0644)"),
    ("k1 not-base64!\n", 0o600, "line 1: key k1 is not base64"),
    ("# only a comment\n", 0o600, "holds no key"),
])
def test_a_bad_keys_file_is_refused_at_start_in_one_line(qdb: QueueDB, content: str, mode: int,
                                                         message: str) -> None:
    path = qdb.tmp / "bad-keys"
    path.write_text(content)
    os.chmod(path, mode)
    for command in (["worker", "--burst"], ["jobs", "list"], ["enqueue", "test.record"]):
        result = qdb.cli(*command, env=with_keys(qdb, path))
        assert result.returncode == 1
        lines = result.stderr.strip().splitlines()
        assert len(lines) == 1 and message in lines[0] and K1 not in lines[0], result.stderr
    assert qdb.scalar("SELECT COUNT(*) FROM mysqlq_jobs") == 0


def test_keys_generate_prints_a_line_the_keys_file_takes(qdb: QueueDB) -> None:
    lines = [qdb.cli("keys", "generate", *args, check=True).stdout.strip() for args in ((), ("--id", "2027-a"))]
    path = keys_file(qdb, "generated", *lines)
    keys = read_keys(path, "test")
    assert keys.newest == "2027-a" and len(keys.ids) == 2 and keys.ids[0].startswith("k")
    assert lines[0] != lines[1] and lines[0].split()[1] not in repr(keys)
