"""Turns for a queue's jobs without a fairness key, given by its workers as they claim.

A job without a key is enqueued without a turn and waits behind the keyed jobs of its priority
(mysqlq.store.fairness). A worker that claimed keyed jobs from a queue lately gives the queue's jobs
without a key turns before each claim there, as one key of their own, when the claim could reach
past the last turn they were given: in a queue with keys, they are served in turn with the keys; in
a queue that never had keyed jobs (none claimed by this worker lately), nothing is sent. A queue
that gains keyed jobs is known at the next claim: keyed jobs are claimed first there.
"""

from __future__ import annotations

import time
from collections.abc import Iterable

from mysqlq.core.jobs import ClaimedJob

KEYED_MEMORY = 60.0  # seconds a worker goes on giving turns in a queue after it last claimed a keyed job there


class FairTurns:
    """Which queues had keyed jobs in this worker's claims lately."""

    def __init__(self, memory: float = KEYED_MEMORY) -> None:
        self.memory = memory
        self._keyed_at: dict[str, float] = {}  # queue -> when (monotonic) a claim last took a keyed job of it

    def due(self, queue: str) -> bool:
        """Whether to give ``queue``'s jobs without a key turns before claiming there."""
        seen = self._keyed_at.get(queue)
        return seen is not None and time.monotonic() - seen < self.memory

    def saw(self, jobs: Iterable[ClaimedJob]) -> None:
        """A claim took these jobs."""
        now = None
        for job in jobs:
            if job.keyed:
                self._keyed_at[job.queue] = now = now or time.monotonic()
