"""The producer's command: enqueue (one job, or many from a file of JSON lines)."""

from __future__ import annotations

import os
import sys
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import click

from mysqlq.cli import main, settings
from mysqlq.core.config import Settings
from mysqlq.core.errors import InvalidJob
from mysqlq.core.jobs import DEDUPE_SCOPES, PARENT_FAILURE, Job, loads_strict, period_microseconds
from mysqlq.core.tracing import continuing, from_environment
from mysqlq.producer.enqueue import Producer


def _dedupe_scope(ctx: click.Context, param: click.Parameter, value: str) -> str:
    """--dedupe-scope: forever, active, or a period ("10m", "1h", "90s", or seconds)."""
    text = value.strip()
    if text not in DEDUPE_SCOPES:
        try:
            period_microseconds(text)
        except InvalidJob:
            raise click.BadParameter(f"{value!r} is not forever, active or a period such as 10m, 1h or 90s",
                                     ctx, param) from None
    return text


def _payload(text: str | None) -> Any:
    if text is None:
        return None
    if text == "-":
        text = sys.stdin.read()
    try:
        return loads_strict(text)
    except ValueError as exc:
        raise InvalidJob(f"payload is not valid JSON: {exc}") from None


def _job_from_line(number: int, line: str, defaults: dict[str, Any], cfg: Settings) -> Job:
    try:
        item = loads_strict(line)
    except ValueError as exc:
        raise InvalidJob(f"line {number}: not valid JSON: {exc}") from None
    if not isinstance(item, dict) or "handler" not in item:
        raise InvalidJob(f"line {number}: expected an object with at least \"handler\"")
    known = {"handler", "payload", "queue", "delay", "priority", "dedupe_key", "dedupe_scope", "max_attempts",
             "time_limit", "concurrency_key", "after", "on_parent_failure", "tags", "fairness_key"}
    unknown = set(item) - known
    if unknown:
        raise InvalidJob(f"line {number}: unknown field(s) {', '.join(sorted(unknown))}")
    job = Job(**{**defaults, **item})
    try:
        job.row(cfg)  # every line is checked before anything is written
        job.parents()
    except InvalidJob as exc:
        raise InvalidJob(f"line {number}: {exc}") from None
    return job


def _sdk() -> bool:
    """Whether this process traces, as a worker decides it (mysqlq.worker.running.job_spans.active); without
    OpenTelemetry imported it does not, and the worker's module is not imported to say so."""
    if "opentelemetry.trace" not in sys.modules:
        return False
    from mysqlq.worker.running.job_spans import active

    return active()


@contextmanager
def _traced(queues: set[str], batch: int | None = None) -> Iterator[Callable[[int], object]]:
    """Jobs enqueued within it continue the trace handed down in $TRACEPARENT (and $TRACESTATE). When
    this process traces (OpenTelemetry's SDK set up, as by ``opentelemetry-instrument``; see
    mysqlq.worker.running.job_spans.active) they are enqueued in a PRODUCER span ``create <queue>``, a child of
    that trace, and store that span. Yields what records a job's id on the span."""
    handed, ignored = from_environment(os.environ)
    if ignored:
        click.echo(f"warning: {ignored}", err=True)
    if not _sdk():
        with continuing(handed):
            yield lambda job_id: None
        return
    from opentelemetry import trace
    from opentelemetry.trace.propagation.tracecontext import TraceContextTextMapPropagator

    from mysqlq.worker.running.job_spans import SYSTEM

    parent = None
    if handed:
        traceparent, _, tracestate = handed.partition(" ")
        parent = TraceContextTextMapPropagator().extract({"traceparent": traceparent, "tracestate": tracestate})
    attributes: dict[str, Any] = {"messaging.system": SYSTEM, "messaging.operation.type": "create",
                                  "messaging.operation.name": "create"}
    if len(queues) == 1:
        attributes["messaging.destination.name"] = next(iter(queues))
    if batch is not None:
        attributes["messaging.batch.message_count"] = batch
    name = f"create {next(iter(queues))}" if len(queues) == 1 else "create"
    with trace.get_tracer("mysqlq").start_as_current_span(name, parent, trace.SpanKind.PRODUCER,
                                                          attributes) as span:
        yield lambda job_id: span.set_attribute("messaging.message.id", str(job_id))


@main.command()
@click.argument("handler", required=False)
@click.argument("payload", required=False)
@click.option("--file", "path", type=click.Path(dir_okay=False, path_type=Path), envvar="MYSQLQ_ENQUEUE_FILE",
              show_envvar=True,
              help="Enqueue every line of a JSON-lines file (handler, payload, queue, delay, ...), all or nothing.")
@click.option("--queue", envvar="MYSQLQ_QUEUE", show_envvar=True, default="default", help="Queue name.")
@click.option("--delay", envvar="MYSQLQ_ENQUEUE_DELAY", show_envvar=True, type=float, default=0.0,
              help="Seconds to wait before the job may run.")
@click.option("--priority", envvar="MYSQLQ_ENQUEUE_PRIORITY", show_envvar=True, type=int, default=0,
              help="Lower runs first.")
@click.option("--dedupe-key", envvar="MYSQLQ_ENQUEUE_DEDUPE_KEY", show_envvar=True,
              help="Enqueue at most once per key: a taken key prints the existing job's id.")
@click.option("--dedupe-scope", envvar="MYSQLQ_DEDUPE_SCOPE", show_envvar=True, metavar="forever|active|PERIOD",
              callback=_dedupe_scope, default="forever",
              help="How long the key holds: until the job is purged (forever), until it ends, done, dead or "
              "cancelled (active), or for a period from this enqueue, whatever the job does (10m, 1h, 90s...).")
@click.option("--max-attempts", type=int, envvar="MYSQLQ_MAX_ATTEMPTS", show_envvar=True, default=None,
              help="Attempts before the job is dead [default: 5].")
@click.option("--time-limit", envvar="MYSQLQ_ENQUEUE_TIME_LIMIT", show_envvar=True, type=float,
              help="Seconds the job may run [default: the worker's].")
@click.option("--concurrency-key", envvar="MYSQLQ_ENQUEUE_CONCURRENCY_KEY", show_envvar=True,
              help="Run at most the handler's concurrency_limit jobs with this key at once "
              "(with --file: for lines that name none).")
@click.option("--after", "after", metavar="ID", multiple=True, type=int, envvar="MYSQLQ_ENQUEUE_AFTER",
              show_envvar=True,
              help="Run only once job ID is done (repeat for several; the job waits until the last is). "
              "With --file, lines give \"after\": [ids].")
@click.option("--on-parent-failure", type=click.Choice(PARENT_FAILURE), default="cancel",
              envvar="MYSQLQ_ON_PARENT_FAILURE", show_envvar=True,
              help="When a job it waits for ends dead or cancelled: cancel this one too, or run it anyway.")
@click.option("--tag", "tags", metavar="TAG", multiple=True, envvar="MYSQLQ_ENQUEUE_TAG", show_envvar=True,
              help="Tag the job (repeat for several; in the variable, separate them by spaces): find it with "
              "`mysqlq jobs list --tag`. With --file, for lines that give no \"tags\".")
@click.option("--fairness-key", envvar="MYSQLQ_ENQUEUE_FAIRNESS_KEY", show_envvar=True,
              help="The tenant (or other party) the job is for: workers take a queue's jobs in turn across keys, "
              "so one key's backlog does not hold back another's jobs (with --file: for lines that name none).")
@click.pass_context
def enqueue(ctx: click.Context, handler: str | None, payload: str | None, path: Path | None, queue: str,
            delay: float, priority: int, dedupe_key: str | None, dedupe_scope: str, max_attempts: int | None,
            time_limit: float | None, concurrency_key: str | None, after: tuple[int, ...],
            on_parent_failure: str, tags: tuple[str, ...], fairness_key: str | None) -> None:
    """Enqueue HANDLER with a JSON PAYLOAD ("-": read it from stdin) and print its id,
    or bulk-load jobs with --file.

    With TRACEPARENT (and TRACESTATE) in the environment, the jobs continue that trace (see
    docs/tracing.md)."""
    cfg = settings(ctx)
    if path is not None:
        if handler is not None or payload is not None:
            raise click.UsageError("give either HANDLER [PAYLOAD] or --file, not both")
        if after:
            raise click.UsageError("--after takes one job; with --file, give \"after\" on each line")
        defaults = {"queue": queue, "delay": delay, "priority": priority, "max_attempts": max_attempts,
                    "time_limit": time_limit, "dedupe_scope": dedupe_scope, "concurrency_key": concurrency_key,
                    "on_parent_failure": on_parent_failure, "tags": tags, "fairness_key": fairness_key}
        try:
            lines = path.read_text(encoding="utf-8").splitlines()
        except (OSError, UnicodeDecodeError) as exc:
            raise InvalidJob(f"cannot read {path}: {exc}") from None
        try:
            jobs = [_job_from_line(n, line, defaults, cfg) for n, line in enumerate(lines, 1) if line.strip()]
        except InvalidJob as exc:
            raise InvalidJob(f"{path}: {exc}; nothing was enqueued") from None
        with _traced({job.queue for job in jobs}, len(jobs)), Producer(cfg) as producer, \
                click.progressbar(length=len(jobs), label="enqueuing", file=sys.stderr) as bar:
            inserted = producer.enqueue_many(jobs, progress=bar.update)
        click.echo(f"enqueued {inserted} jobs ({len(jobs) - inserted} skipped by dedupe key)")
        return
    if handler is None:
        raise click.UsageError("HANDLER is required (or --file)")
    with _traced({queue}) as enqueued, Producer(cfg) as producer:
        job_id = producer.enqueue(handler, _payload(payload), queue=queue, delay=delay, priority=priority,
                                  dedupe_key=dedupe_key, dedupe_scope=dedupe_scope, max_attempts=max_attempts,
                                  time_limit=time_limit, concurrency_key=concurrency_key, after=after,
                                  on_parent_failure=on_parent_failure, tags=tags, fairness_key=fairness_key)
        enqueued(job_id)
    click.echo(job_id)
