"""The worker process: its loop (``loop``), the batches in its hands (``keeper``), the slots that run
handlers (``slots``, ``runner``), outcomes and their writes (``outcomes``), concurrency limits at claim
(``limits``), its heartbeat and leases (``heartbeat``) and its own metrics (``metrics``)."""

from __future__ import annotations

from mysqlq.worker.loop import Worker

__all__ = ["Worker"]
