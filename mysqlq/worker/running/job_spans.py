"""OpenTelemetry spans of a worker, named as OpenTelemetry's messaging conventions name them: a claim
that took jobs is a CLIENT span ``receive <queue>`` with ``messaging.batch.message_count`` and a link to
each job's enqueueing span; each run of a job is a CONSUMER span ``process <queue>``, current while its
handler runs (a handler's own spans nest inside), with the job's id, attempt, handler, tags and outcome,
and the exception recorded when the handler raised. A job enqueued after others (a workflow's
callback or step) also links to the spans its parents ran in (noted in mysqlq.worker.settling.runs, stored
when they ended), or, for a parent run untraced, to the span it was enqueued in when that is not its own.

The first run of a job is a child of the span it was enqueued in (the trace context stored with it,
mysqlq.core.tracing): the producer's request and the job's work read as one trace. A retry, or a run
after a snooze, starts a trace of its own with a link to that span instead: it runs minutes or hours
later, and as a child it would stretch the producer's trace over that time (tail sampling, which
decides when a trace seems finished, would have decided without it) and put every attempt under the
request that only enqueued once.

Tracing is on when the process has imported OpenTelemetry and set a tracer provider (with
``opentelemetry-instrument``, or in the handlers' modules); :func:`start` never imports it otherwise.
"""

from __future__ import annotations

import functools
import json
import os
import sys
import time
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from mysqlq.core.errors import Snooze
from mysqlq.core.jobs import ClaimedJob
from mysqlq.core.tracing import parse_trace_context
from mysqlq.worker.settling.runs import Runs

if TYPE_CHECKING:
    from contextlib import AbstractContextManager

    from opentelemetry.trace import Link, Span, SpanContext

SYSTEM = "mysqlq"
MAX_CLAIM_LINKS = 128  # the SDK's default limit of links per span
MAX_PARENT_LINKS = 100  # of a workflow's job: one per distinct span its parents ran (or were enqueued) in
# (job id, at most) -> its parents' stored trace contexts: (context, True for a run's, False for an enqueue's)
Parents = Callable[[int, int], list[tuple[str, bool]]]


def active() -> bool:
    """Whether this process traces: OpenTelemetry imported and a tracer provider set (the API's
    default provider makes spans that record nothing), not disabled by ``OTEL_SDK_DISABLED=true``.
    Looks only: never imports OpenTelemetry."""
    api = sys.modules.get("opentelemetry.trace")
    if api is None or os.environ.get("OTEL_SDK_DISABLED", "").strip().lower() == "true":
        return False
    return not isinstance(api.get_tracer_provider(), api.ProxyTracerProvider | api.NoOpTracerProvider)


def start(parents: Parents, runs: Runs) -> JobSpans | None:
    """The worker's spans when this process traces (see :func:`active`), else None. ``parents``
    answers which spans a job's parents ran or were enqueued in (mysqlq.worker.running.parents.ParentsReader);
    each run's span is noted in ``runs``."""
    return JobSpans(parents, runs) if active() else None


class JobSpans:
    """Makes the spans of a worker that traces."""

    def __init__(self, parents: Parents, runs: Runs) -> None:
        from opentelemetry import context, trace

        self._trace = trace
        self._root = context.Context()  # no parent: the worker's loop is in no trace of its own
        self.tracer = trace.get_tracer("mysqlq")
        self._parents = parents
        self._runs = runs

    def enqueued_in(self, job: ClaimedJob) -> SpanContext | None:
        """The span ``job`` was enqueued in (None: none stored, or not a valid traceparent)."""
        return self._span_context(job.trace_context)

    def _span_context(self, stored: str | None) -> SpanContext | None:
        return _span_context(stored) if stored else None

    def claimed(self, jobs: list[ClaimedJob], batch_id: int, claimed_at: float) -> None:
        """The span of a claim sent at ``claimed_at`` (monotonic) that took ``jobs``."""
        trace = self._trace
        queues = sorted({job.queue for job in jobs})
        attributes: dict[str, Any] = {"messaging.system": SYSTEM, "messaging.operation.type": "receive",
                                      "messaging.operation.name": "receive",
                                      "messaging.batch.message_count": len(jobs), "mysqlq.batch.id": batch_id}
        if len(queues) == 1:
            attributes["messaging.destination.name"] = queues[0]
        links: list[Link] = []
        for job in jobs:
            found = self.enqueued_in(job)
            if found is not None and len(links) < MAX_CLAIM_LINKS:
                links.append(trace.Link(found))
        started = time.time_ns() - round((time.monotonic() - claimed_at) * 1e9)
        name = f"receive {queues[0]}" if len(queues) == 1 else "receive"
        self.tracer.start_span(name, self._root, trace.SpanKind.CLIENT, attributes, links, started).end()

    def wrap(self, job: ClaimedJob, func: Callable[..., Any], is_async: bool, limit: float) -> Callable[..., Any]:
        """``func`` run inside the job's span (see the module's docstring). A plain handler in a slot is
        not stopped at its time limit ``limit`` (a thread cannot be): one that returns after it (and
        after it was recorded failed) has a failed span."""
        if is_async:

            async def traced_async(payload: Any, ctx: Any) -> Any:
                with self._span(job) as span:
                    self._runs.started(job.id, span)
                    try:
                        value = await func(payload, ctx)
                    except BaseException as exc:
                        self._raised(span, job, exc)
                        raise
                    span.set_attribute("mysqlq.job.outcome", "done")  # even late: wait_for then returns its value
                    return value

            return traced_async

        def traced(payload: Any, ctx: Any) -> Any:
            with self._span(job) as span:
                self._runs.started(job.id, span)
                started = time.monotonic()
                try:
                    value = func(payload, ctx)
                except BaseException as exc:
                    self._raised(span, job, exc)
                    raise
                self._returned(span, job, started, limit)
                return value

        return traced

    def _span(self, job: ClaimedJob) -> AbstractContextManager[Span]:
        trace = self._trace
        enqueued_in = self.enqueued_in(job)
        parent = self._root
        links: list[Link] = []
        if enqueued_in is not None:
            if job.attempt <= 1 and not job.snoozes:  # the first run: a child of the enqueueing span
                parent = trace.set_span_in_context(trace.NonRecordingSpan(enqueued_in))
            else:
                links.append(trace.Link(enqueued_in, {"mysqlq.link": "enqueued_in"}))
        if job.after_others:
            links += self._parent_links(job, enqueued_in)
        attributes: dict[str, Any] = {
            "messaging.system": SYSTEM, "messaging.operation.type": "process", "messaging.operation.name": "process",
            "messaging.destination.name": job.queue, "messaging.message.id": str(job.id),
            "mysqlq.job.handler": job.handler, "mysqlq.job.attempt": job.attempt,
            "mysqlq.job.max_attempts": job.max_attempts,
        }
        if job.snoozes:
            attributes["mysqlq.job.snoozes"] = job.snoozes
        tags = _tags(job.tags)
        if tags:
            attributes["mysqlq.tags"] = tags
        return self.tracer.start_as_current_span(f"process {job.queue}", parent, trace.SpanKind.CONSUMER,
                                                 attributes, links, record_exception=False,
                                                 set_status_on_exception=False)

    def _parent_links(self, job: ClaimedJob, own: SpanContext | None) -> list[Link]:
        """Links to the spans the parents of a workflow's job ran in; for those run untraced, to the
        spans they were enqueued in, other than its own."""
        try:
            stored = self._parents(job.id, MAX_PARENT_LINKS)
        except Exception:  # a span's links never fail the job they describe
            return []
        links = []
        for context, ran in stored:
            found = self._span_context(context)
            if found is None:
                continue
            if ran:
                links.append(self._trace.Link(found, {"mysqlq.link": "parent_ran_in"}))
            elif own is None or (found.trace_id, found.span_id) != (own.trace_id, own.span_id):
                links.append(self._trace.Link(found, {"mysqlq.link": "parent_enqueued_in"}))
        return links

    def _returned(self, span: Span, job: ClaimedJob, started: float, limit: float) -> None:
        """The handler returned: done, unless after its time limit (then it was recorded failed)."""
        if time.monotonic() - started > limit:
            self._failed(span, job, "mysqlq.core.errors.JobTimeout",
                         f"JobTimeout: ran past its time limit of {limit:g}s")
        else:
            span.set_attribute("mysqlq.job.outcome", "done")

    def _raised(self, span: Span, job: ClaimedJob, exc: BaseException) -> None:
        """What the handler raised: a snooze is no error; anything else fails this attempt."""
        if isinstance(exc, Snooze):
            span.set_attribute("mysqlq.job.outcome", "snoozed")
            return
        kind = type(exc)
        span.record_exception(exc)
        self._failed(span, job, f"{kind.__module__}.{kind.__qualname__}", f"{kind.__name__}: {exc}")

    def _failed(self, span: Span, job: ClaimedJob, error_type: str, description: str) -> None:
        span.set_attribute("error.type", error_type)  # the exception's class, e.g. mysqlq.core.errors.JobTimeout
        span.set_attribute("mysqlq.job.outcome", "failed" if job.attempt < job.max_attempts else "dead")
        span.set_status(self._trace.Status(self._trace.StatusCode.ERROR, description[:300]))


@functools.lru_cache(maxsize=256)
def _span_context(stored: str) -> SpanContext | None:
    """A stored trace context as the remote span it names (None: not a valid one). Kept for the
    jobs that follow: those enqueued in one span (a bulk enqueue, a workflow) share it, and the
    claim's span reads every job's before its run's span does."""
    parsed = parse_trace_context(stored)
    if parsed is None:
        return None
    from opentelemetry.trace import SpanContext, TraceFlags, TraceState

    trace_id, span_id, flags, state = parsed
    return SpanContext(trace_id, span_id, is_remote=True, trace_flags=TraceFlags(flags),
                       trace_state=TraceState.from_header([state]) if state else None)


def _tags(stored: str | None) -> list[str]:
    """The stored tags (a JSON array) as a span attribute's list ([] for none or unreadable)."""
    if not stored:
        return []
    try:
        found = json.loads(stored)
    except ValueError:
        return []
    return [str(tag) for tag in found] if isinstance(found, list) else []
