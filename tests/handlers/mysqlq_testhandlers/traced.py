"""Handlers that make spans of their own (OpenTelemetry), for the tracing tests: a handler's spans
nest inside the worker's span of its job."""

from __future__ import annotations

import time
from typing import Any

from opentelemetry import trace

import mysqlq

tracer = trace.get_tracer("mysqlq_testhandlers")


def work(payload: Any, ctx: mysqlq.JobContext) -> None:
    """One child span ``work`` (that lasts ``sleep`` seconds); fails until the attempt ``succeed_on``
    (default: the first)."""
    with tracer.start_as_current_span("work") as span:
        span.set_attribute("test.job_id", ctx.job_id)
        time.sleep(float(payload.get("sleep", 0)))
        if ctx.attempt < int(payload.get("succeed_on", 1)):
            raise RuntimeError(f"not yet (attempt {ctx.attempt})")


async def awork(payload: Any, ctx: mysqlq.JobContext) -> None:
    """:func:`work`, as a coroutine."""
    work(payload, ctx)
