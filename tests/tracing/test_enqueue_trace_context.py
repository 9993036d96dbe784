"""Every way of enqueueing stores the trace context of the span current where it was called (the
async forms too, whose inserts run on a thread), and NULL where no span is current."""

from __future__ import annotations

import asyncio
import datetime as dt
from collections.abc import Iterator

import pytest
from opentelemetry import trace
from opentelemetry.sdk.trace import TracerProvider

from mysqlq import Job, enqueue_on
from mysqlq.leader.schedule_file import parse
from mysqlq.store import schedules

from ..conftest import QueueDB


def stored(qdb: QueueDB, job_id: int) -> str | None:
    value = qdb.scalar("SELECT trace_context FROM mysqlq_jobs WHERE id = %s", (job_id,))
    return None if value is None else str(value)


@pytest.fixture
def span() -> Iterator[str]:
    """A span current for the test (no global provider set); yields its traceparent."""
    tracer = TracerProvider().get_tracer("test.enqueue")
    with tracer.start_as_current_span("request") as current:
        context = current.get_span_context()
        yield f"00-{context.trace_id:032x}-{context.span_id:016x}-{context.trace_flags:02x}"


def test_every_way_of_enqueueing_stores_the_current_spans_trace_context(qdb: QueueDB, span: str) -> None:
    ids: dict[str, int] = {}
    with qdb.producer() as producer:
        ids["enqueue"] = producer.enqueue("test.record")
        ids["enqueue, tagged"] = producer.enqueue("test.record", tags=["t"])
        producer.enqueue_many([Job("test.record", {"bulk": 1}), Job("test.record", {"bulk": 2}, tags=["t"])])
        ids["enqueue_many"], ids["enqueue_many, tagged"] = (
            int(qdb.scalar("SELECT id FROM mysqlq_jobs WHERE payload = %s", (f'{{"bulk":{n}}}',))) for n in (1, 2))
        with producer.transaction() as tx:
            ids["transaction"] = tx.enqueue("test.record")
            ids["chain"] = tx.chain(Job("test.record"), Job("test.record"))[1]
        group = producer.group([Job("test.record")], then=Job("test.record"))
        ids["group"], ids["group's callback"] = group.members[0], group.callback

        async def from_async() -> None:  # the inserts run on the producer's threads
            ids["aenqueue"] = await producer.aenqueue("test.record")
            await producer.aenqueue_many([Job("test.record", {"async bulk": 1})])
            async with producer.atransaction() as atx:
                ids["atransaction"] = await atx.aenqueue("test.record")

        asyncio.run(from_async())
        ids["aenqueue_many"] = int(qdb.scalar("SELECT id FROM mysqlq_jobs WHERE payload = %s",
                                              ('{"async bulk":1}',)))
    conn = qdb.connect()
    try:
        conn.begin()
        ids["enqueue_on"] = enqueue_on(conn, Job("test.record"), qdb.settings())
        conn.commit()
    finally:
        conn.close()
    assert {via: stored(qdb, job_id) for via, job_id in ids.items()} == {via: span for via in ids}


def test_outside_a_span_nothing_is_stored(qdb: QueueDB) -> None:
    assert not trace.get_current_span().get_span_context().is_valid
    with qdb.producer() as producer:
        job_id = producer.enqueue("test.record")
        asyncio.run(producer.aenqueue("test.record"))
    assert qdb.scalar("SELECT COUNT(*) FROM mysqlq_jobs WHERE trace_context IS NOT NULL") == 0
    assert stored(qdb, job_id) is None


def test_a_schedule_tick_and_mysqlq_enqueue_store_none_without_a_span_or_traceparent(qdb: QueueDB) -> None:
    [entry] = parse('[hourly]\nevery = "1h"\nhandler = "test.record"\n')
    tick = dt.datetime(2026, 1, 1, tzinfo=dt.UTC)
    conn = qdb.connect()
    try:
        with conn.cursor() as cur:
            job_id, _ = schedules.enqueue_tick(cur, "hourly", entry.job(tick).row(qdb.settings()), tick, tick,
                                               tick + dt.timedelta(hours=1))
    finally:
        conn.close()
    untraced = {name: value for name, value in qdb.env().items() if name not in ("TRACEPARENT", "TRACESTATE")}
    from_cli = int(qdb.cli("enqueue", "test.record", check=True, env=untraced).stdout)  # see test_cli_trace
    assert stored(qdb, job_id) is None and stored(qdb, from_cli) is None
