"""Claims sized blind give back what they hold beyond what the slots start soon.

Before a queue's durations are known a worker claims a whole batch, as for short jobs, so that a
cold start loses no round trip (mysqlq.worker.intake.claimsize.claim_limit). Once a job of the queue says
how long they take, or has run past the claim horizon without finishing (a lower bound), the jobs
the slots cannot start within the horizon go back, unspent, and other workers are woken for them:
slow jobs are not hoarded.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable

from mysqlq.core.config import Settings
from mysqlq.worker.batches import Batches
from mysqlq.worker.intake.claimsize import surplus
from mysqlq.worker.intake.observed_durations import ObservedDurations
from mysqlq.worker.running.slots import Slots


class ClaimShrinker:
    """Looks at the claims sized blind (see the module's docstring)."""

    def __init__(self, settings: Settings, batches: Batches, slots: Slots, durations: ObservedDurations,
                 wake: Callable[[Iterable[str]], None]) -> None:
        self.settings = settings
        self.batches = batches
        self.slots = slots
        self.durations = durations
        self.wake = wake  # tells other workers that queues gained ready jobs

    def next_look(self) -> float | None:
        """When a claim sized blind is to be looked at again: once a job of its queue has run past the
        horizon without finishing (then, or at once when the loop comes to wait later than that, a busy
        moment), unless it has been looked at since."""
        times = []
        if self.slots.running:
            for batch in self.batches.values():
                if batch.unsized and batch.jobs:
                    at = self.durations.horizon(batch.jobs[0].queue)
                    if at is not None and at > batch.looked:
                        times.append(at)
        return min(times) if times else None

    def look(self, now: float) -> None:
        """Give back the surplus of each claim sized blind whose queue's duration is known by now."""
        batches, settings = self.batches, self.settings
        for batch in batches.values():
            if not batch.unsized:
                continue
            if not batch.jobs:
                batch.unsized = False
                continue
            queue = batch.jobs[0].queue
            batch.looked = now
            estimate = self.durations.estimate(queue, now)
            if estimate is None:
                continue
            batch.unsized = not self.durations.known(queue)  # a lower bound only: size it again once one finishes
            excess = min(len(batch.jobs), surplus(settings.concurrency, len(self.slots.free), batches.unstarted,
                                                  estimate, settings.batch_size))
            if excess:
                jobs = [batch.jobs.pop() for _ in range(excess)][::-1]
                note = f"jobs of {queue} take about {estimate:.3g} s: left for other workers"
                batches.release(batch, jobs, note=note)
                self.wake({job.queue for job in jobs})
