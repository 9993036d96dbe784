"""Running the jobs in a worker's hands: which job starts where and when, what the slots hand back,
jobs past their time limit, and claims sized blind given back once their jobs' durations show. The
batches themselves and the writing of outcomes are mysqlq.worker.batches'.

One engine for every concurrency. A plain (``def``) handler runs on the main thread, under its
time limit (SIGALRM), when the worker has one slot or when the handler is known to be quicker than a
hand-off to a thread; otherwise jobs run in the slots (mysqlq.worker.running.slots). ``--concurrency 1``
therefore runs every plain job on the main thread, one after another, with the statements of a
worker that never had slots.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterable
from functools import partial

import MySQLdb

from mysqlq.core.config import Settings
from mysqlq.core.errors import DatabaseUnavailable
from mysqlq.core.jobs import ClaimedJob
from mysqlq.core.logs import Log
from mysqlq.store import rates
from mysqlq.store.db import Connection, Database
from mysqlq.worker.batches import Batch, Batches
from mysqlq.worker.claim_shrinker import ClaimShrinker
from mysqlq.worker.intake.claimsize import InlineDurations
from mysqlq.worker.intake.observed_durations import ObservedDurations
from mysqlq.worker.running.job_runner import Entry, HandlerSpec, Prepared, Runner, describe, timed_out
from mysqlq.worker.running.slots import Running, Slots
from mysqlq.worker.settling.leases import Leases
from mysqlq.worker.settling.outcomes import Outcome, cancelled_before_start

INLINE_TURN = 0.1  # seconds of jobs run on the main thread before the worker's loop gets a turn
UNSET = HandlerSpec(lambda payload, ctx: None, None, False, False)  # dispatch's placeholder before a handler is known


class StopFlag:
    """Set by the worker's signal handler: start nothing more, even mid-batch. Shared, not polled
    through a call: the dispatcher reads it before every job."""

    __slots__ = ("requested",)

    def __init__(self) -> None:
        self.requested = False


class Dispatcher:
    """Starts jobs (earliest batch first), collects what they return and hands it to the batches
    (mysqlq.worker.batches), which write, log and settle it.

    Everything here runs on the worker's main thread; the slots' threads only run handlers.
    """

    def __init__(self, settings: Settings, runner: Runner, batches: Batches, slots: Slots, leases: Leases,
                 stop: StopFlag, log: Log, wake: Callable[[Iterable[str]], None]) -> None:
        self.settings = settings
        self.runner = runner
        self.batches = batches
        self.slots = slots
        self.leases = leases
        self.stop = stop
        self.log = log
        self.cancels = runner.cancels
        # The connection of a transactional handler run on this thread: not the worker's own, which
        # takes several statements in one query (a handler's SQL never gets one that does).
        self.handler_db = Database(settings.dsn, isolation=settings.isolation, worker_name=settings.worker_name)
        self.inline_all = settings.concurrency == 1
        self.durations = ObservedDurations(slots)  # they size claims, and pick the main thread for quick handlers
        self.shrinker = ClaimShrinker(settings, batches, slots, self.durations, wake)
        self.stuck: Running | None = None
        self._yielded = False  # the last dispatch stopped with jobs it could have started

    # ------------------------------------------------------------------ what the worker asks

    @property
    def empty(self) -> bool:
        return not self.batches and not self.slots.running

    @property
    def entering(self) -> bool:
        """Whether jobs admitted under a rate limit wait for a slot: they start within their grace,
        so the worker claims nothing more until they have (a claim's admission takes milliseconds)."""
        enter_by = self.runner.enter_by
        return bool(enter_by) and any(job.id in enter_by for batch in self.batches.values() for job in batch.jobs)

    def deadline(self) -> float | None:
        """When the worker must look again even if nothing happens: now when jobs wait to be started,
        else a flush or a job's limit."""
        if self._yielded:
            return time.monotonic()
        times = [at for at in (self.batches.flush_due(), self.shrinker.next_look()) if at is not None]
        job = self.slots.next_deadline(time.monotonic())
        if job is not None:
            times.append(job)
        return min(times) if times else None

    # ------------------------------------------------------------------ one turn

    def turn(self, starting: bool) -> None:
        """Collect finished jobs, time out overdue ones, start new ones (unless ``starting`` is off),
        and write outcomes that are due."""
        self.collect()
        self.time_out_overdue(time.monotonic())
        self._yielded = False
        if starting and self.stuck is None:
            self.shrink(time.monotonic())
            self.dispatch()
        else:
            self.batches.release_unstarted()
        self.batches.write(final_only=False, hold=starting)

    def collect(self) -> None:
        """The outcomes the slots handed back since the last turn."""
        for running in self.slots.finished():
            batch = self.batches.by_id[running.batch_id]
            batch.in_flight -= 1
            outcome = running.outcome
            assert outcome is not None
            if running.timed_out:  # already recorded as failed at its limit
                batch.log.warning("job.returned_late", job_id=running.job.id, handler=running.job.handler,
                                  duration=outcome.duration)
                continue
            if outcome.kind == "late" and running.prepared.entry is not None:
                self._late(batch, [(running.job, running.prepared.entry)])
                continue
            self.durations.observe(running.job, outcome.duration)
            if outcome.kind == "release" and running.job.id not in self.cancels.requested:
                self.slots.drop_connection(running.slot)
                self._interrupted(batch, running.job, outcome)
                continue
            self.batches.record(batch, running.job, outcome)

    def shrink(self, now: float) -> None:
        """Give back what claims sized blind hold beyond what the slots start soon (mysqlq.worker.claim_shrinker)."""
        self.shrinker.look(now)

    def time_out_overdue(self, now: float) -> None:
        """A thread past its limit: its job is recorded failed now. One far past it: the worker is stuck."""
        for running in self.slots.overdue(now):
            running.timed_out = True
            self.batches.record(self.batches.by_id[running.batch_id], running.job,
                                timed_out(running.prepared.limit, running.prepared.started))
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
        slots, leases, runner, specs, stop = self.slots, self.leases, self.runner, self.runner.specs, self.stop
        on_main, run_here, monotonic, record = self._on_main, runner.run_here, time.monotonic, self.batches.record
        inline_all, requested, enter_by = self.inline_all, self.cancels.requested, runner.enter_by
        until = monotonic() + INLINE_TURN
        for batch in self.batches.values():
            jobs, batch_id, buffer = batch.jobs, batch.batch_id, batch.buffer
            add_done = buffer.add_done
            safe_until = leases.safe_until(batch_id)
            tally = InlineDurations()
            late: list[tuple[ClaimedJob, Entry]] = []  # admitted under a rate limit, their grace over before their turn
            # The handler of the last job run here, known to be quick and plain (None: none yet).
            quick: str | None = None
            quick_spec = UNSET
            try:
                while jobs and slots.free and not stop.requested:
                    now = monotonic()
                    if now >= safe_until and now >= (safe_until := leases.safe_until(batch_id)):
                        batch.log.warning("batch.abandoned", jobs=len(jobs),
                                          note="the claim's lease may have lapsed; running none of the rest")
                        self.batches.release(batch, list(jobs))
                        jobs.clear()
                        break
                    if now >= until or now >= buffer.due_at:
                        self._yielded = True  # the loop's turn: watchdog, polls, outcomes due
                        return
                    job = jobs.popleft()
                    if requested and job.id in requested:  # cancelled before it started
                        buffer.add(job, cancelled_before_start())
                        continue
                    handler = job.handler
                    if enter_by and job.id in enter_by:  # admitted under a rate limit: entered in time, or not
                        entry = enter_by[job.id]
                        if entry.by < now:
                            del enter_by[job.id]
                            late.append((job, entry))
                            continue
                        if not self._start(batch, job):
                            break
                        continue
                    if handler != quick:  # else the same handler as the last job run here
                        spec = specs.get(handler)
                        if (spec is None or spec.transactional or runner.spans is not None
                                or not on_main(handler, spec.is_async, False)):
                            if not self._start(batch, job):
                                break
                            continue
                        quick, quick_spec = handler, spec
                    outcome = run_here(job, quick_spec)
                    if not inline_all:
                        tally.add(job, outcome if isinstance(outcome, float) else outcome.duration)
                    if requested or not isinstance(outcome, float):
                        record(batch, job, outcome)
                    else:  # done, nothing to store: the seconds it took (most jobs)
                        add_done(job, outcome)
                if not slots.free:
                    return
            finally:
                self.durations.tallied(tally)
                if late:
                    self._late(batch, late)

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
        return self.inline_all or (not transactional and self.durations.quick(handler))

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
        if outcome.kind == "late" and prepared.entry is not None:
            self._late(batch, [(job, prepared.entry)])
            return True
        if not self.inline_all:  # durations size claims and pick the main thread only with several slots
            self.durations.observe(job, outcome.duration)
        if outcome.kind == "release" and job.id not in self.cancels.requested:
            self.handler_db.close()  # the next transactional job reconnects
            self._interrupted(batch, job, outcome)
            return False
        self.batches.record(batch, job, outcome)
        return True

    def _late(self, batch: Batch, late: list[tuple[ClaimedJob, Entry]]) -> None:
        """Jobs admitted under a rate limit whose handler was not entered within the grace
        (mysqlq.core.rates.RateLimit.grace): back to the queue unspent, in the same transaction their
        starts no longer counted (their places in the window go to other jobs) and they in their
        buckets' waiting lists, so that they come back as jobs that waited: ahead of the jobs of their
        bucket that have not, in order of id."""
        for job, _ in late:
            batch.log.info("job.rate_late", job_id=job.id, handler=job.handler,
                           note="not started within its rate limit's grace after admission; back to the queue")
        given = [rates.GivenBack(job.id, entry.bucket, entry.started_at) for job, entry in late]
        self.batches.release(batch, [job for job, _ in late], also=partial(rates.wait_again, late=given))

    def _interrupted(self, batch: Batch, job: ClaimedJob, outcome: Outcome) -> None:
        """The database failed under a transactional handler: give this job and the rest of its
        batch back, unspent."""
        batch.log.warning("batch.interrupted", job_id=job.id, error=(outcome.error or "").split("\n", 1)[0])
        self.batches.release(batch, [job, *batch.jobs])
        batch.jobs.clear()
