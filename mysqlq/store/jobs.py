"""Producer statements: inserting jobs."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from ..db import Cursor
from ..sql import query

NAMES = ("queue", "handler", "payload", "status", "priority", "run_at", "delay_us", "max_attempts",
         "time_limit", "dedupe_key", "dedupe_scope", "concurrency_key")


def insert_job(cur: Cursor, row: Sequence[Any]) -> int:
    """Insert one job; returns its id (the existing job's id when its dedupe key is taken)."""
    cur.execute(query("insert_job"), dict(zip(NAMES, row, strict=True)))
    return int(cur.lastrowid or cur.connection.insert_id())


def insert_jobs(cur: Cursor, rows: Sequence[Sequence[Any]]) -> int:
    """Insert many jobs in one multi-row INSERT; returns how many were new."""
    if not rows:
        return 0
    statement = query("insert_jobs").replace("{rows}", ",".join([query("job_values")] * len(rows)))
    return int(cur.execute(statement, [value for row in rows for value in row]))
