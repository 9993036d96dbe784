"""A job admitted under a rate limit has its handler entered within its grace, or is not run: the
worker's runner checks the time kept for it just before the call (mysqlq.worker.running.job_runner.late)."""

from __future__ import annotations

import datetime
import time

from mysqlq.core.jobs import ClaimedJob
from mysqlq.worker.running.job_runner import Entry, Prepared, late


def prepared(enter_by: float | None) -> Prepared:
    job = ClaimedJob(1, "default", "h", b"{}", 1, 3, None)
    stamp = datetime.datetime(2026, 1, 1, 12, 0, 0, 123456)
    entry = Entry(enter_by, "handler:h", stamp) if enter_by is not None else None
    return Prepared(job, lambda payload, ctx: None, {}, 5.0, False, False, time.monotonic(), entry)


def test_a_job_past_its_grace_is_late_and_not_run() -> None:
    outcome = late(prepared(time.monotonic() - 0.001))
    assert outcome is not None and outcome.kind == "late" and "grace" in (outcome.error or "")


def test_a_job_within_its_grace_or_without_a_limit_runs() -> None:
    assert late(prepared(time.monotonic() + 1.0)) is None
    assert late(prepared(None)) is None
