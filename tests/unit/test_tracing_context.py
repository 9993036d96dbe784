"""The trace context stored with a job (mysqlq.core.tracing): the current span's traceparent and
tracestate, nothing without OpenTelemetry or a valid span; and the worker's test of whether it traces."""

from __future__ import annotations

import sys

import pytest
from opentelemetry import trace
from opentelemetry.trace import NonRecordingSpan, SpanContext, TraceFlags, TraceState

from mysqlq.core.tracing import MAX_LENGTH, current_trace_context, parse_trace_context
from mysqlq.worker.running import job_spans as worker_tracing
from mysqlq.worker.settling.runs import Runs

TRACE_ID = 0x0AF7651916CD43DD8448EB211C80319C
SPAN_ID = 0xB7AD6B7169203331


def span(state: TraceState | None = None) -> NonRecordingSpan:
    return NonRecordingSpan(SpanContext(TRACE_ID, SPAN_ID, is_remote=False, trace_flags=TraceFlags(1),
                                        trace_state=state))


def test_the_current_span_is_stored_as_its_traceparent() -> None:
    with trace.use_span(span()):
        assert current_trace_context() == "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01"


def test_a_tracestate_follows_after_a_space_and_is_read_back_with_the_ids() -> None:
    with trace.use_span(span(TraceState([("congo", "t61rcWkgMzE"), ("rojo", "00f067aa0ba902b7")]))):
        stored = current_trace_context()
    assert stored == "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01 congo=t61rcWkgMzE,rojo=00f067aa0ba902b7"
    assert parse_trace_context(stored) == (TRACE_ID, SPAN_ID, 1, "congo=t61rcWkgMzE,rojo=00f067aa0ba902b7")
    assert parse_trace_context(stored.split()[0]) == (TRACE_ID, SPAN_ID, 1, "")


def test_a_tracestate_too_long_for_the_column_is_left_out() -> None:
    state = TraceState([(f"k{n}", "v" * 200) for n in range(3)])
    with trace.use_span(span(state)):
        stored = current_trace_context()
    assert stored == "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01" and len(stored) <= MAX_LENGTH


def test_nothing_is_stored_without_a_valid_span() -> None:
    assert current_trace_context() is None  # no span current: the API's invalid one
    with trace.get_tracer("t").start_as_current_span("no sdk"):  # the API alone makes no valid span
        assert current_trace_context() is None


def test_nothing_is_stored_and_nothing_imported_when_opentelemetry_was_never_imported(
        monkeypatch: pytest.MonkeyPatch) -> None:
    for name in [name for name in sys.modules if name.startswith("opentelemetry")]:
        monkeypatch.delitem(sys.modules, name)
    with trace.use_span(span()):  # a span the (forgotten) module knows of: not looked at
        assert current_trace_context() is None
    assert not worker_tracing.active()
    assert not [name for name in sys.modules if name.startswith("opentelemetry")]


@pytest.mark.parametrize("stored", [
    None, "", "garbage", "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331",  # no flags
    "ff-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01",  # version ff is invalid
    "00-00000000000000000000000000000000-b7ad6b7169203331-01",  # a zero trace id
    "00-0af7651916cd43dd8448eb211c80319c-0000000000000000-01",  # a zero span id
    "00-0AF7651916CD43DD8448EB211C80319C-b7ad6b7169203331-01",  # upper case
    "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01-extra",  # version 00 has four fields
])
def test_what_is_not_a_valid_traceparent_is_read_as_nothing(stored: str | None) -> None:
    assert parse_trace_context(stored) is None


def test_a_later_version_may_add_fields() -> None:
    assert parse_trace_context("01-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01-ab") == (TRACE_ID, SPAN_ID,
                                                                                               1, "")


def test_a_worker_traces_only_once_a_tracer_provider_is_set() -> None:
    assert not worker_tracing.active()  # the API's proxy provider: spans that record nothing
    assert worker_tracing.start(lambda job_id, limit: [], Runs()) is None
