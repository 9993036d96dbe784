"""The test project's tasks."""

from __future__ import annotations

import asyncio
import os
import time
from typing import Any

from django.db import connection

from mysqlq.contrib.django.compat import SOURCE

if SOURCE == "django.tasks":
    from django.tasks import task
else:
    from django_tasks import task


def _record(line: str) -> None:
    path = os.environ.get("SHOP_RECORD")
    if path:
        with open(path, "a", encoding="utf-8") as out:
            out.write(line + "\n")


@task
def add(a: int, b: int) -> int:
    _record(f"add {a} {b}")
    return a + b


@task(queue_name="mail")
def send(to: str, *, subject: str = "hi") -> dict[str, Any]:
    return {"to": to, "subject": subject}


@task
def order(tag: str) -> None:
    _record(f"order {tag}")


@task
def boom(message: str) -> None:
    raise ValueError(message)


@task
def slow(seconds: float) -> str:
    _record("slow start")
    time.sleep(seconds)
    _record("slow end")
    return "slept"


@task
async def aadd(a: int, b: int) -> int:
    await asyncio.sleep(0)
    return a + b


@task(takes_context=True)
def attempt_of(context: Any, fail_until: int) -> dict[str, Any]:
    if context.attempt < fail_until:
        raise RuntimeError(f"not yet (attempt {context.attempt})")
    return {"attempt": context.attempt, "id": context.task_result.id}


@task
def count_rows() -> int:
    with connection.cursor() as cur:  # the worker's own Django connection
        cur.execute("SELECT COUNT(*) FROM mysqlq_jobs")
        return int(cur.fetchone()[0])


not_a_task = add.func
