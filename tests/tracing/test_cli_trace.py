"""`mysqlq enqueue` continues the trace it was handed: the ``TRACEPARENT`` (and ``TRACESTATE``) of its
environment, the convention of otel-cli and CI systems, is stored with the jobs it enqueues; under
OpenTelemetry's SDK (here set up by a ``sitecustomize`` module, as ``opentelemetry-instrument`` does)
the jobs are enqueued in a PRODUCER span ``create <queue>``, a child of that trace, and store it.
Without OpenTelemetry the CLI reads the variable and imports nothing of it."""

from __future__ import annotations

import json
import subprocess
import sys

from ..conftest import QueueDB
from .test_tracing import context_of, print_spans, read_spans, span_named, traced_env

TRACE_ID = "0af7651916cd43dd8448eb211c80319c"
SPAN_ID = "b7ad6b7169203331"
TRACEPARENT = f"00-{TRACE_ID}-{SPAN_ID}-01"
TRACESTATE = "congo=t61rcWkgMzE, rojo=00f067aa0ba902b7"

# `mysqlq ARGS` in a process that says at its exit whether anything imported OpenTelemetry.
WATCHED_CLI = """
import atexit, sys
atexit.register(lambda: print("OTEL_IMPORTED", any(n.startswith("opentelemetry") for n in sys.modules),
                              file=sys.stderr))
sys.argv = ["mysqlq", *sys.argv[1:]]
from mysqlq.cli import main
main()
"""


def handed(env: dict[str, str], parent: str | None = TRACEPARENT, state: str | None = None) -> dict[str, str]:
    """``env`` handing down ``parent`` and ``state`` (None: not set, even if the caller's were)."""
    env = {name: value for name, value in env.items() if name not in ("TRACEPARENT", "TRACESTATE")}
    return env | ({"TRACEPARENT": parent} if parent is not None else {}) | ({"TRACESTATE": state} if state else {})


def stored(qdb: QueueDB, job_id: int) -> str | None:
    value = qdb.scalar("SELECT trace_context FROM mysqlq_jobs WHERE id = %s", (job_id,))
    return None if value is None else str(value)


def watched_cli(qdb: QueueDB, env: dict[str, str], *args: str) -> subprocess.CompletedProcess[str]:
    done = subprocess.run([sys.executable, "-c", WATCHED_CLI, *args], env=env, capture_output=True, text=True,
                          timeout=60)
    assert done.returncode == 0, done.stderr
    return done


def test_the_handed_down_traceparent_and_tracestate_are_stored_and_opentelemetry_is_not_imported(
        qdb: QueueDB) -> None:
    env = handed(qdb.env(), TRACEPARENT, TRACESTATE)
    done = watched_cli(qdb, env, "enqueue", "test.record", '{"n": 1}')
    assert "OTEL_IMPORTED False" in done.stderr and "warning" not in done.stderr
    job_id = int(done.stdout)
    assert stored(qdb, job_id) == f"{TRACEPARENT} congo=t61rcWkgMzE,rojo=00f067aa0ba902b7"
    jobs = qdb.tmp / "jobs.jsonl"
    jobs.write_text('{"handler": "test.record", "payload": 1}\n{"handler": "test.record", "queue": "other"}\n')
    done = watched_cli(qdb, handed(qdb.env()), "enqueue", "--file", str(jobs))
    assert "OTEL_IMPORTED False" in done.stderr
    assert qdb.scalar("SELECT COUNT(*) FROM mysqlq_jobs WHERE trace_context = %s", (TRACEPARENT,)) == 2
    # The worker's first run of such a job is a child of the handed-down span.
    spans_file = qdb.tmp / "spans.jsonl"
    qdb.worker(env=traced_env(qdb, spans_file, "worker"))
    qdb.wait_done(2, timeout=60)
    qdb.wait_for(lambda: span_named(read_spans(spans_file), "process default"), timeout=10, what="the run's span")
    (run,) = span_named(read_spans(spans_file), "process default", **{"messaging.message.id": str(job_id)})
    assert run["context"]["trace_id"] == f"0x{TRACE_ID}" and run["parent_id"] == f"0x{SPAN_ID}"


def test_an_invalid_traceparent_is_ignored_with_a_warning_and_the_job_enqueued(qdb: QueueDB) -> None:
    for wrong in ("00-0af7651916cd43dd8448eb211c80319c-0000000000000000-01",  # a zero span id
                  "ff-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01",  # version ff
                  "00-0AF7651916CD43DD8448EB211C80319C-b7ad6b7169203331-01",  # upper case
                  "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01-extra",  # version 00 has 4 fields
                  "garbage"):
        done = qdb.cli("enqueue", "test.record", env=handed(qdb.env(), wrong, TRACESTATE))
        assert done.returncode == 0, done.stderr
        assert done.stderr.strip().splitlines() == [f"warning: TRACEPARENT is not a W3C traceparent, ignored: "
                                                    f"{wrong!r}"]
        assert stored(qdb, int(done.stdout)) is None
    done = qdb.cli("enqueue", "test.record", env=handed(qdb.env(), TRACEPARENT, "congo=t61rcWkgMzE,NOT VALID"))
    assert done.returncode == 0 and done.stderr.strip().splitlines() == [
        "warning: TRACESTATE is not a W3C tracestate, ignored: 'congo=t61rcWkgMzE,NOT VALID'"]
    assert stored(qdb, int(done.stdout)) == TRACEPARENT  # the traceparent alone
    done = qdb.cli("enqueue", "test.record", env=handed(qdb.env(), None, TRACESTATE))  # a state alone: nothing
    assert done.returncode == 0 and not done.stderr.strip() and stored(qdb, int(done.stdout)) is None


def test_under_the_sdk_the_jobs_store_a_create_span_that_is_a_child_of_the_handed_down_span(qdb: QueueDB) -> None:
    spans_file = qdb.tmp / "spans.jsonl"
    env = handed(traced_env(qdb, spans_file, "shop-script"), TRACEPARENT, TRACESTATE)
    one = int(qdb.cli("enqueue", "test.record", "--queue", "mail", check=True, env=env).stdout)
    jobs = qdb.tmp / "jobs.jsonl"
    jobs.write_text("".join(json.dumps({"handler": "test.record", "payload": n}) + "\n" for n in range(3)))
    qdb.cli("enqueue", "--file", str(jobs), "--queue", "bulk", check=True, env=env)
    spans = read_spans(spans_file)
    print_spans("spans of mysqlq enqueue", spans)

    (create,) = span_named(spans, "create mail")
    trace_id, span_id = context_of(create)
    assert trace_id == f"0x{TRACE_ID}" and create["parent_id"] == f"0x{SPAN_ID}"
    assert create["kind"] == "SpanKind.PRODUCER" and create["status"]["status_code"] == "UNSET"
    assert create["attributes"] == {"messaging.system": "mysqlq", "messaging.operation.type": "create",
                                    "messaging.operation.name": "create", "messaging.destination.name": "mail",
                                    "messaging.message.id": str(one)}
    assert "{key=congo, value=t61rcWkgMzE}" in create["context"]["trace_state"]  # its parent's tracestate
    assert stored(qdb, one) == f"00-{TRACE_ID}-{span_id[2:]}-01 congo=t61rcWkgMzE,rojo=00f067aa0ba902b7"

    (batch,) = span_named(spans, "create bulk")
    assert batch["parent_id"] == f"0x{SPAN_ID}" and batch["kind"] == "SpanKind.PRODUCER"
    assert batch["attributes"]["messaging.batch.message_count"] == 3
    assert "messaging.message.id" not in batch["attributes"]
    assert qdb.scalar("SELECT COUNT(DISTINCT trace_context) FROM mysqlq_jobs WHERE queue = 'bulk'") == 1
    assert qdb.scalar("SELECT MIN(trace_context) FROM mysqlq_jobs WHERE queue = 'bulk'") == \
        f"00-{TRACE_ID}-{context_of(batch)[1][2:]}-01 congo=t61rcWkgMzE,rojo=00f067aa0ba902b7"


def test_under_the_sdk_without_a_traceparent_the_create_span_starts_a_trace(qdb: QueueDB) -> None:
    spans_file = qdb.tmp / "spans.jsonl"
    job_id = int(qdb.cli("enqueue", "test.record", check=True,
                         env=handed(traced_env(qdb, spans_file, "shop-script"), None)).stdout)
    (create,) = span_named(read_spans(spans_file), "create default")
    trace_id, span_id = context_of(create)
    assert create["parent_id"] is None and create["resource"]["attributes"]["service.name"] == "shop-script"
    assert (stored(qdb, job_id) or "").startswith(f"00-{trace_id[2:]}-{span_id[2:]}-")  # then its flags


def test_under_the_sdk_a_failed_enqueue_ends_its_span_failed(qdb: QueueDB) -> None:
    spans_file = qdb.tmp / "spans.jsonl"
    done = qdb.cli("enqueue", "test.record", "{not json", env=handed(traced_env(qdb, spans_file, "shop-script")))
    assert done.returncode != 0 and "payload is not valid JSON" in done.stderr
    (create,) = span_named(read_spans(spans_file), "create default")
    assert create["parent_id"] == f"0x{SPAN_ID}" and create["status"]["status_code"] == "ERROR"
    assert "messaging.message.id" not in create["attributes"]
    assert qdb.scalar("SELECT COUNT(*) FROM mysqlq_jobs") == 0
