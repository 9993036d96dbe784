"""Burst workers started together share slow work: the first one's claim, made before anyone knew
how long its jobs take, holds every job for a moment and gives back what its slots cannot start
soon; a burst worker that found nothing waits for that instead of exiting."""

from __future__ import annotations

import collections

from mysqlq_harness.jobs import EVERY_JOB

from mysqlq import Job

from ..conftest import QueueDB

JOBS, SECONDS = 20, 0.5


def test_two_burst_workers_started_together_share_slow_jobs(qdb: QueueDB) -> None:
    with qdb.producer() as producer:
        producer.enqueue_many([Job("test.sleep", {"seconds": SECONDS}) for _ in range(JOBS)])
    procs = [qdb.worker("--burst", "--name", f"burst-{index}") for index in range(2)]  # default slots: 5
    for proc in procs:
        assert proc.wait(timeout=120) == 0, qdb.logs()
    assert qdb.statuses() == {"done": JOBS}
    per_worker = collections.Counter(dict(qdb.query(f"SELECT worker, COUNT(*) FROM {EVERY_JOB} GROUP BY worker")))
    # Ten each runs them in two rounds of 0.5 s (the ideal); one worker alone would need four.
    assert sorted(per_worker.values()) == [10, 10], (per_worker, qdb.logs())
    runs = collections.Counter(line[0] for line in qdb.records() if line[2] == "end")
    assert len(runs) == JOBS and set(runs.values()) == {1}
