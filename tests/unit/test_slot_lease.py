"""A job handed to a slot before the worker froze, but begun only after its claim's lease could have
lapsed, is not run: it is given back like a job the database failed under (the claim may be another
worker's by then). Deterministic, without a server: the slot's thread is what is checked."""

from __future__ import annotations

import time
from typing import Any

from mysqlq.core.config import Settings
from mysqlq.core.jobs import ClaimedJob
from mysqlq.worker.running.job_runner import Prepared
from mysqlq.worker.running.slots import Slots


class CountingRunner:
    def __init__(self) -> None:
        self.calls = 0

    def call(self, prepared: Prepared, batch_id: int, conn: Any, alarm: bool = False) -> Any:
        from mysqlq.worker.settling.outcomes import Outcome

        self.calls += 1
        return Outcome("done", 0.0)


def run_one(doubtful: bool) -> tuple[str, int]:
    runner = CountingRunner()
    slots = Slots(1, Settings(), runner)  # type: ignore[arg-type]
    slots.doubtful = lambda batch_id: doubtful
    job = ClaimedJob(1, "default", "test.record", b"{}", 1, 3, None)
    slots.start(job, 7, Prepared(job, lambda payload, ctx: None, {}, 5.0, False, False, time.monotonic()))
    deadline = time.monotonic() + 10
    finished: list[Any] = []
    while not finished and time.monotonic() < deadline:
        finished = slots.finished()
        time.sleep(0.01)
    slots.close()
    [running] = finished
    return running.outcome.kind, runner.calls


def test_a_job_begun_after_its_lease_could_have_lapsed_is_given_back_not_run() -> None:
    assert run_one(doubtful=True) == ("release", 0)
    assert run_one(doubtful=False) == ("done", 1)
