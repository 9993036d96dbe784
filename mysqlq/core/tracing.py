"""The trace context a job carries from its producer to its worker, as W3C Trace Context headers.

What is stored in ``mysqlq_jobs.trace_context`` is the current span's ``traceparent``, followed by one
space and its ``tracestate`` when that is not empty (at most 55 + 1 + 512 characters, within the
column's 600). Nothing here imports OpenTelemetry: a process that never imported ``opentelemetry.trace``
has no span to pass on, so :func:`current_trace_context` answers None at the cost of one dict lookup,
and mysqlq adds no import to an application that does not trace.
"""

from __future__ import annotations

import re
import sys

MAX_LENGTH = 600  # the width of mysqlq_jobs.trace_context
# A traceparent: version, trace id, parent span id, flags (a later version may add fields after them).
_TRACEPARENT = re.compile(r"([0-9a-f]{2})-([0-9a-f]{32})-([0-9a-f]{16})-([0-9a-f]{2})(-[0-9a-zA-Z-]*)?")


def current_trace_context() -> str | None:
    """The value to store with a job enqueued now: the current span's traceparent (and tracestate),
    or None when OpenTelemetry was never imported in this process or no valid span is current (the
    API alone, without an SDK, has no valid span)."""
    api = sys.modules.get("opentelemetry.trace")
    if api is None:
        return None
    context = api.get_current_span().get_span_context()
    if not context.is_valid:
        return None
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
