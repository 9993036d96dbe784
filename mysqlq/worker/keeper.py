"""Jobs in a concurrent worker's hands: claimed batches, their unstarted jobs, the slots running
the others, and their outcomes on the way to the database."""

from __future__ import annotations

import time
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from mysqlq.core.config import Settings
from mysqlq.core.jobs import ClaimedJob
from mysqlq.store import claims
from mysqlq.store.db import Database
from mysqlq.worker.claimsize import Durations
from mysqlq.worker.outcomes import Outcome, OutcomeBuffer
from mysqlq.worker.runner import Runner, timed_out
from mysqlq.worker.slots import Running, Slots

INLINE_BELOW = 0.001  # seconds: a plain handler this quick runs on the main thread (a hand-off costs more)

# Called with a batch's logger, the outcomes just written (in order) and the ids fenced out among them.
Flushed = Callable[[Any, list[tuple[ClaimedJob, Outcome]], set[int]], None]


@dataclass(eq=False)
class Batch:
    """One claim: its token, when it was made, the jobs not yet started and the outcomes to write."""

    batch_id: int
    claimed_at: float  # monotonic, taken before the claim was sent
    jobs: deque[ClaimedJob]
    buffer: OutcomeBuffer
    log: Any
    in_flight: int = 0


class InHand:
    """Starts jobs in free slots (earliest batch first), collects what they return, writes outcomes.

    Everything here runs on the worker's main thread; the slots' threads only run handlers.
    """

    def __init__(self, settings: Settings, runner: Runner, db: Database, log: Any,
                 lease_doubtful: Callable[[int, float], bool], flushed: Flushed,
                 on_retry: Callable[[float], None], notifier: Any) -> None:
        self.settings = settings
        self.runner = runner
        self.db = db
        self.log = log
        self.lease_doubtful = lease_doubtful
        self.flushed = flushed
        self.on_retry = on_retry
        self.notifier = notifier
        self.slots = Slots(settings.concurrency, settings, runner)
        self.batches: dict[int, Batch] = {}
        self.by_queue = Durations()  # sizes claims
        self.by_handler = Durations()  # picks the main thread for very quick handlers
        self.stuck: Running | None = None
        self.halted = False  # set by the worker's signal handler: start nothing more, even mid-batch

    # ------------------------------------------------------------------ what the worker asks

    @property
    def stock(self) -> int:
        """Claimed jobs not yet started."""
        return sum(len(batch.jobs) for batch in self.batches.values())

    @property
    def empty(self) -> bool:
        return not self.batches and not self.slots.running

    def batch_ids(self) -> tuple[int, ...]:
        """The batches in hand (read by the heartbeat thread: a tuple copy is atomic)."""
        return tuple(self.batches)

    def add(self, batch_id: int, claimed_at: float, jobs: list[ClaimedJob]) -> None:
        self.batches[batch_id] = Batch(batch_id, claimed_at, deque(jobs), OutcomeBuffer(batch_id, self.settings),
                                       self.log.bind(batch_id=batch_id))

    def deadline(self) -> float | None:
        """When the worker must look again even if nothing happens: a flush or a job's limit."""
        times = [batch.buffer.first_at + self.settings.flush_interval
                 for batch in self.batches.values() if batch.buffer.first_at is not None]
        job = self.slots.next_deadline(time.monotonic())
        if job is not None:
            times.append(job)
        return min(times) if times else None

    # ------------------------------------------------------------------ one turn

    def turn(self, starting: bool) -> None:
        """Collect finished jobs, time out overdue ones, start new ones (unless ``starting`` is off),
        and write outcomes that are due."""
        self.collect()
        self.police(time.monotonic())
        if starting and self.stuck is None:
            self.dispatch()
        else:
            self.release_stock()
        self.write(final_only=False)

    def collect(self) -> None:
        for running in self.slots.finished():
            batch = self.batches[running.batch_id]
            batch.in_flight -= 1
            outcome = running.outcome
            assert outcome is not None
            if running.timed_out:  # already recorded as failed at its limit
                batch.log.warning("job.returned_late", job_id=running.job.id, handler=running.job.handler,
                                  duration=round(outcome.duration, 6))
                continue
            self._observe(running.job, outcome)
            if outcome.kind == "release":
                # The database failed under a transactional handler: reconnect that slot later and
                # give this job and the rest of its batch back, unspent.
                batch.log.warning("batch.interrupted", job_id=running.job.id,
                                  error=(outcome.error or "").split("\n", 1)[0])
                self.slots.drop_connection(running.slot)
                self._release(batch, [running.job, *batch.jobs])
                batch.jobs.clear()
                continue
            batch.buffer.add(running.job, outcome)

    def police(self, now: float) -> None:
        """A thread past its limit: its job is recorded failed now. One far past it: the worker is stuck."""
        for running in self.slots.overdue(now):
            running.timed_out = True
            self.batches[running.batch_id].buffer.add(running.job, timed_out(running.prepared.limit,
                                                                               running.prepared.started))
        if self.stuck is None:
            for running in self.slots.stuck(now):
                self.stuck = running
                self.log.error("worker.stuck", job_id=running.job.id, handler=running.job.handler,
                               limit=running.prepared.limit,
                               note="a handler did not return after its time limit; finishing the other jobs, "
                                    "then exiting to be restarted")
                break

    def dispatch(self) -> None:
        # The hot path of no-op jobs: lookups hoisted out of the loop.
        slots, prepare, call, quick = self.slots, self.runner.prepare, self.runner.call, self.by_handler.get
        lease_doubtful, notifier = self.lease_doubtful, self.notifier
        for batch in list(self.batches.values()):
            jobs, batch_id, add = batch.jobs, batch.batch_id, batch.buffer.add
            while jobs and slots.free and not self.halted:
                if lease_doubtful(batch_id, batch.claimed_at):
                    batch.log.warning("batch.abandoned", jobs=len(jobs),
                                      note="the claim's lease may have lapsed; running none of the rest")
                    self._release(batch, list(jobs))
                    jobs.clear()
                    break
                job = jobs.popleft()
                prepared = prepare(job)
                if isinstance(prepared, Outcome):
                    add(job, prepared)
                    continue
                if not prepared.is_async and not prepared.transactional:
                    average = quick(job.handler)
                    if average is not None and average < INLINE_BELOW:
                        notifier.in_job = True
                        outcome = call(prepared, batch_id, None, alarm=True)
                        notifier.in_job = False
                        self._observe(job, outcome)
                        add(job, outcome)
                        continue
                slots.start(job, batch_id, prepared)
                batch.in_flight += 1
            if not slots.free:
                return

    def release_stock(self) -> None:
        """Give back every claimed job not yet started (stopping, or stuck)."""
        for batch in self.batches.values():
            if batch.jobs:
                self._release(batch, list(batch.jobs))
                batch.jobs.clear()

    def write(self, final_only: bool) -> None:
        """Write due outcomes; a batch with nothing left to run is written in full and let go.
        ``final_only`` is for the exit: whatever is pending is written, finished or not."""
        for batch in list(self.batches.values()):
            if not batch.jobs and batch.in_flight == 0:
                self._flush(batch, final=True)
                del self.batches[batch.batch_id]
            elif final_only or batch.buffer.due():
                self._flush(batch, final=False)

    def close(self) -> None:
        self.slots.close()

    # ------------------------------------------------------------------ helpers

    def _observe(self, job: ClaimedJob, outcome: Outcome) -> None:
        self.by_queue.observe(job.queue, outcome.duration)
        self.by_handler.observe(job.handler, outcome.duration)

    def _flush(self, batch: Batch, final: bool) -> None:
        entries, lost = batch.buffer.flush(self.db, final)
        if batch.buffer.next_retry is not None:
            self.on_retry(batch.buffer.next_retry)
        self.flushed(batch.log, entries, lost)

    def _release(self, batch: Batch, jobs: list[ClaimedJob]) -> None:
        ids = [job.id for job in jobs]
        if ids:
            released = self.db.run(lambda cur: claims.release(cur, batch.batch_id, ids))
            batch.log.info("batch.released", jobs=released)
