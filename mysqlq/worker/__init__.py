"""The worker process. Its loop (``loop``) asks the lookout (``lookout``: polls, hints, due jobs)
whether to claim, claims (``claimer``, sized by ``claimsize``, keys admitted by ``limits``) and hands
the batch to the keeper (``keeper``), which starts jobs on the main thread or in slots (``slots``,
each job run by ``runner``), writes their outcomes (``outcomes``) and reports them (``report``,
``metrics``). A background thread (``services``) runs the heartbeat (``heartbeat``, extending the
leases of ``leases``) and the leader's maintainer (mysqlq.leader).

The package imports its loop only when ``mysqlq.worker.Worker`` is first used: ``mysqlq.worker.context``
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
