"""The spans a traced worker's runs are in, kept until their outcomes are written (mysqlq.worker.settling.runs)."""

from __future__ import annotations

from opentelemetry.trace import NonRecordingSpan, SpanContext, TraceFlags, TraceState

from mysqlq.core.tracing import parse_trace_context
from mysqlq.worker.settling.runs import Runs

TRACE_ID, SPAN_ID = 0x0AF7651916CD43DD8448EB211C80319C, 0xB7AD6B7169203331


def span(span_id: int = SPAN_ID, state: TraceState | None = None) -> NonRecordingSpan:
    return NonRecordingSpan(SpanContext(TRACE_ID, span_id, False, TraceFlags(1), state))


def test_a_runs_span_is_stored_as_a_trace_context_until_its_outcome_is_written() -> None:
    runs = Runs()
    assert not runs
    runs.started(7, span(state=TraceState([("shop", "a1")])))
    runs.started(8, span(SPAN_ID + 1))
    runs.started(9, NonRecordingSpan(SpanContext(0, 0, False)))  # no valid span: nothing noted
    assert runs.of(7) == "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01 shop=a1"
    runs_8 = runs.of(8)
    assert parse_trace_context(runs_8) == (TRACE_ID, SPAN_ID + 1, 1, "")
    assert runs.of(9) is None
    assert runs.take([7, 9, 10]) == {7: "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01 shop=a1"}
    assert runs.of(7) is None and runs  # 8's outcome is not written yet
    assert runs.take([8]) == {8: runs_8} and not runs
