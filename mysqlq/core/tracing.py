"""The trace context a job carries from its producer to its worker, as W3C Trace Context headers.

What is stored in ``mysqlq_jobs.trace_context`` is the current span's ``traceparent``, followed by one
space and its ``tracestate`` when that is not empty (at most 55 + 1 + 512 characters, within the
column's 600). Nothing here imports OpenTelemetry: a process that never imported ``opentelemetry.trace``
has no span to pass on, so :func:`current_trace_context` answers None at the cost of one dict lookup,
and mysqlq adds no import to an application that does not trace.

A trace handed down without a span, as ``TRACEPARENT`` and ``TRACESTATE`` in the environment of a
child process (the convention of otel-cli and CI systems; see :func:`from_environment`), is stored
instead while :func:`continuing` holds it and no span is current.
"""

from __future__ import annotations

import re
import sys
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from contextvars import ContextVar
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from opentelemetry.trace import SpanContext

MAX_LENGTH = 600  # the width of mysqlq_jobs.trace_context
# A traceparent: version, trace id, parent span id, flags (a later version may add fields after them).
_TRACEPARENT = re.compile(r"([0-9a-f]{2})-([0-9a-f]{32})-([0-9a-f]{16})-([0-9a-f]{2})(-[0-9a-zA-Z-]*)?")
# A tracestate list member, as W3C Trace Context spells it: a key (simple, or tenant@system), "=", a value.
_MEMBER = re.compile(r"(?:[a-z][_0-9a-z*/-]{0,255}|[a-z0-9][_0-9a-z*/-]{0,240}@[a-z][_0-9a-z*/-]{0,13})"
                     r"=[\x20-\x2b\x2d-\x3c\x3e-\x7e]{0,255}[\x21-\x2b\x2d-\x3c\x3e-\x7e]")
_MAX_MEMBERS = 32
_given: ContextVar[str | None] = ContextVar("mysqlq_given_trace_context", default=None)


def current_trace_context() -> str | None:
    """The value to store with a job enqueued now: the current span's traceparent (and tracestate);
    without a valid span (OpenTelemetry never imported in this process, or the API alone, without an
    SDK, which has no valid span), the trace context :func:`continuing` holds, or None."""
    api = sys.modules.get("opentelemetry.trace")
    if api is None:
        return _given.get()
    context = api.get_current_span().get_span_context()
    if not context.is_valid:
        return _given.get()
    return stored_context(context)


def stored_context(context: SpanContext) -> str:
    """A valid OpenTelemetry SpanContext as a job stores it: its traceparent, then its tracestate
    when there is one and it fits."""
    parent = f"00-{context.trace_id:032x}-{context.span_id:016x}-{context.trace_flags:02x}"
    state = context.trace_state.to_header() if context.trace_state else ""
    if state and len(parent) + 1 + len(state) <= MAX_LENGTH:
        return f"{parent} {state}"
    return parent


def parse_trace_context(value: str | None) -> tuple[int, int, int, str] | None:
    """A stored value as (trace id, span id, flags, tracestate header or ""); None for nothing
    stored or not a valid traceparent (as W3C Trace Context reads it: version ff and zero ids are not)."""
    if not value:
        return None
    parent, _, state = value.strip().partition(" ")
    match = _TRACEPARENT.fullmatch(parent)
    if match is None:
        return None
    version, trace_id, span_id, flags, more = match.groups()
    if version == "ff" or (version == "00" and more) or not int(trace_id, 16) or not int(span_id, 16):
        return None
    return int(trace_id, 16), int(span_id, 16), int(flags, 16), state.strip()


def from_environment(environ: Mapping[str, str]) -> tuple[str | None, str | None]:
    """The trace context handed down in ``environ``, as a job stores it: its ``TRACEPARENT``, with its
    ``TRACESTATE`` when there is one; then what was ignored and why (None: nothing). A TRACEPARENT that
    is not a W3C traceparent is ignored (no context), a TRACESTATE that is not a tracestate too (the
    traceparent alone)."""
    parent = environ.get("TRACEPARENT", "").strip()
    if not parent:
        return None, None
    if " " in parent or parse_trace_context(parent) is None:
        return None, f"TRACEPARENT is not a W3C traceparent, ignored: {parent[:80]!r}"
    state = environ.get("TRACESTATE", "").strip()
    if not state:
        return parent, None
    members = [member.strip() for member in state.split(",") if member.strip()]
    if len(members) > _MAX_MEMBERS or not all(_MEMBER.fullmatch(member) for member in members):
        return parent, f"TRACESTATE is not a W3C tracestate, ignored: {state[:80]!r}"
    joined = ",".join(members)
    return (f"{parent} {joined}" if len(parent) + 1 + len(joined) <= MAX_LENGTH else parent), None


@contextmanager
def continuing(context: str | None) -> Iterator[None]:
    """Within it, jobs enqueued where no span is current store ``context`` (a value of
    :func:`from_environment`; None: nothing), as if they were enqueued in the span it names."""
    token = _given.set(context)
    try:
        yield
    finally:
        _given.reset(token)
