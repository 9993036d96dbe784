"""The batches in a worker's hands: their unstarted jobs, the slots running the others, and their
outcomes on the way to the database, in the log, and back to the concurrency limits.

One engine for every concurrency. A plain (``def``) handler runs on the main thread, under its
time limit (SIGALRM), when the worker has one slot or when the handler is known to be quicker than a
hand-off to a thread; otherwise jobs run in the slots (mysqlq.worker.slots). ``--concurrency 1``
therefore runs every plain job on the main thread, one after another, with the statements of a
worker that never had slots.
"""

from __future__ import annotations

import math
import time
from collections import deque
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from typing import Any

import MySQLdb

from mysqlq.core.config import Settings
from mysqlq.core.errors import DatabaseUnavailable
from mysqlq.core.jobs import ClaimedJob
from mysqlq.core.systemd import Notifier
from mysqlq.store import claims
from mysqlq.store.db import Connection, Database
from mysqlq.worker.claimsize import HORIZON, Durations, Tally, surplus
from mysqlq.worker.leases import Leases
from mysqlq.worker.limits import Limits, keyed
from mysqlq.worker.outcomes import Outcome, OutcomeBuffer
from mysqlq.worker.report import Report
from mysqlq.worker.runner import HandlerSpec, Prepared, Runner, describe, timed_out
from mysqlq.worker.slots import Running, Slots

INLINE_BELOW = 0.001  # seconds: a plain handler this quick runs on the main thread (a hand-off costs more)
INLINE_TURN = 0.1  # seconds of jobs run on the main thread before the worker's loop gets a turn
UNSET = HandlerSpec(lambda payload, ctx: None, None, False, False)  # dispatch's placeholder before a handler is known


@dataclass(eq=False)
class Batch:
    """One claim: its token, the jobs not yet started and the outcomes to write."""

    batch_id: int
    jobs: deque[ClaimedJob]
    buffer: OutcomeBuffer
    log: Any
    ids: list[int]  # every job of the claim
    in_flight: int = 0
    keyed: bool = False  # some of its jobs carry a concurrency key (mysqlq.worker.limits)
    blind: bool = False  # claimed in full before its queue's durations were known (see shrink)
    looked: float = 0.0  # when shrink last looked at it (monotonic)


def cancelled(outcome: Outcome) -> Outcome:
    """The outcome of a job cancelled while it ran, whatever its handler did: its row is final already."""
    return Outcome("cancelled", outcome.duration, "cancelled while it ran", recorded=True)


class Keeper:
    """Starts jobs (earliest batch first), collects what they return, writes, logs and settles outcomes.

    Everything here runs on the worker's main thread; the slots' threads only run handlers. What the
    worker's loop needs to hear back (a retry coming due, queues that gained ready jobs) it reads
    with :meth:`news` after each turn.
    """

    def __init__(self, settings: Settings, runner: Runner, db: Database, log: Any, leases: Leases,
                 limits: Limits, report: Report, notifier: Notifier,
                 wake: Callable[[Iterable[str]], None]) -> None:
        self.settings = settings
        self.runner = runner
        self.db = db
        self.log = log
        self.leases = leases
        self.cancels = runner.cancels
        self.limits = limits
        self.report = report
        self.notifier = notifier
        self.wake = wake  # tells other workers that queues gained ready jobs
        self.slots = Slots(settings.concurrency, settings, runner)
        # The connection of a transactional handler run on this thread: not the worker's own, which
        # takes several statements in one query (a handler's SQL never gets one that does).
        self.handler_db = Database(settings.dsn, isolation=settings.isolation)
        self.slots.doubtful = leases.doubtful
        alarm = runner.alarm
        notifier.job_deadline = lambda: alarm.deadline  # the keep-alive thread feeds the watchdog meanwhile
        self.inline_all = settings.concurrency == 1
        self.batches: dict[int, Batch] = {}
        self.by_queue = Durations()  # sizes claims
        self.by_handler = Durations()  # picks the main thread for very quick handlers
        self.stuck: Running | None = None
        self.halted = False  # set by the worker's signal handler: start nothing more, even mid-batch
        self._retry_in: float | None = None
        self._ready_queues: set[str] = set()
        self._yielded = False  # the last dispatch stopped with jobs it could have started
        # A batch that ended with plain successes only, its completion to go with the next claim.
        self.ended: Batch | None = None

    # ------------------------------------------------------------------ what the worker asks

    @property
    def stock(self) -> int:
        """Claimed jobs not yet started."""
        return sum(len(batch.jobs) for batch in self.batches.values())

    @property
    def empty(self) -> bool:
        return not self.batches and not self.slots.running

    def add(self, batch_id: int, claimed_at: float, jobs: list[ClaimedJob], blind: bool = False) -> None:
        """Take a claim in hand; ``blind``: sized before its queue's durations were known."""
        self.leases.hold(batch_id, claimed_at)
        self.cancels.hold(job.id for job in jobs)
        self.batches[batch_id] = Batch(batch_id, deque(jobs), OutcomeBuffer(batch_id, self.settings),
                                       self.log.bind(batch_id=batch_id), [job.id for job in jobs],
                                       blind=blind and self.settings.concurrency > 1, keyed=keyed(jobs))

    def estimate(self, queue: str, now: float) -> float | None:
        """How long a job of ``queue`` takes: the recent average or, before one has finished, a lower
        bound once one has run longer than the claim horizon (None: not known yet)."""
        average = self.by_queue.get(queue)
        if average is not None:
            return average
        at = self._horizon(queue)
        return None if at is None or now < at else now - (at - HORIZON)

    def _horizon(self, queue: str) -> float | None:
        """When the longest-running job of ``queue`` in a slot passes the claim horizon (None: none runs)."""
        starts = [r.prepared.started for r in self.slots.running.values() if r.job.queue == queue]
        return min(starts) + HORIZON if starts else None

    def deadline(self) -> float | None:
        """When the worker must look again even if nothing happens: now when jobs wait to be started,
        else a flush or a job's limit."""
        if self._yielded:
            return time.monotonic()
        times = [batch.buffer.due_at for batch in self.batches.values() if batch.buffer.due_at != math.inf]
        if self.slots.running:
            # A blind claim is sized again once a job of its queue has run past the horizon without
            # finishing: then, or at once when the loop comes to wait later than that (a busy
            # moment), unless it has been looked at since.
            for batch in self.batches.values():
                if batch.blind and batch.jobs:
                    at = self._horizon(batch.jobs[0].queue)
                    if at is not None and at > batch.looked:
                        times.append(at)
        job = self.slots.next_deadline(time.monotonic())
        if job is not None:
            times.append(job)
        return min(times) if times else None

    def news(self) -> tuple[float | None, set[str]]:
        """Since the last call: the shortest retry delay written (seconds), and the queues whose
        waiting jobs became ready (concurrency slots given back)."""
        news = self._retry_in, self._ready_queues
        self._retry_in, self._ready_queues = None, set()
        return news

    # ------------------------------------------------------------------ one turn

    def turn(self, starting: bool) -> None:
        """Collect finished jobs, time out overdue ones, start new ones (unless ``starting`` is off),
        and write outcomes that are due."""
        self.collect()
        self.police(time.monotonic())
        self._yielded = False
        if starting and self.stuck is None:
            self.shrink(time.monotonic())
            self.dispatch()
        else:
            self.release_stock()
        self.write(final_only=False, hold=starting)

    def collect(self) -> None:
        for running in self.slots.finished():
            batch = self.batches[running.batch_id]
            batch.in_flight -= 1
            outcome = running.outcome
            assert outcome is not None
            if running.timed_out:  # already recorded as failed at its limit
                batch.log.warning("job.returned_late", job_id=running.job.id, handler=running.job.handler,
                                  duration=outcome.duration)
                continue
            self._observe(running.job, outcome)
            if running.job.id in self.cancels.requested:
                outcome = cancelled(outcome)
            elif outcome.kind == "release":
                self.slots.drop_connection(running.slot)
                self._interrupted(batch, running.job, outcome)
                continue
            batch.buffer.add(running.job, outcome)

    def shrink(self, now: float) -> None:
        """Give back what a blind claim holds beyond what the slots start soon, once a job of its queue
        says how long they take: slow jobs are left to other workers (woken for them), not hoarded."""
        for batch in list(self.batches.values()):
            if not batch.blind:
                continue
            if not batch.jobs:
                batch.blind = False
                continue
            queue = batch.jobs[0].queue
            batch.looked = now
            estimate = self.estimate(queue, now)
            if estimate is None:
                continue
            batch.blind = self.by_queue.get(queue) is None  # a lower bound only: size it again once one finishes
            excess = min(len(batch.jobs), surplus(self.settings.concurrency, len(self.slots.free), self.stock,
                                                  estimate, self.settings.batch_size))
            if excess:
                jobs = [batch.jobs.pop() for _ in range(excess)][::-1]
                self._release(batch, jobs, note=f"jobs of {queue} take about {estimate:.3g} s: left for other workers")
                self.wake({job.queue for job in jobs})

    def police(self, now: float) -> None:
        """A thread past its limit: its job is recorded failed now. One far past it: the worker is stuck."""
        for running in self.slots.overdue(now):
            running.timed_out = True
            outcome = timed_out(running.prepared.limit, running.prepared.started)
            if running.job.id in self.cancels.requested:
                outcome = cancelled(outcome)
            self.batches[running.batch_id].buffer.add(running.job, outcome)
        if self.stuck is None:
            for running in self.slots.stuck(now):
                self.stuck = running
                self.log.error("worker.stuck", job_id=running.job.id, handler=running.job.handler,
                               limit=running.prepared.limit,
                               note="a handler did not return after its time limit; finishing the other jobs, "
                                    "then exiting to be restarted")
                break

    def dispatch(self) -> None:
        """Start jobs while slots are free: in a slot, or on this thread (see the module's docstring)."""
        # The hot path of no-op jobs: lookups hoisted out of the loop, and a quick plain job run
        # here in one call (Runner.run_here) with its duration tallied for the batch, not per job.
        slots, leases, runner, specs = self.slots, self.leases, self.runner, self.runner.specs
        on_main, run_here, monotonic = self._on_main, runner.run_here, time.monotonic
        inline_all, requested = self.inline_all, self.cancels.requested
        until = monotonic() + INLINE_TURN
        for batch in list(self.batches.values()):
            jobs, batch_id, buffer = batch.jobs, batch.batch_id, batch.buffer
            add_done = buffer.add_done
            safe_until = leases.safe_until(batch_id)
            tally = Tally()
            # The handler of the last job run here, known to be quick and plain (None: none yet).
            here: str | None = None
            here_spec = UNSET
            try:
                while jobs and slots.free and not self.halted:
                    now = monotonic()
                    if now >= safe_until and now >= (safe_until := leases.safe_until(batch_id)):
                        batch.log.warning("batch.abandoned", jobs=len(jobs),
                                          note="the claim's lease may have lapsed; running none of the rest")
                        self._release(batch, list(jobs))
                        jobs.clear()
                        break
                    if now >= until or now >= buffer.due_at:
                        self._yielded = True  # the loop's turn: watchdog, polls, outcomes due
                        return
                    job = jobs.popleft()
                    if requested and job.id in requested:  # cancelled before it started
                        buffer.add(job, Outcome("cancelled", 0.0, "cancelled before it started", recorded=True))
                        continue
                    handler = job.handler
                    if handler != here:  # else the same handler as the last job run here
                        spec = specs.get(handler)
                        if spec is None or spec.transactional or not on_main(handler, spec.is_async, False):
                            if not self._start(batch, job):
                                break
                            continue
                        here, here_spec = handler, spec
                    outcome = run_here(job, here_spec)
                    if isinstance(outcome, float):  # done, nothing to store: the seconds it took
                        if not inline_all:
                            tally.add(job, outcome)
                        if requested and job.id in requested:
                            buffer.add(job, cancelled(Outcome("done", outcome)))
                        else:
                            add_done(job, outcome)
                        continue
                    if not inline_all:
                        tally.add(job, outcome.duration)
                    if requested and job.id in requested:
                        outcome = cancelled(outcome)
                    buffer.add(job, outcome)
                if not slots.free:
                    return
            finally:
                tally.observe(self.by_queue, self.by_handler)

    def _start(self, batch: Batch, job: ClaimedJob) -> bool:
        """Start a job that is not a known quick plain one: its outcome at once when it cannot start,
        on this thread (transactional, or the one slot), or in a slot. False when the database failed
        under a transactional handler run here (the rest of the batch went back)."""
        prepared = self.runner.prepare(job)
        if isinstance(prepared, Outcome):
            batch.buffer.add(job, prepared)
            return True
        if self._on_main(job.handler, prepared.is_async, prepared.transactional):
            return self._run_inline(batch, prepared)
        self.slots.start(job, batch.batch_id, prepared)
        batch.in_flight += 1
        return True

    def _on_main(self, handler: str, is_async: bool, transactional: bool) -> bool:
        """Whether a job of ``handler`` runs on this thread (see the module's docstring): never an
        async one; every other one with one slot; else a plain one known to be quicker than a hand-off."""
        if is_async:
            return False
        return self.inline_all or (not transactional and self.by_handler.get_or(handler, 1.0) < INLINE_BELOW)

    def release_stock(self) -> None:
        """Give back every claimed job not yet started (stopping, or stuck)."""
        for batch in self.batches.values():
            if batch.jobs:
                self._release(batch, list(batch.jobs))
                batch.jobs.clear()

    def write(self, final_only: bool, hold: bool = False) -> None:
        """Write due outcomes; a batch with nothing left to run is written in full and let go.
        ``final_only`` is for the exit: whatever is pending is written, finished or not. ``hold``: a
        batch that ended with plain successes only is kept as :attr:`ended`, for the claim that
        follows in this turn to carry its completion (see :meth:`finish`)."""
        if final_only:
            self.finish()
        for batch in list(self.batches.values()):
            if batch is self.ended:
                continue
            if not batch.jobs and batch.in_flight == 0:
                if hold and self.ended is None and batch.buffer.plain:
                    self.ended = batch
                    continue
                self._end(batch)
            elif final_only or batch.buffer.due():
                self._flush(batch, final=False)

    def finish(self, completed: int | None = None) -> None:
        """Write the batch held as :attr:`ended`, if any: ``completed`` is what its completion changed
        when it went with a claim; None writes it now."""
        batch = self.ended
        if batch is not None:
            self.ended = None
            self._end(batch, completed)

    def close(self) -> None:
        self.runner.alarm.off()
        self.slots.close()
        self.handler_db.close()
        self.runner.read_parents.close()

    # ------------------------------------------------------------------ helpers

    def _run_inline(self, batch: Batch, prepared: Prepared) -> bool:
        """Run a plain job on this thread, its limit enforced by SIGALRM; False when the database
        failed under its transaction (the job and the rest of the batch went back, unspent)."""
        job = prepared.job
        conn: Connection | None = None
        try:
            conn = self.handler_db.conn if prepared.transactional else None
        except (DatabaseUnavailable, MySQLdb.Error) as exc:
            outcome = Outcome("release", 0.0, describe(exc))
        else:
            outcome = self.runner.call(prepared, batch.batch_id, conn, alarm=True)
        if not self.inline_all:  # durations size claims and pick the main thread only with several slots
            self._observe(job, outcome)
        if job.id in self.cancels.requested:
            outcome = cancelled(outcome)
        elif outcome.kind == "release":
            self.handler_db.close()  # the next transactional job reconnects
            self._interrupted(batch, job, outcome)
            return False
        batch.buffer.add(job, outcome)
        return True

    def _interrupted(self, batch: Batch, job: ClaimedJob, outcome: Outcome) -> None:
        """The database failed under a transactional handler: give this job and the rest of its
        batch back, unspent."""
        batch.log.warning("batch.interrupted", job_id=job.id, error=(outcome.error or "").split("\n", 1)[0])
        self._release(batch, [job, *batch.jobs])
        batch.jobs.clear()

    def _observe(self, job: ClaimedJob, outcome: Outcome) -> None:
        self.by_queue.observe(job.queue, outcome.duration)
        self.by_handler.observe(job.handler, outcome.duration)

    def _end(self, batch: Batch, completed: int | None = None) -> None:
        """Write the rest of a batch that has nothing left to run, and let it go."""
        self._flush(batch, final=True, completed=completed)
        del self.batches[batch.batch_id]
        self.leases.drop(batch.batch_id)
        self.cancels.let_go(batch.ids)

    def _flush(self, batch: Batch, final: bool, completed: int | None = None) -> None:
        """Write a batch's pending outcomes; then give back the concurrency slots of those written
        (waking whoever serves the queues that gained ready jobs), then log them. ``completed``:
        the final completion went already, with a claim (what it changed)."""
        entries, lost, done_only = batch.buffer.flush(self.db, final, completed)
        retry = batch.buffer.next_retry
        if retry is not None:
            self._retry_in = retry if self._retry_in is None else min(self._retry_in, retry)
        if batch.keyed and keyed(job for job, _ in entries):
            self._gained(self.limits.settle(job for job, _ in entries))
        if batch.buffer.woken:  # jobs that waited for these are ready now
            self._gained(batch.buffer.woken)
            batch.buffer.woken = set()
        self.report.written(batch.log, entries, lost, done_only)

    def _gained(self, queues: set[str]) -> None:
        """Queues that gained ready jobs by what this worker wrote: claim from them, wake the others."""
        if queues:
            self._ready_queues |= queues
            self.wake(queues)

    def _release(self, batch: Batch, jobs: list[ClaimedJob], note: str | None = None) -> None:
        """Give claimed jobs back unstarted (no attempt spent); outcomes pending go first."""
        self._flush(batch, final=False)
        ids = [job.id for job in jobs]
        if ids:
            released = self.db.run(lambda cur: claims.release(cur, batch.batch_id, ids))
            batch.log.info("batch.released", jobs=released, note=note)
            self.cancels.let_go(ids)
