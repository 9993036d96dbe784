"""Handlers for the demo and the benchmark."""

from __future__ import annotations

import asyncio
import os
import random
import threading
import time
from typing import Any


def greet(payload: Any, ctx: Any) -> None:
    """Say hello (through the job's logger)."""
    ctx.log.info("demo.greet", name=payload.get("name", "world"))


def resize(payload: Any, ctx: Any) -> None:
    """Pretend to resize an image for a few milliseconds."""
    time.sleep(random.uniform(0.001, 0.005))


def flaky(payload: Any, ctx: Any) -> None:
    """Fail on the first attempt now and then, to show retries."""
    if ctx.attempt == 1 and random.random() < payload.get("failure_rate", 0.2):
        raise RuntimeError("transient failure (the demo retries it)")


def noop(payload: Any, ctx: Any) -> None:
    """Do nothing: the benchmark measures the queue, not the work."""


def latency(payload: Any, ctx: Any) -> None:
    """Record start minus enqueue time (wall clock, same host) to MYSQLQ_BENCH_LATENCY_FILE."""
    _record_latency(time.time(), payload)


def _record_latency(started: float, payload: Any) -> None:
    path = os.environ.get("MYSQLQ_BENCH_LATENCY_FILE")
    if path:
        with open(path, "a", encoding="utf-8") as out:  # one short write per line: atomic with O_APPEND
            out.write(f"{(started - float(payload['t'])) * 1000:.3f}\n")


_io = threading.local()  # each slot's thread keeps a connection of its own, as a real handler would


def latency_io(payload: Any, ctx: Any) -> None:
    """``latency``, then a job's usual work: one small INSERT into ``bench_io`` on the handler's own
    connection (one per thread, kept) to the database MYSQLQ_BENCH_IO_DSN names."""
    started = time.time()
    conn = getattr(_io, "conn", None)
    if conn is None:
        from mysqlq import Dsn
        from mysqlq.store.db import connect

        conn = _io.conn = connect(Dsn.parse(os.environ["MYSQLQ_BENCH_IO_DSN"]))
    with conn.cursor() as cur:
        cur.execute("INSERT INTO bench_io (job_id) VALUES (%s)", (ctx.job_id,))
    conn.commit()
    _record_latency(started, payload)


def sleep(payload: Any, ctx: Any) -> None:
    """Wait payload["s"] seconds (50 ms by default), as a call to another service would."""
    time.sleep(float(payload.get("s", 0.05)) if isinstance(payload, dict) else 0.05)


async def asleep(payload: Any, ctx: Any) -> None:
    """``sleep`` as a coroutine."""
    await asyncio.sleep(float(payload.get("s", 0.05)) if isinstance(payload, dict) else 0.05)
