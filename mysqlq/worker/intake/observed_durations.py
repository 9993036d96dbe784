"""How long jobs take on this worker: moving averages by queue (they size claims) and by handler (a
very quick plain handler runs on the main thread), and the lower bound a job still running gives."""

from __future__ import annotations

from mysqlq.core.jobs import ClaimedJob
from mysqlq.worker.intake.claimsize import HORIZON, Durations, InlineDurations
from mysqlq.worker.running.slots import Slots

INLINE_BELOW = 0.001  # seconds: a plain handler this quick runs on the main thread (a hand-off costs more)


class ObservedDurations:
    """What the worker has seen of its jobs' durations (see the module's docstring)."""

    def __init__(self, slots: Slots) -> None:
        self.slots = slots  # its running jobs bound the duration of their queue from below
        self.by_queue = Durations()
        self.by_handler = Durations()

    def observe(self, job: ClaimedJob, seconds: float) -> None:
        self.by_queue.observe(job.queue, seconds)
        self.by_handler.observe(job.handler, seconds)

    def tallied(self, tally: InlineDurations) -> None:
        """Jobs run one after another on the main thread, counted per run of one queue and handler."""
        tally.observe(self.by_queue, self.by_handler)

    def known(self, queue: str) -> bool:
        """A job of ``queue`` has finished here: its average is known, not only a lower bound."""
        return self.by_queue.get(queue) is not None

    def quick(self, handler: str) -> bool:
        """Is ``handler`` known to be quicker than a hand-off to a slot's thread?"""
        return self.by_handler.get_or(handler, 1.0) < INLINE_BELOW

    def estimate(self, queue: str, now: float) -> float | None:
        """How long a job of ``queue`` takes: the recent average or, before one has finished, a lower
        bound once one has run longer than the claim horizon (None: not known yet)."""
        average = self.by_queue.get(queue)
        if average is not None:
            return average
        at = self.horizon(queue)
        return None if at is None or now < at else now - (at - HORIZON)

    def horizon(self, queue: str) -> float | None:
        """When the longest-running job of ``queue`` in a slot passes the claim horizon (None: none runs)."""
        starts = [r.prepared.started for r in self.slots.running.values() if r.job.queue == queue]
        return min(starts) + HORIZON if starts else None
