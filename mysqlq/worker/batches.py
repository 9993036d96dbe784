"""A claimed batch's life, from its claim to its last outcome written, in one place.

A batch is one claim (its token, ``batch_id``). Its states and what moves it between them:

- **claimed**: :meth:`Batches.add` takes the claim in hand (mysqlq.worker.intake.claimer made it),
  with its leases (mysqlq.worker.settling.leases) and its jobs' cancels held;
- **running**: the dispatcher (mysqlq.worker.dispatcher) takes its jobs one by one off :attr:`Batch.jobs`
  and starts them, on the main thread or in a slot (:attr:`Batch.in_flight`), and hands each outcome
  back through :meth:`Batches.record`;
- **released**: jobs not started go back unstarted, no attempt spent (:meth:`Batches.release`,
  :meth:`Batches.release_unstarted`: stopping, stuck, or a claim sized blind given back by
  mysqlq.worker.claim_shrinker);
- **settled**: once it is :attr:`Batch.idle` (nothing left to start or running), :meth:`Batches.write`
  writes the rest of its outcomes and lets it go (``_end``: leases dropped, cancels let go).

Its completion, the statement that marks its jobs done, has three writers, each for a reason:

1. its outcome buffer (:meth:`mysqlq.worker.settling.outcomes.OutcomeBuffer.flush`, called from
   :meth:`Batches.flush`): the ordinary path, every outcome fenced by the batch's token;
2. the next claim (the ride-along: :attr:`Batches.held`, :meth:`Batches.ending`,
   :meth:`Batches.completed`, and mysqlq.worker.intake.claimer.HeldCompletion): a batch that ended with
   plain successes only is held for the claim that follows in the same turn, which completes it in
   its own round trip (two round trips fewer a batch);
3. a transactional handler's own commit (mysqlq.worker.running.job_runner): its writes and its fenced
   completion commit together, so its outcome comes back ``recorded`` and the buffer writes nothing
   more for it.

Outcomes on their way are also logged (mysqlq.worker.settling.report) and give back the concurrency
slots of their keys (mysqlq.worker.intake.concurrency_admission). Everything runs on the worker's main thread.
"""
from __future__ import annotations

import math
from collections import deque
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from functools import partial

from mysqlq.core.config import Settings
from mysqlq.core.jobs import ClaimedJob
from mysqlq.core.logs import Log
from mysqlq.store import claims
from mysqlq.store.db import Cursor, Database, transaction
from mysqlq.worker.intake.claimer import Claim
from mysqlq.worker.intake.concurrency_admission import Limits, keyed
from mysqlq.worker.running.cancels import Cancels
from mysqlq.worker.settling.leases import Leases
from mysqlq.worker.settling.outcomes import DoneIn, Outcome, OutcomeBuffer, cancelled_while_running
from mysqlq.worker.settling.report import Report
from mysqlq.worker.settling.runs import Runs


@dataclass(eq=False)
class Batch:
    """One claim: its token, the jobs not yet started and the outcomes to write."""

    batch_id: int
    jobs: deque[ClaimedJob]
    buffer: OutcomeBuffer
    log: Log
    ids: list[int]  # every job of the claim
    in_flight: int = 0  # jobs of it running in a slot
    keyed: bool = False  # some of its jobs carry a concurrency key (mysqlq.worker.intake.concurrency_admission)
    unsized: bool = False  # claimed in full before its queue's durations were known (Dispatcher.shrink)
    looked: float = 0.0  # when shrink last looked at it (monotonic)

    @property
    def idle(self) -> bool:
        """Nothing of it left to start or running: only its outcomes remain to be written."""
        return not self.jobs and self.in_flight == 0


@dataclass(slots=True)
class WriteFindings:
    """What the writes found that the worker's loop should act on."""

    retry_in: float | None  # the shortest retry delay written (seconds)
    ready: set[str]  # queues whose waiting jobs became ready (concurrency slots given back, parents ended)


class Batches:
    """Every batch in hand, and the writing of their outcomes."""

    def __init__(self, settings: Settings, db: Database, log: Log, leases: Leases, cancels: Cancels,
                 limits: Limits, report: Report, wake: Callable[[Iterable[str]], None],
                 runs: Runs | None = None) -> None:
        self.settings = settings
        self.db = db
        self.log = log
        self.leases = leases
        self.cancels = cancels
        self.limits = limits
        self.report = report
        self.wake = wake  # tells other workers that queues gained ready jobs
        self.runs = runs  # the spans jobs ran in, when the worker traces (kept with the jobs others wait for)
        self.by_id: dict[int, Batch] = {}
        self.held: Batch | None = None  # ended with plain successes only: its completion goes with the next claim
        self.discard_done: frozenset[str] = frozenset()  # our queues that keep no history (the last poll's word)
        self._retry_in: float | None = None
        self._ready: set[str] = set()

    # ------------------------------------------------------------------ in hand

    def add(self, claim: Claim, unsized: bool) -> None:
        """Take a claim in hand; ``unsized``: sized before its queue's durations were known."""
        batch_id, jobs = claim.batch_id, claim.jobs
        self.leases.hold(batch_id, claim.claimed_at)
        self.cancels.hold(job.id for job in jobs)
        self.by_id[batch_id] = Batch(batch_id, deque(jobs), OutcomeBuffer(self.settings, self.discard_done),
                                     self.log.bind(batch_id=batch_id), [job.id for job in jobs],
                                     unsized=unsized and self.settings.concurrency > 1, keyed=keyed(jobs))

    def values(self) -> list[Batch]:
        return list(self.by_id.values())

    def __len__(self) -> int:
        return len(self.by_id)

    @property
    def unstarted(self) -> int:
        """Claimed jobs not yet started."""
        return sum(len(batch.jobs) for batch in self.by_id.values())

    def flush_due(self) -> float | None:
        """When the oldest pending outcome is due to be written (None: none pending)."""
        times = [batch.buffer.due_at for batch in self.by_id.values() if batch.buffer.due_at != math.inf]
        return min(times) if times else None

    def take_findings(self) -> WriteFindings:
        """What the writes found since the last call."""
        findings = WriteFindings(self._retry_in, self._ready)
        self._retry_in, self._ready = None, set()
        return findings

    # ------------------------------------------------------------------ outcomes

    def record(self, batch: Batch, job: ClaimedJob, outcome: Outcome | DoneIn) -> None:
        """A job's outcome, to be written with its batch. The one rule for cancellations: a job
        cancelled while it ran ends cancelled, whatever its handler did (its row is final already)."""
        if job.id in self.cancels.requested:
            batch.buffer.add(job, cancelled_while_running(outcome))
        elif isinstance(outcome, float):
            batch.buffer.add_done(job, outcome)
        else:
            batch.buffer.add(job, outcome)

    def write(self, final_only: bool, hold: bool = False) -> None:
        """Write due outcomes; a batch with nothing left to run is written in full and let go.
        ``final_only`` is for the exit: whatever is pending is written, finished or not. ``hold``: a
        batch that ended with plain successes only is kept as :attr:`held`, for the claim that
        follows in this turn to carry its completion (mysqlq.worker.intake.claimer.HeldCompletion)."""
        if final_only:
            self.write_held()
        for batch in list(self.by_id.values()):
            if batch is self.held:
                continue
            if batch.idle:
                if hold and self.held is None and batch.buffer.plain:
                    self.held = batch
                    continue
                self._end(batch)
            elif final_only or batch.buffer.due():
                self.flush(batch, final=False)

    def ending(self) -> tuple[int, bool, bool] | None:
        """HeldCompletion: the held batch's token, for the claim to complete, whether its jobs are
        deleted (their queue keeps no history), and whether one of them may stay live."""
        held = self.held
        if held is None:
            return None
        return held.batch_id, bool(held.buffer.discarded), held.buffer.in_place

    def completed(self, count: int) -> None:
        """HeldCompletion: the held batch's completion went with a claim and changed ``count`` rows."""
        self.write_held(count)

    def write_held(self, completed: int | None = None) -> None:
        """Write the held batch, if any: ``completed`` is what its completion changed when it went with
        a claim; None writes it now."""
        batch = self.held
        if batch is not None:
            self.held = None
            self._end(batch, completed)

    def release(self, batch: Batch, jobs: list[ClaimedJob], note: str | None = None,
                also: Callable[[Cursor], object] | None = None) -> None:
        """Give claimed jobs back unstarted (no attempt spent); outcomes pending go first. ``also``:
        what else to write in the transaction that gives them back."""
        self.flush(batch, final=False)
        ids = [job.id for job in jobs]
        if ids:
            released = self.db.run(partial(_release, batch_id=batch.batch_id, ids=ids, also=also))
            batch.log.info("batch.released", jobs=released, note=note)
            self.cancels.let_go(ids)

    def release_unstarted(self) -> None:
        """Give back every claimed job not yet started (stopping, or stuck)."""
        for batch in self.by_id.values():
            if batch.jobs:
                self.release(batch, list(batch.jobs))
                batch.jobs.clear()

    def flush(self, batch: Batch, final: bool, completed: int | None = None) -> None:
        """Write a batch's pending outcomes; then give back the concurrency slots of those written
        (waking whoever serves the queues that gained ready jobs), then log them. ``completed``:
        the final completion went already, with a claim (what it changed)."""
        buffer = batch.buffer
        written = buffer.flush(self.db, batch.batch_id, final, completed, self.runs)
        retry = buffer.next_retry
        if retry is not None:
            self._retry_in = retry if self._retry_in is None else min(self._retry_in, retry)
        if batch.keyed and keyed(job for job, _ in written.entries):
            self._gained(self.limits.settle(job for job, _ in written.entries))
        if buffer.woken:  # jobs that waited for these are ready now
            self._gained(buffer.woken)
            buffer.woken = set()
        self.report.written(batch.log, written.entries, written.lost, written.done_only)

    def _end(self, batch: Batch, completed: int | None = None) -> None:
        """Write the rest of a batch that has nothing left to run, and let it go."""
        self.flush(batch, final=True, completed=completed)
        del self.by_id[batch.batch_id]
        self.leases.drop(batch.batch_id)
        self.cancels.let_go(batch.ids)

    def _gained(self, queues: set[str]) -> None:
        """Queues that gained ready jobs by what this worker wrote: claim from them, wake the others."""
        if queues:
            self._ready |= queues
            self.wake(queues)


def _release(cur: Cursor, batch_id: int, ids: list[int], also: Callable[[Cursor], object] | None) -> int:
    """Give a batch's jobs back; with ``also``, in one transaction with what it writes."""
    if also is None:
        return claims.release(cur, batch_id, ids)
    with transaction(cur.connection):
        also(cur)
        return claims.release(cur, batch_id, ids)
