"""Handlers for the demo and the benchmark."""

from __future__ import annotations

import asyncio
import os
import random
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
    started = time.time()
    path = os.environ.get("MYSQLQ_BENCH_LATENCY_FILE")
    if path:
        with open(path, "a", encoding="utf-8") as out:
            out.write(f"{(started - float(payload['t'])) * 1000:.3f}\n")


def sleep(payload: Any, ctx: Any) -> None:
    """Wait payload["s"] seconds (50 ms by default), as a call to another service would."""
    time.sleep(float(payload.get("s", 0.05)) if isinstance(payload, dict) else 0.05)


async def asleep(payload: Any, ctx: Any) -> None:
    """``sleep`` as a coroutine."""
    await asyncio.sleep(float(payload.get("s", 0.05)) if isinstance(payload, dict) else 0.05)
