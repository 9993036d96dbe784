"""What became of a job, the retry backoff, and recording outcomes in grouped, fenced writes."""

from __future__ import annotations

import math
import random
import time
from dataclasses import dataclass, field
from functools import partial
from typing import Literal, NamedTuple, TypeAlias

from mysqlq.core.config import Settings
from mysqlq.core.jobs import ClaimedJob
from mysqlq.store import claims
from mysqlq.store.db import Database
from mysqlq.worker.settling.encryption import sealed_error
from mysqlq.worker.settling.runs import Runs

MAX_ERROR_CHARS = 60_000


# What became of a job: ``done``; ``failed`` (retried while attempts are left); ``dead`` (never
# retried); ``cancelled`` (its row is final already); ``snoozed`` (its handler asked to run again
# later: no attempt spent, dead past the worker's --max-snoozes); and two of the worker's own: ``lost`` (a
# transactional completion fenced out: another worker owns the job), ``release`` (the database
# failed under it: the job goes back unspent) and ``late`` (admitted under a rate limit, its handler
# not entered within the grace: not run, the job goes back unspent alone).
Kind: TypeAlias = Literal["done", "failed", "dead", "cancelled", "snoozed", "lost", "release", "late"]


@dataclass(slots=True)
class Outcome:
    """What became of one job (see :data:`Kind`), how long it ran, and what is stored with it."""

    kind: Kind
    duration: float
    error: str | None = None
    recorded: bool = False  # a transactional handler's completion was already committed
    result: bytes | None = None  # what a done job's handler returned, as JSON (None: nothing)
    woken: set[str] | None = None  # a transactional completion's: queues of the dependents it made ready
    delay: float = 0.0  # a snoozed job's: seconds until it runs again
    plain_error: bool = False  # the error is mysqlq's own words, holding nothing of the job's: never encrypted


# A job done with nothing to store, the common case, is kept as the seconds it took alone: no
# Outcome is made for it.
DoneIn: TypeAlias = float

# What a batch's buffer hands the log, in order: each job with its Outcome, or the seconds it took.
Entry: TypeAlias = tuple[ClaimedJob, Outcome | DoneIn]


def cancelled_while_running(outcome: Outcome | DoneIn) -> Outcome:
    """The outcome of a job cancelled while it ran, whatever its handler did: its row is final already."""
    duration = outcome if isinstance(outcome, float) else outcome.duration
    return Outcome("cancelled", duration, "cancelled while it ran", recorded=True)


def cancelled_before_start() -> Outcome:
    return Outcome("cancelled", 0.0, "cancelled before it started", recorded=True)


def backoff(attempt: int, settings: Settings) -> float:
    """Exponential backoff with jitter: base·2^(attempt-1), capped, then scaled by 0.5–1.5."""
    base = min(settings.retry_cap, settings.retry_base * 2 ** min(attempt - 1, 60))
    return float(base * random.uniform(0.5, 1.5))


class Written(NamedTuple):
    """What one flush wrote: the outcomes added since the last one (in order), the ids among them
    whose claim had been taken over (nothing was written for those), and whether every one of them
    was a job done with nothing to store (each entry a (job, seconds) pair)."""

    entries: list[Entry]
    lost: set[int]
    done_only: bool


@dataclass
class OutcomeBuffer:
    """Outcomes of one batch waiting to be written: successes in one UPDATE, failures one by one.

    Written when the batch ends or when the oldest has waited ``flush_interval`` seconds, so that
    a slow batch does not hide finished jobs (and their chance to be re-run after a crash). Each
    flush hands back the outcomes it wrote, in order, so that they are logged only once the write
    has said whether the claim still held.
    """

    settings: Settings
    discard: frozenset[str] = frozenset()  # the batch's queues that keep no history: their done jobs are deleted
    done: list[int] = field(default_factory=list)
    discarded: list[int] = field(default_factory=list)  # done, in a queue of ``discard``
    with_result: list[tuple[int, bytes, bool]] = field(default_factory=list)  # done, written with its result (or
    # deleted, result and all, when its queue keeps no history)
    failed: list[tuple[ClaimedJob, Outcome]] = field(default_factory=list)
    written: list[Entry] = field(default_factory=list)  # in order, for the log
    due_at: float = math.inf  # when the pending outcomes are due to be written (inf: none pending)
    next_retry: float | None = None  # the shortest retry delay chosen by the last flush, in seconds
    woken: set[str] = field(default_factory=set)  # queues whose jobs waited for jobs written here, now ready
    lost: set[int] = field(default_factory=set)  # jobs added as "lost" since the last flush
    done_only: bool = True  # every job added since the last flush was done with nothing to store (add_done)
    in_place: bool = False  # one of ``done`` stays live when done (its dedupe key is kept "forever")

    def add(self, job: ClaimedJob, outcome: Outcome) -> None:
        self.written.append((job, outcome))
        self.done_only = False
        if outcome.kind == "lost":
            self.lost.add(job.id)
        if outcome.recorded:
            if outcome.woken:
                self.woken |= outcome.woken
            return
        if self.due_at == math.inf:  # the first pending one: written within the flush interval
            self.due_at = time.monotonic() + self.settings.flush_interval
        if outcome.kind == "done":
            keys = self.settings.keys
            if outcome.result is None:
                self._add_done(job)
            else:
                result = outcome.result if keys is None else keys.seal_result(outcome.result, job.id)
                self.with_result.append((job.id, result, job.queue in self.discard))
        else:
            self.failed.append((job, outcome))

    def add_done(self, job: ClaimedJob, seconds: DoneIn) -> None:
        """:meth:`add` of a job done in ``seconds`` with nothing to store."""
        self.written.append((job, seconds))
        if self.due_at == math.inf:
            self.due_at = time.monotonic() + self.settings.flush_interval
        self._add_done(job)

    def _add_done(self, job: ClaimedJob) -> None:
        if job.queue in self.discard:
            self.discarded.append(job.id)
        else:
            self.done.append(job.id)
            if job.keeps_key:
                self.in_place = True

    def due(self, now: float | None = None) -> bool:
        return (time.monotonic() if now is None else now) >= self.due_at

    @property
    def plain(self) -> bool:
        """Successes without results are pending, and nothing else, all kept or all deleted: at the
        batch's end they are written by its completion alone (``claims.complete_batch``)."""
        return bool(self.done) != bool(self.discarded) and not self.with_result and not self.failed

    def flush(self, db: Database, batch_id: int, final: bool = False, completed: int | None = None,
              runs: Runs | None = None) -> Written:
        """Write everything pending, each statement fenced by the batch's token ``batch_id`` (see
        :class:`Written` for what comes back).

        ``final``: every other job of the batch has been written, failed or released already, so
        the successes are exactly the batch's rows still running: one cheaper statement, no id list.
        ``completed``: that statement went already (with the next claim); what it changed.
        ``runs``: the spans the jobs ran in, when the worker traces: kept with those that others wait for.
        """
        done, discarded, with_result, failed = self.done, self.discarded, self.with_result, self.failed
        entries, lost, done_only, in_place = self.written, self.lost, self.done_only, self.in_place
        self.done, self.discarded, self.with_result, self.failed, self.written, self.lost = [], [], [], [], [], set()
        self.due_at, self.next_retry, self.done_only, self.in_place = math.inf, None, True, False
        # Jobs that others wait for are left running by the statements below; they end afterwards,
        # in one transaction that releases what waits for them (mysqlq.store.dependencies).
        parents_done: dict[int, bytes | None] = {}
        parents_dead: dict[int, str] = {}
        for job_id, result, discard in with_result:  # before the batch's completion below, which takes the rest
            if not db.run(partial(claims.complete_one, batch_id=batch_id, job_id=job_id, result=result,
                                  discard=discard)):
                parents_done[job_id] = result
        for job, outcome in failed:
            if outcome.kind == "snoozed":
                if job.snoozes < self.settings.max_snoozes:
                    self._note_retry(outcome.delay)
                    if not db.run(partial(claims.snooze, batch_id=batch_id, job_id=job.id, delay=outcome.delay)):
                        lost.add(job.id)
                    continue
                outcome.kind, outcome.error = "dead", (  # the log line and the metrics say what was written
                    f"SnoozedTooOften: snoozed {job.snoozes} times, the most a job may be (--max-snoozes); "
                    f"its last run asked for {outcome.delay:g} s more")
            error = (outcome.error or "")[-MAX_ERROR_CHARS:]
            if not outcome.plain_error:  # encrypted, bound to its job, when the worker has keys
                error = sealed_error(error, job.id, self.settings.keys)
            if outcome.kind == "failed" and job.attempt < job.max_attempts:
                delay = backoff(job.attempt, self.settings)
                self._note_retry(delay)
                if not db.run(partial(claims.retry, batch_id=batch_id, job_id=job.id, delay=delay, error=error)):
                    lost.add(job.id)
            elif not db.run(partial(claims.bury, batch_id=batch_id, job_id=job.id, error=error)):
                parents_dead[job.id] = error
        finished = done + discarded
        if finished:
            if final and not (done and discarded):  # the batch's rest, all kept or all deleted
                count = completed if completed is not None else db.run(
                    lambda cur: claims.complete_batch(cur, batch_id, discard=bool(discarded), in_place=in_place,
                                                      merged=db.multi_statements))
            else:
                count = sum(db.run(partial(claims.complete, batch_id=batch_id, ids=ids, discard=discard,
                                           in_place=in_place, merged=db.multi_statements))
                            for ids, discard in ((done, False), (discarded, True)) if ids)
            if count < len(finished):
                parents_done.update(dict.fromkeys(self._not_done(db, batch_id, finished)))
        ran_in = runs.take(job.id for job, _ in entries) if runs else None
        if parents_done or parents_dead:
            ended = db.run(lambda cur: claims.end_with_dependents(cur, batch_id, parents_done, parents_dead,
                                                                  ran_in))
            lost.update(job_id for job_id in (*parents_done, *parents_dead) if job_id not in ended.ids)
            self.woken |= ended.woken
        return Written(entries, lost, done_only)

    def _note_retry(self, delay: float) -> None:
        self.next_retry = delay if self.next_retry is None else min(self.next_retry, delay)

    def _not_done(self, db: Database, batch_id: int, ids: list[int]) -> list[int]:
        # Rare path: a claim was taken over while we ran, or others wait for the job (left running
        # for the releasing path, which tells the two apart). Rows that were ours without
        # dependents were just marked done (or deleted), so these are the others.
        still_ours = db.run(lambda cur: claims.completed_ids(cur, batch_id, ids))
        return [job_id for job_id in ids if job_id not in still_ours]
