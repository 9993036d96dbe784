"""Helpers for the operations tests: jobs planted in a given state and age, and CLI assertions."""

from __future__ import annotations

import subprocess
from typing import Any

from mysqlq_harness.jobs import EVERY_JOB

from .conftest import QueueDB

COLUMNS = "(queue, handler, payload, status, run_at, max_attempts, attempts, enqueued_at, finished_at, last_error)"


def plant(qdb: QueueDB, status: str, count: int = 1, *, queue: str = "default", ended_ago: float | None = None,
          handler: str = "test.record", attempts: int = 0, max_attempts: int = 5,
          error: str | None = None) -> list[int]:
    """Insert ``count`` jobs in ``status`` directly; ended ones finished ``ended_ago`` seconds ago
    (and became runnable a second before that). Returns their ids, oldest first."""
    ago_us = round((ended_ago or 0) * 1e6)
    finished = "NOW(6) - INTERVAL %(ago)s MICROSECOND" if ended_ago is not None else "NULL"
    run_at = "NOW(6) - INTERVAL %(ago)s MICROSECOND - INTERVAL 1 SECOND" if ended_ago is not None else "NOW(6)"
    sql = (f"INSERT INTO mysqlq_jobs {COLUMNS} VALUES (%(queue)s, %(handler)s, '{{}}', %(status)s, {run_at}, "
           f"%(max)s, %(attempts)s, NOW(6), {finished}, %(error)s)")
    conn = qdb.connect()
    ids = []
    try:
        with conn.cursor() as cur:
            for _ in range(count):
                cur.execute(sql, {"queue": queue, "handler": handler, "status": status, "ago": ago_us,
                                  "max": max_attempts, "attempts": attempts, "error": error})
                ids.append(int(cur.lastrowid))
                if status == "running":  # held under a claim, as a worker's claim would leave it
                    cur.execute("UPDATE mysqlq_jobs SET batch_id = id, running_batch = id WHERE id = %s", (ids[-1],))
    finally:
        conn.close()
    return ids


def status_of(qdb: QueueDB, job_id: int) -> Any:
    return qdb.scalar(f"SELECT status FROM {EVERY_JOB} WHERE id = %s", (job_id,))


def count(qdb: QueueDB, where: str = "TRUE", params: Any = None) -> int:
    return int(qdb.scalar(f"SELECT COUNT(*) FROM {EVERY_JOB} WHERE {where}", params))


def assert_one_line_error(result: subprocess.CompletedProcess[str], fragment: str) -> None:
    """The command failed with exactly one line on stderr containing ``fragment``, and no traceback."""
    assert result.returncode != 0, result
    assert "Traceback" not in result.stderr, result.stderr
    lines = [line for line in result.stderr.splitlines() if line.strip()]
    assert len(lines) == 1, result.stderr
    assert fragment in lines[0], result.stderr
