"""How many jobs to claim: only what the worker's slots can start soon, judged by recent durations."""

from __future__ import annotations

import math

from mysqlq.core.jobs import ClaimedJob

HORIZON = 0.05  # seconds: a claimed job should start within about this long
WEIGHT = 0.2  # of the newest duration in the moving average


class Durations:
    """A moving average of how long recent jobs took, by key (a queue, or a handler)."""

    def __init__(self) -> None:
        self._average: dict[str, float] = {}

    def observe(self, key: str, seconds: float) -> None:
        average = self._average
        previous = average.get(key)
        average[key] = seconds if previous is None else previous + WEIGHT * (seconds - previous)

    def observe_many(self, key: str, total: float, count: int) -> None:
        """``count`` jobs that took ``total`` seconds in all, as if observed one by one at their mean."""
        average = self._average
        previous, mean = average.get(key), total / count
        average[key] = mean if previous is None else previous + (1 - (1 - WEIGHT) ** count) * (mean - previous)

    def get(self, key: str) -> float | None:
        return self._average.get(key)

    def get_or(self, key: str, unknown: float) -> float:
        return self._average.get(key, unknown)


def wanted(slots: int, free: int, average: float, batch_size: int) -> int:
    """How many jobs the worker should hold unstarted or about to start: ``free`` slots start one at
    once, and each of the ``slots`` starts another every ``average`` seconds, so ``slots * HORIZON /
    average`` more start within the horizon."""
    soon = slots * HORIZON / max(average, 1e-6)
    return min(free + (math.floor(soon) if soon < batch_size else batch_size), batch_size)


def claim_limit(slots: int, free: int, stock: int, average: float | None, batch_size: int) -> int:
    """How many jobs to claim now; 0 means not now.

    ``stock`` jobs are in hand already, unstarted. Until a duration is known the claim is full, as
    for short jobs, so a cold start loses no round trip; the dispatcher gives back what it cannot start
    soon once the first job says how long they take (:func:`surplus`). A claim smaller than half of
    what could be wanted waits for the stock to run lower (claims stay batched).

    One slot claims a whole batch once the last one is used up, as a worker always has: its jobs
    run one after another on the main thread.
    """
    if slots == 1:
        return batch_size if stock == 0 and free else 0
    want = batch_size if average is None else wanted(slots, free, average, batch_size)
    room = want - stock
    if room <= 0 or (room < want / 2 and free == 0):
        return 0
    return room


def surplus(slots: int, free: int, stock: int, average: float, batch_size: int) -> int:
    """Of ``stock`` jobs claimed before their duration was known, how many to give back now that
    ``average`` is known (or bounded from below by a job still running): those beyond what the slots
    start within the horizon, left for other workers."""
    return max(0, stock - wanted(slots, free, average, batch_size))


class InlineDurations:
    """Durations of jobs run one after another on the main thread, observed once per run of one
    queue and handler instead of once per job."""

    __slots__ = ("count", "handler", "queue", "runs", "total")

    def __init__(self) -> None:
        self.queue, self.handler, self.total, self.count = "", "", 0.0, 0
        self.runs: list[tuple[str, str, float, int]] = []

    def add(self, job: ClaimedJob, seconds: float) -> None:
        if job.queue == self.queue and job.handler == self.handler:
            self.total += seconds
            self.count += 1
            return
        if self.count:
            self.runs.append((self.queue, self.handler, self.total, self.count))
        self.queue, self.handler, self.total, self.count = job.queue, job.handler, seconds, 1

    def observe(self, by_queue: Durations, by_handler: Durations) -> None:
        """Into the moving averages; the tally starts over."""
        if self.count:
            self.runs.append((self.queue, self.handler, self.total, self.count))
        for queue, handler, total, count in self.runs:
            by_queue.observe_many(queue, total, count)
            by_handler.observe_many(handler, total, count)
        self.runs, self.total, self.count = [], 0.0, 0
