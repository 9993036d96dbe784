"""Traces from the producer to the handler: a producer process and a worker process, each with the
OpenTelemetry SDK set up as ``opentelemetry-instrument`` would (before the program starts: here a
``sitecustomize`` module) and exporting every span to a file, read back here.

One trace runs from the producer's span through the worker's ``process <queue>`` span to the
handler's own span; a retry starts a trace of its own, linked to the enqueueing span; the claim is a
``receive`` span; a workflow's jobs all join the producer's trace, and a callback's (or a chain's next
step's) span links to the spans its parents ran in. Without OpenTelemetry nothing is stored and
neither the producer nor the worker imports it."""

from __future__ import annotations

import itertools
import json
import os
import pathlib
import subprocess
import sys
from typing import Any

import pytest
from mysqlq_harness.jobs import EVERY_JOB

from ..conftest import QueueDB, unavailable

DJANGO_PROJECT = pathlib.Path(__file__).parent.parent / "django_project"

try:
    import django
except ImportError:  # pragma: no cover - the dev extra installs it
    django = None

# What `opentelemetry-instrument` does before a program starts, with the SDK's console exporter
# writing one JSON span a line to the file named in $TEST_SPANS.
SITECUSTOMIZE = """
import os

if os.environ.get("TEST_SPANS"):
    from opentelemetry import trace
    from opentelemetry.sdk.resources import Resource
    from opentelemetry.sdk.trace import TracerProvider
    from opentelemetry.sdk.trace.export import ConsoleSpanExporter, SimpleSpanProcessor

    provider = TracerProvider(resource=Resource.create({"service.name": os.environ.get("OTEL_SERVICE_NAME", "")}))
    out = open(os.environ["TEST_SPANS"], "a", encoding="utf-8")
    provider.add_span_processor(SimpleSpanProcessor(ConsoleSpanExporter(
        out=out, formatter=lambda span: span.to_json(indent=None) + "\\n")))
    trace.set_tracer_provider(provider)
"""

# The producer: an application that enqueues inside a span of its own. Prints the job ids and the
# trace context current at enqueue.
PRODUCER = """
import json, os, sys
import mysqlq
from mysqlq import Job
from mysqlq.core.tracing import current_trace_context

settings = mysqlq.Settings(dsn=mysqlq.Dsn.parse(os.environ["MYSQLQ_DSN"]), hint_dir=os.environ["MYSQLQ_HINT_DIR"])
how, handler, payload = sys.argv[1], sys.argv[2], json.loads(sys.argv[3])
with mysqlq.Producer(settings) as producer:
    def enqueue():
        if how == "group":
            group = producer.group([Job(handler, payload) for _ in range(3)], then=Job(handler, payload))
            return [*group.members, group.callback]
        if how == "chain":
            return producer.chain(*[Job(handler, payload) for _ in range(3)])
        if how == "after":  # two jobs, each enqueued in a span of its own, then one after both (queue later)
            from opentelemetry import trace
            members = []
            for name in ("order a", "order b"):
                with trace.get_tracer("shop").start_as_current_span(name):
                    members.append(producer.enqueue(handler, payload))
            return [*members, producer.enqueue(handler, payload, after=members, queue="later")]
        return [producer.enqueue(handler, payload)]

    if os.environ.get("TEST_SPANS") or os.environ.get("TEST_API_SPAN"):
        from opentelemetry import trace
        with trace.get_tracer("shop").start_as_current_span("checkout"):
            ids = enqueue()
            context = current_trace_context()
    else:
        ids, context = enqueue(), current_trace_context()
print(json.dumps({"ids": ids, "context": context,
                  "otel": sorted(name for name in sys.modules if name.startswith("opentelemetry"))}))
"""

# The worker without OpenTelemetry: says at its exit whether anything imported it.
BARE_WORKER = """
import atexit, sys
atexit.register(lambda: print("OTEL_IMPORTED", any(n.startswith("opentelemetry") for n in sys.modules),
                              file=sys.stderr))
sys.argv = ["mysqlq", "worker", "--burst"]
from mysqlq.cli import main
main()
"""


def traced_env(qdb: QueueDB, spans: pathlib.Path, service: str) -> dict[str, str]:
    site = qdb.tmp / "site"
    site.mkdir(exist_ok=True)
    (site / "sitecustomize.py").write_text(SITECUSTOMIZE)
    path = os.pathsep.join(filter(None, [str(site), os.environ.get("PYTHONPATH")]))
    return qdb.env(PYTHONPATH=path, TEST_SPANS=str(spans), OTEL_SERVICE_NAME=service)


def produce(qdb: QueueDB, env: dict[str, str], handler: str, payload: Any, how: str = "one") -> dict[str, Any]:
    done = subprocess.run([sys.executable, "-c", PRODUCER, how, handler, json.dumps(payload)], env=env,
                          capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, done.stderr
    found: dict[str, Any] = json.loads(done.stdout.strip().splitlines()[-1])
    return found


def read_spans(path: pathlib.Path) -> list[dict[str, Any]]:
    return [json.loads(line) for line in path.read_text().splitlines() if line.strip()] if path.exists() else []


def span_named(spans: list[dict[str, Any]], name: str, **attributes: Any) -> list[dict[str, Any]]:
    return [span for span in spans if span["name"] == name
            and all(span["attributes"].get(key) == value for key, value in attributes.items())]


def context_of(span: dict[str, Any]) -> tuple[str, str]:
    return span["context"]["trace_id"], span["context"]["span_id"]


def print_spans(title: str, spans: list[dict[str, Any]]) -> None:
    """The spans of a run, shown with -s: names, ids, parents and links."""
    print(f"\n{title}")
    for span in spans:
        links = [(link["context"]["trace_id"][-8:], link["context"]["span_id"]) for link in span.get("links", [])]
        print(f"  {span['name']:<16} {span['kind']:<18} trace …{span['context']['trace_id'][-8:]} "
              f"span {span['context']['span_id']} parent {span['parent_id']} links {links} "
              f"status {span['status']['status_code']} "
              f"{ {k: v for k, v in span['attributes'].items() if k.startswith(('messaging', 'mysqlq'))} }")


def test_one_trace_runs_from_the_producers_span_through_the_worker_to_the_handlers_span(qdb: QueueDB) -> None:
    spans_file = qdb.tmp / "spans.jsonl"
    produced = produce(qdb, traced_env(qdb, spans_file, "shop"), "test.traced", {"n": 1})
    (job_id,) = produced["ids"]
    stored = qdb.scalar("SELECT trace_context FROM mysqlq_jobs WHERE id = %s", (job_id,))
    assert stored == produced["context"] and stored.startswith("00-")
    qdb.worker(env=traced_env(qdb, spans_file, "worker"))
    qdb.wait_done(1, timeout=30)
    qdb.wait_for(lambda: span_named(read_spans(spans_file), "work"), timeout=10, what="the handler's span")
    spans = read_spans(spans_file)
    print_spans("spans of one job", spans)

    (checkout,) = span_named(spans, "checkout")
    (process,) = span_named(spans, "process default")
    (work,) = span_named(spans, "work")
    (receive,) = span_named(spans, "receive default")
    trace_id, checkout_id = context_of(checkout)
    assert stored.startswith(f"00-{trace_id[2:]}-{checkout_id[2:]}-")  # then the flags: sampled
    # One trace: the producer's span, the worker's span of the job under it, the handler's under that.
    assert process["context"]["trace_id"] == work["context"]["trace_id"] == trace_id
    assert process["parent_id"] == checkout_id
    assert work["parent_id"] == process["context"]["span_id"]
    assert process["kind"] == "SpanKind.CONSUMER" and process["status"]["status_code"] == "UNSET"
    assert process["attributes"] == {
        "messaging.system": "mysqlq", "messaging.operation.type": "process", "messaging.operation.name": "process",
        "messaging.destination.name": "default", "messaging.message.id": str(job_id),
        "mysqlq.job.handler": "test.traced", "mysqlq.job.attempt": 1, "mysqlq.job.max_attempts": 5,
        "mysqlq.job.outcome": "done",
    } | ({"mysqlq.tags": process["attributes"]["mysqlq.tags"]} if "mysqlq.tags" in process["attributes"] else {})
    assert process["resource"]["attributes"]["service.name"] == "worker"
    # The claim: a span of the worker's own, linked to the span the job was enqueued in.
    assert receive["kind"] == "SpanKind.CLIENT" and receive["parent_id"] is None
    assert receive["attributes"]["messaging.batch.message_count"] == 1
    assert receive["attributes"]["messaging.system"] == "mysqlq"
    assert [context_of(link) for link in receive["links"]] == [(trace_id, checkout_id)]


def test_a_retry_starts_a_trace_of_its_own_linked_to_the_enqueueing_span(qdb: QueueDB) -> None:
    spans_file = qdb.tmp / "spans.jsonl"
    produced = produce(qdb, traced_env(qdb, spans_file, "shop"), "test.atraced", {"succeed_on": 2})
    (job_id,) = produced["ids"]
    qdb.worker(env=traced_env(qdb, spans_file, "worker"))
    qdb.wait_done(1, timeout=30)
    qdb.wait_for(lambda: len(span_named(read_spans(spans_file), "work")) == 2, timeout=10, what="two runs")
    spans = read_spans(spans_file)
    print_spans("spans of a job retried once", spans)

    (checkout,) = span_named(spans, "checkout")
    trace_id, checkout_id = context_of(checkout)
    (first,) = span_named(spans, "process default", **{"mysqlq.job.attempt": 1})
    (second,) = span_named(spans, "process default", **{"mysqlq.job.attempt": 2})
    assert first["parent_id"] == checkout_id and first["context"]["trace_id"] == trace_id
    assert first["attributes"]["mysqlq.job.outcome"] == "failed"
    assert first["attributes"]["error.type"] == "builtins.RuntimeError"
    assert first["status"]["status_code"] == "ERROR" and "not yet (attempt 1)" in first["status"]["description"]
    (event,) = first["events"]
    assert event["name"] == "exception" and event["attributes"]["exception.type"] == "RuntimeError"
    # The retry: a trace of its own, linked to the span the job was enqueued in.
    assert second["parent_id"] is None and second["context"]["trace_id"] != trace_id
    assert [context_of(link) for link in second["links"]] == [(trace_id, checkout_id)]
    assert second["attributes"]["mysqlq.job.outcome"] == "done"
    assert second["attributes"]["messaging.message.id"] == str(job_id)
    works = {work["parent_id"] for work in span_named(spans, "work")}
    assert works == {first["context"]["span_id"], second["context"]["span_id"]}  # the handler's spans nest


def test_a_run_past_its_time_limit_is_a_failed_span(qdb: QueueDB) -> None:
    spans_file = qdb.tmp / "spans.jsonl"
    produced = produce(qdb, traced_env(qdb, spans_file, "shop"), "test.traced", {"sleep": 1.5})
    (job_id,) = produced["ids"]
    # Two slots: the job runs on a thread, which is not stopped at the limit: recorded failed then.
    qdb.worker("--time-limit", "0.5", "--concurrency", "2", env=traced_env(qdb, spans_file, "worker"))
    qdb.wait_for(lambda: span_named(read_spans(spans_file), "process default", **{"mysqlq.job.attempt": 1}),
                 timeout=30, what="the first run's span")
    (run,) = span_named(read_spans(spans_file), "process default", **{"mysqlq.job.attempt": 1})
    assert run["status"]["status_code"] == "ERROR" and run["attributes"]["mysqlq.job.outcome"] == "failed"
    assert run["attributes"]["error.type"] == "mysqlq.core.errors.JobTimeout" and not run["events"]
    qdb.wait_for(lambda: "JobTimeout" in (qdb.scalar("SELECT last_error FROM mysqlq_jobs WHERE id = %s", (job_id,))
                                          or ""), timeout=30, what="the job recorded failed at its limit")


def stored_runs(qdb: QueueDB, ids: list[int]) -> dict[int, str | None]:
    """The run_trace_context of these jobs: the span each ran in, kept for the jobs that wait for it."""
    conn = qdb.connect()
    try:
        with conn.cursor() as cur:
            cur.execute(f"SELECT id, run_trace_context FROM {EVERY_JOB} WHERE id IN ({','.join(map(str, ids))})")
            return {int(job_id): context for job_id, context in cur.fetchall()}
    finally:
        conn.close()


def test_a_groups_callback_links_to_the_spans_its_members_ran_in(qdb: QueueDB) -> None:
    spans_file = qdb.tmp / "spans.jsonl"
    produced = produce(qdb, traced_env(qdb, spans_file, "shop"), "test.traced", {}, how="group")
    *members, callback = produced["ids"]
    qdb.worker("--concurrency", "2", env=traced_env(qdb, spans_file, "worker"))
    qdb.wait_done(4, timeout=30)
    qdb.wait_for(lambda: len(span_named(read_spans(spans_file), "work")) == 4, timeout=10, what="four runs")
    spans = read_spans(spans_file)
    print_spans("spans of a group of three and its callback", spans)
    (checkout,) = span_named(spans, "checkout")
    trace_id, checkout_id = context_of(checkout)
    processes = {span["attributes"]["messaging.message.id"]: span for span in span_named(spans, "process default")}
    assert set(processes) == {str(job_id) for job_id in [*members, callback]}
    # One trace: every run, the callback's too, a child of the span the group was enqueued in.
    assert {span["parent_id"] for span in processes.values()} == {checkout_id}
    assert {span["context"]["trace_id"] for span in processes.values()} == {trace_id}
    runs = [context_of(processes[str(member)]) for member in members]
    assert all(not processes[str(member)]["links"] for member in members)
    links = processes[str(callback)]["links"]
    assert sorted(context_of(link) for link in links) == sorted(runs)  # one link to each member's run
    assert {link["attributes"]["mysqlq.link"] for link in links} == {"parent_ran_in"}
    stored = stored_runs(qdb, [*members, callback])
    assert stored[callback] is None  # nothing waits for it: nothing kept
    for member, (run_trace, run_span) in zip(members, runs, strict=True):
        assert (stored[member] or "").startswith(f"00-{run_trace[2:]}-{run_span[2:]}-")


def test_a_chains_step_links_to_the_span_the_step_before_ran_in(qdb: QueueDB) -> None:
    spans_file = qdb.tmp / "spans.jsonl"
    steps = produce(qdb, traced_env(qdb, spans_file, "shop"), "test.traced", {}, how="chain")["ids"]
    qdb.worker(env=traced_env(qdb, spans_file, "worker"))
    qdb.wait_done(3, timeout=30)
    qdb.wait_for(lambda: len(span_named(read_spans(spans_file), "work")) == 3, timeout=10, what="three runs")
    spans = read_spans(spans_file)
    print_spans("spans of a chain of three", spans)
    runs = [span_named(spans, "process default", **{"messaging.message.id": str(step)})[0] for step in steps]
    assert not runs[0]["links"]
    for before, step in itertools.pairwise(runs):
        assert [context_of(link) for link in step["links"]] == [context_of(before)]
        assert step["links"][0]["attributes"]["mysqlq.link"] == "parent_ran_in"
    assert stored_runs(qdb, steps)[steps[-1]] is None


def test_a_job_after_others_run_untraced_links_to_the_spans_they_were_enqueued_in(qdb: QueueDB) -> None:
    spans_file = qdb.tmp / "spans.jsonl"
    produced = produce(qdb, traced_env(qdb, spans_file, "shop"), "test.traced", {}, how="after")
    first, second, callback = produced["ids"]
    # The two members run by a worker without OpenTelemetry: no span of their runs is kept.
    bare = qdb.worker("--burst", "--queue", "default")
    assert bare.wait(timeout=60) == 0
    assert stored_runs(qdb, [first, second]) == {first: None, second: None}
    qdb.worker("--queue", "later", env=traced_env(qdb, spans_file, "worker"))
    qdb.wait_done(3, timeout=30)
    qdb.wait_for(lambda: span_named(read_spans(spans_file), "work"), timeout=10, what="the callback's run")
    spans = read_spans(spans_file)
    print_spans("spans of a job enqueued after two others, run untraced", spans)
    (checkout,) = span_named(spans, "checkout")
    orders = [context_of(span) for name in ("order a", "order b") for span in span_named(spans, name)]
    (run,) = span_named(spans, "process later", **{"messaging.message.id": str(callback)})
    assert run["parent_id"] == checkout["context"]["span_id"]
    assert sorted(context_of(link) for link in run["links"]) == sorted(orders)
    assert {link["attributes"]["mysqlq.link"] for link in run["links"]} == {"parent_enqueued_in"}


def test_without_opentelemetry_nothing_is_stored_and_nothing_imports_it(qdb: QueueDB) -> None:
    env = qdb.env()
    produced = produce(qdb, env, "test.record", {})
    assert produced["context"] is None and produced["otel"] == []
    (job_id,) = produced["ids"]
    assert qdb.scalar("SELECT trace_context FROM mysqlq_jobs WHERE id = %s", (job_id,)) is None
    done = subprocess.run([sys.executable, "-c", BARE_WORKER], env=env, capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, done.stderr
    assert "OTEL_IMPORTED False" in done.stderr
    assert qdb.statuses() == {"done": 1}


def test_a_producer_with_the_api_but_no_sdk_stores_nothing(qdb: QueueDB) -> None:
    produced = produce(qdb, qdb.env(TEST_API_SPAN="1"), "test.record", {})  # a span, of the API's no-op tracer
    assert produced["context"] is None and "opentelemetry.trace" in produced["otel"]
    assert qdb.scalar("SELECT COUNT(*) FROM mysqlq_jobs WHERE trace_context IS NOT NULL") == 0


# A Django project's process enqueueing a task through mysqlq's backend, inside a span when it traces.
DJANGO_PRODUCER = """
import json, os, sys
import django
django.setup()
from shop import tasks
from mysqlq.core.tracing import current_trace_context

if os.environ.get("TEST_SPANS"):
    from opentelemetry import trace
    with trace.get_tracer("shop").start_as_current_span("checkout"):
        result, context = tasks.add.enqueue(1, 2), current_trace_context()
else:
    result, context = tasks.add.enqueue(1, 2), current_trace_context()
print(json.dumps({"ids": [int(result.id)], "context": context,
                  "otel": sorted(name for name in sys.modules if name.startswith("opentelemetry"))}))
"""


@pytest.mark.parametrize("traced", [False, True], ids=["untraced", "traced"])
def test_the_django_backend_stores_the_span_it_enqueues_in_and_nothing_without_one(qdb: QueueDB,
                                                                                   traced: bool) -> None:
    if django is None:
        unavailable("Django is not installed")
    env = traced_env(qdb, qdb.tmp / "spans.jsonl", "shop") if traced else qdb.env()
    paths = [str(DJANGO_PROJECT), env.get("PYTHONPATH", "")]
    env |= {"SHOP_DSN": qdb.dsn, "SHOP_SQLITE": str(qdb.tmp / "other.sqlite3"), "SHOP_RECORD": str(qdb.record_path),
            "DJANGO_SETTINGS_MODULE": "shop.settings", "PYTHONPATH": os.pathsep.join(filter(None, paths))}
    done = subprocess.run([sys.executable, "-c", DJANGO_PRODUCER], env=env, capture_output=True, text=True,
                          timeout=60)
    assert done.returncode == 0, done.stderr
    produced = json.loads(done.stdout.strip().splitlines()[-1])
    (job_id,) = produced["ids"]
    stored = qdb.scalar("SELECT trace_context FROM mysqlq_jobs WHERE id = %s", (job_id,))
    if traced:
        assert stored is not None and stored == produced["context"]
        (checkout,) = span_named(read_spans(qdb.tmp / "spans.jsonl"), "checkout")
        assert stored.startswith(f"00-{checkout['context']['trace_id'][2:]}-{checkout['context']['span_id'][2:]}-")
    else:
        assert stored is None and produced["context"] is None and produced["otel"] == []
