"""The worker process. Its loop (``loop``) asks the lookout (``lookout``: polls, hints, due jobs)
whether to claim, claims (``claimer``, sized by ``claimsize``, keys admitted by ``limits``) and hands
the batch to the keeper (``keeper``), which starts jobs on the main thread or in slots (``slots``,
each job run by ``runner``), writes their outcomes (``outcomes``) and reports them (``report``,
``metrics``). A background thread (``services``) runs the heartbeat (``heartbeat``, extending the
leases of ``leases``) and the leader's maintainer (mysqlq.leader)."""

from __future__ import annotations

from mysqlq.worker.loop import Worker

__all__ = ["Worker"]
