"""Claiming a batch: the claim statement queue by queue (earlier queues first) under one fresh token,
the batch read back (with the last claim statement, in one round trip, where it can be), and jobs
with a concurrency key admitted or set aside (mysqlq.worker.intake.concurrency_admission). In a
queue with keyed jobs, jobs without a key are given turns first (mysqlq.worker.intake.fair_turns)."""

from __future__ import annotations

import random
import time
from collections.abc import Callable, Collection
from dataclasses import dataclass
from typing import Protocol

from mysqlq.core.config import ClaimStrategy, Settings
from mysqlq.core.jobs import ClaimedJob
from mysqlq.store import claims, fairness
from mysqlq.store.db import Connection, Cursor, Database
from mysqlq.worker.intake.concurrency_admission import Limits, keyed
from mysqlq.worker.intake.fair_turns import FairTurns
from mysqlq.worker.intake.rate_admission import Rates
from mysqlq.worker.settling.encryption import open_payloads


def new_batch_id() -> int:
    """A fresh claim token: 63 random bits, never reused in practice."""
    return random.getrandbits(63) or 1


@dataclass(slots=True, frozen=True)
class Claim:
    """What one claim took: its token, the jobs that may start (in order), whether some were set
    aside for their concurrency key, and when it was sent (monotonic: its lease runs from no
    earlier than this)."""

    batch_id: int
    jobs: list[ClaimedJob]
    set_aside: bool
    claimed_at: float
    due_in: float | None = None  # seconds until the first job set aside for its rate limit comes due


class HeldCompletion(Protocol):
    """The batch whose completion may go with the next claim (mysqlq.worker.batches.Batches)."""

    def ending(self) -> tuple[int, bool, bool] | None:
        """The token of a batch that ended with plain successes only, held for the claim, whether
        its completion deletes them (their queue keeps no history), and whether one of them may stay
        live (``in_place`` of mysqlq.store.claims.complete_batch); None: none."""

    def completed(self, count: int) -> None:
        """That completion went with the claim and changed ``count`` rows."""


class Claimer:
    """Claims for one worker (see :meth:`claim`)."""

    def __init__(self, settings: Settings, db: Database, limits: Limits, rates: Rates,
                 worker_id: Callable[[], int]) -> None:
        self.settings = settings
        self.db = db
        self.limits = limits
        self.rates = rates
        self.worker_id = worker_id
        self.statement = claims.CLAIMS[ClaimStrategy(settings.claim_strategy)]
        # The update claim of the last queue tried and the read-back go as one query, with the
        # completion of a batch that ended just before: three round trips per batch become one.
        self.merged = settings.claim_strategy == ClaimStrategy.UPDATE and db.multi_statements
        self._queue_rank = {queue: rank for rank, queue in enumerate(settings.queues)}
        self.fair_turns = FairTurns()

    def claim(self, limit: int, paused: Collection[str], ride_along: HeldCompletion | None = None) -> Claim:
        """Claim up to ``limit`` jobs. The completion of the batch ``ride_along`` holds, if any, goes in
        the same query as the last claim statement when it can (and is told so at once: that batch
        ended before this one was claimed); otherwise it stays held for its owner to write."""
        settings, statement, worker_id = self.settings, self.statement, self.worker_id()
        claimed_at = time.monotonic()
        batch_id = new_batch_id()  # made before any retry, so a retried claim keeps one token
        held = ride_along.ending() if ride_along is not None else None
        retried = self.db.retried
        queues = [queue for queue in settings.queues if queue not in paused]
        claimed = 0
        jobs: list[ClaimedJob] | None = None  # read back with the last queue's claim, when it can be
        for left, queue in enumerate(queues, 1 - len(queues)):  # left: 0 at the last queue
            room = limit - claimed
            if self.fair_turns.due(queue):  # jobs without a key given turns among the keyed ones

                def give_turns(cur: Cursor, queue: str = queue, room: int = room) -> int:
                    return fairness.give_keyless_turns(cur, queue, room)

                self.db.run(give_turns)
            if self.merged and not left:  # the last statement of the claim: read back with it

                def claim_and_fetch(conn: Connection, queue: str = queue,
                                    room: int = room) -> tuple[int | None, int, list[ClaimedJob]]:
                    ended, discard, in_place = held if held is not None else (None, False, True)
                    return claims.claim_and_fetch(conn, queue, batch_id, worker_id, settings.lease, room, ended,
                                                  discard, in_place)

                completed, _, jobs = self.db.run_on(claim_and_fetch)
                if completed is not None and ride_along is not None:
                    ride_along.completed(completed)
                break

            def claim(cur: Cursor, queue: str = queue, room: int = room) -> int:
                return statement(cur, queue, batch_id, worker_id, settings.lease, room)

            claimed += self.db.run(claim)
            if claimed >= limit:
                break
        if jobs is None:
            # Nothing claimed, and no statement retried: nothing to read back. After a retry, a claim
            # may have taken effect although its answer was lost: its jobs are read back by the token.
            if not claimed and self.db.retried == retried:
                return Claim(batch_id, [], False, claimed_at)
            jobs = self.db.run(lambda cur: claims.fetch_batch(cur, batch_id))
        if not jobs:
            return Claim(batch_id, [], False, claimed_at)
        self.fair_turns.saw(jobs)
        if settings.keys is not None:
            jobs = open_payloads(jobs, settings.keys)  # what reads them next sees plain JSON
        claimed_count = len(jobs)
        jobs = self.rates.admit(batch_id, jobs)  # those over a rate limit wait for their turn
        set_aside = len(jobs) < claimed_count
        if keyed(jobs):  # admitted, or set aside until their key has a free slot
            admitted = self.limits.admit(batch_id, jobs)
            set_aside, jobs = set_aside or len(admitted) < len(jobs), admitted
        if len(settings.queues) > 1:  # earlier queues first; within one, (priority, id) as fetched
            jobs.sort(key=lambda job: self._queue_rank.get(job.queue, 0))
        return Claim(batch_id, jobs, set_aside, claimed_at, self.rates.soonest)
