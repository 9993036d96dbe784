"""The worker process, in the stages of a job's life. Its loop (``loop``) asks ``queue_watch`` (polls,
hints, due jobs) whether to claim. Taking work in (``intake``): claims sized by ``claimsize`` from
``observed_durations``, made by ``claimer``, jobs admitted by ``concurrency_admission`` and
``rate_admission``. The dispatcher (``dispatcher``) starts the jobs of the claimed batches (``batches``: a
claimed batch's life) on the main thread or in slots; ``claim_shrinker`` gives back what claims sized
blind took too much of. Running them (``running``): ``job_runner``, ``slots``, ``context``, ``cancels``,
``progress``, ``job_spans``, ``parents``. Settling them (``settling``): outcomes written (``outcomes``)
and reported (``report``, ``worker_metrics``), ``leases``, ``runs``. A background thread
(``background``) runs the heartbeat (``heartbeat``, extending the leases) and the leader's maintainer
(mysqlq.leader). ``lint-imports`` keeps the stages' order: each imports only those after it.

The package imports its loop only when ``mysqlq.worker.Worker`` is first used:
``mysqlq.worker.running.context``
(JobContext, which every handler module may import) must not bring the whole worker into an
application that only enqueues."""

from __future__ import annotations

from typing import Any


def __getattr__(name: str) -> Any:
    """``mysqlq.worker.Worker``, imported on first use."""
    if name == "Worker":
        from mysqlq.worker.loop import Worker

        return Worker
    raise AttributeError(f"module 'mysqlq.worker' has no attribute {name!r}")
