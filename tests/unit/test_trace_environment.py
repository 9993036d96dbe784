"""The trace context handed down to a child process in TRACEPARENT and TRACESTATE
(mysqlq.core.tracing.from_environment), and how it is stored where no span is current (continuing)."""

from __future__ import annotations

from opentelemetry import trace
from opentelemetry.trace import NonRecordingSpan, SpanContext, TraceFlags

from mysqlq.core.tracing import MAX_LENGTH, continuing, current_trace_context, from_environment

PARENT = "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01"


def test_a_traceparent_is_taken_as_it_is_with_its_tracestate_after_a_space() -> None:
    assert from_environment({}) == (None, None)
    assert from_environment({"TRACEPARENT": f" {PARENT}\n"}) == (PARENT, None)
    assert from_environment({"TRACEPARENT": PARENT, "TRACESTATE": " congo=t61rcWkgMzE , rojo=00f067aa0ba902b7,"}) \
        == (f"{PARENT} congo=t61rcWkgMzE,rojo=00f067aa0ba902b7", None)
    assert from_environment({"TRACEPARENT": PARENT, "TRACESTATE": "tenant@vendor=x"}) == (f"{PARENT} tenant@vendor=x",
                                                                                          None)
    # A later version may add fields; a tracestate alone names no span.
    later = "01-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01-more"
    assert from_environment({"TRACEPARENT": later}) == (later, None)
    assert from_environment({"TRACESTATE": "congo=t61rcWkgMzE"}) == (None, None)


def test_what_is_not_w3c_trace_context_is_ignored_and_said() -> None:
    for wrong in ("00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01-more", "ff-" + PARENT[3:],
                  PARENT.upper(), PARENT[:-1], f"{PARENT} congo=1", "00-" + "0" * 32 + PARENT[35:]):
        context, ignored = from_environment({"TRACEPARENT": wrong, "TRACESTATE": "congo=1"})
        assert context is None and ignored == f"TRACEPARENT is not a W3C traceparent, ignored: {wrong!r}"
    for wrong in ("Congo=1", "congo", "congo=\x01", "congo=a=b", ",".join(f"k{n}=v" for n in range(33))):
        context, ignored = from_environment({"TRACEPARENT": PARENT, "TRACESTATE": wrong})
        assert context == PARENT and ignored is not None and ignored.startswith("TRACESTATE is not a W3C tracestate")


def test_a_tracestate_too_long_to_store_is_left_out() -> None:
    state = ",".join(f"k{n}={'v' * 20}" for n in range(32))
    assert len(PARENT) + 1 + len(state) > MAX_LENGTH
    assert from_environment({"TRACEPARENT": PARENT, "TRACESTATE": state}) == (PARENT, None)


def test_the_handed_down_context_is_stored_where_no_span_is_current_and_only_within_continuing() -> None:
    assert current_trace_context() is None
    with continuing(PARENT):
        assert current_trace_context() == PARENT
        with continuing(None):
            assert current_trace_context() is None
        assert current_trace_context() == PARENT
        span = NonRecordingSpan(SpanContext(1, 2, is_remote=False, trace_flags=TraceFlags(1)))
        with trace.use_span(span):  # a span current: the span is the context
            assert current_trace_context() == f"00-{1:032x}-{2:016x}-01"
    assert current_trace_context() is None
