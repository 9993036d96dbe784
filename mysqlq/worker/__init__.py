"""The worker process, in the stages of a job's life. Its loop (``loop``) asks the lookout (``lookout``:
polls, hints, due jobs) whether to claim. Taking work in (``intake``): claims sized by ``claimsize``
and paced by ``pace``, made by ``claimer``, keys admitted by ``limits`` and ``rates``. The keeper
(``keeper``) holds the claimed batches (``batches``, giving back by ``giveback``) and starts their jobs
on the main thread or in slots. Running them (``running``): ``runner``, ``slots``, ``context``,
``cancels``, ``progress``, ``tracing``. Settling them (``settling``): outcomes written (``outcomes``)
and reported (``report``, ``metrics``), leases (``leases``). A background thread (``services``) runs
the heartbeat (``heartbeat``, extending the leases) and the leader's maintainer (mysqlq.leader).
``lint-imports`` keeps the stages' order: each imports only those after it.

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
