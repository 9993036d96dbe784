"""Running one claimed job: decode, resolve the handler, enforce the time limit, catch everything."""

from __future__ import annotations

import datetime
import inspect
import signal
import threading
import time
import traceback
from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, NamedTuple

from mysqlq.core import logs
from mysqlq.core.config import Settings
from mysqlq.core.encryption import Keyring
from mysqlq.core.errors import (
    DatabaseUnavailable,
    HandlerLoadError,
    HandlerNotFound,
    JobTimeout,
    ResultNotStored,
    Snooze,
)
from mysqlq.core.handlers import Registry, declared_time_limit, is_transactional
from mysqlq.core.jobs import ClaimedJob, decode_payload, encode_result, load_decoder, loads_strict
from mysqlq.store import claims
from mysqlq.store.db import Connection, is_transient, transaction
from mysqlq.worker.running.cancels import Cancels
from mysqlq.worker.running.context import JobContext, WorkerShared
from mysqlq.worker.running.job_spans import JobSpans, start
from mysqlq.worker.running.parents import ParentsReader
from mysqlq.worker.running.progress import LatestProgress
from mysqlq.worker.settling.encryption import refusal, sealed_result
from mysqlq.worker.settling.outcomes import DoneIn, Outcome
from mysqlq.worker.settling.runs import Runs

if TYPE_CHECKING:
    import asyncio

# What a handler may raise that still only fails its job: sys.exit() and KeyboardInterrupt raised
# by the handler itself. A real SIGINT never raises (the worker's signal handler only records it).
JOB_FAILURES = (Exception, SystemExit, KeyboardInterrupt)
# Whatever ends a run by raising: those, and the time limit's JobTimeout (a BaseException, so that a
# handler's own ``except Exception`` cannot swallow it). See :func:`ended`.
RUN_ENDS = (JobTimeout, *JOB_FAILURES)


class MainThreadTimeLimit:
    """The per-job time limit on the main thread: SIGALRM raises JobTimeout in the running handler.

    Jobs on the main thread are often quicker than the two system calls that would arm and disarm a
    timer around each one, so the timer is lazy: a job only records its deadline, and the timer is
    set only when none is pending or the pending one would ring after that deadline. When it rings
    early (for a job since finished), the handler sets it again for the running job's deadline, or
    lets it lapse when no job runs. A stream of quick jobs under one limit sets the timer about once
    per limit's length instead of twice per job. Signals reach only the main thread: jobs on other
    threads are timed by the worker's slots instead.
    """

    def __init__(self) -> None:
        self.enabled = threading.current_thread() is threading.main_thread()
        self.deadline: float | None = None  # monotonic: when the running job's limit ends
        self._rings_at: float | None = None  # when the pending timer goes off (None: none pending)
        if self.enabled:
            signal.signal(signal.SIGALRM, self._ring)

    def arm(self, seconds: float, now: float) -> None:
        """A job started at ``now`` (monotonic) may run ``seconds``."""
        if self.enabled:
            deadline = self.deadline = now + seconds
            rings_at = self._rings_at
            if rings_at is None or rings_at > deadline:
                self._set(deadline - time.monotonic(), deadline)

    def disarm(self) -> None:
        """The job returned: a pending timer that rings now finds no job and lapses."""
        self.deadline = None

    def off(self) -> None:
        """No more jobs on this thread: the pending timer is cancelled."""
        self.deadline = None
        if self.enabled and self._rings_at is not None:
            self._rings_at = None
            signal.setitimer(signal.ITIMER_REAL, 0)

    def _set(self, seconds: float, rings_at: float) -> None:
        self._rings_at = rings_at
        signal.setitimer(signal.ITIMER_REAL, max(seconds, 1e-6))  # 0 would cancel instead of ringing now

    def _ring(self, signum: int, frame: object) -> None:
        self._rings_at = None
        deadline = self.deadline
        if deadline is None:
            return  # it was set for a job that has finished
        left = deadline - time.monotonic()
        if left > 0:
            self._set(left, deadline)  # set for an earlier job: this one has time left
            return
        raise JobTimeout()


def undecodable(job: ClaimedJob, exc: Exception, started: float, keys: Keyring | None) -> Outcome:
    """Bad bytes stay bad: no attempt can succeed, so the job is dead at once. An encrypted payload
    that this worker could not open is not run either, but retried as usual: a worker that has its key
    may take it (mysqlq.worker.settling.encryption)."""
    refused = refusal(job, keys)
    if refused is not None:
        return Outcome("failed", time.monotonic() - started, refused, plain_error=True)
    return Outcome("dead", time.monotonic() - started, f"payload is not valid JSON: {exc}")


def describe(exc: BaseException) -> str:
    """The error as stored in last_error: one summary line, then the traceback."""
    summary = f"{type(exc).__name__}: {exc}".rstrip(": ")
    return summary + "\n\n" + "".join(traceback.format_exception(exc)).rstrip()


def timed_out(limit: float, started: float) -> Outcome:
    return Outcome("failed", time.monotonic() - started, f"JobTimeout: ran past its time limit of {limit:g}s")


@dataclass(slots=True, frozen=True)
class HandlerSpec:
    """A handler as the worker runs it, read once per handler name: inspecting a function costs."""

    func: Callable[..., Any]
    limit: float | None  # its declared time limit (None: the worker's default)
    transactional: bool
    is_async: bool


@dataclass(slots=True)
class Prepared:
    """A job ready to call: its handler resolved, its payload decoded, its limit known."""

    job: ClaimedJob
    func: Callable[..., Any]
    payload: Any
    limit: float
    transactional: bool
    is_async: bool
    started: float
    entry: Entry | None = None  # admitted under a rate limit: by when its handler is entered, or not at all


class Entry(NamedTuple):
    """A job admitted under a rate limit: its handler is entered by ``by`` (monotonic) or not at all;
    its start counts in ``bucket``, stamped ``started_at`` (the server's time, as the admission read
    it: the start's row in mysqlq_rate_starts, deleted if the job goes back unrun)."""

    by: float
    bucket: str
    started_at: datetime.datetime


def late(prepared: Prepared) -> Outcome | None:
    """The ``late`` outcome of a job admitted under a rate limit whose handler would be entered past
    its grace (mysqlq.core.rates.RateLimit.grace); None when it may be entered now."""
    if prepared.entry is None or time.monotonic() <= prepared.entry.by:
        return None
    return Outcome("late", 0.0, "not started within its rate limit's grace after its admission; not run")


class Runner:
    """Turns a claimed job into an Outcome; never raises for anything the job did."""

    def __init__(self, settings: Settings, registry: Registry, log: logs.Log, cancels: Cancels,
                 progress: LatestProgress | None = None) -> None:
        self.settings = settings
        self.registry = registry
        self.log = log
        self.cancels = cancels  # how a job cancelled while it runs is asked to stop
        self.discard_done: frozenset[str] = frozenset()  # our queues that keep no history (the last poll's word)
        self.alarm = MainThreadTimeLimit()
        self.read_parents = ParentsReader(settings)
        # What every job's context shares.
        self.shared = WorkerShared(settings.worker_name, log, self.read_parents, progress)
        self.specs: dict[str, HandlerSpec] = {}
        # Jobs admitted under a rate limit (mysqlq.worker.intake.rate_admission): by when their handler must be entered.
        self.enter_by: dict[int, Entry] = {}
        load_decoder()  # its import is not the first job's time either
        self.default_limit = settings.time_limit
        # The jobs' spans when this process traces (mysqlq.worker.running.job_spans); looked for again when a
        # handler's module is imported, which may be where the application sets OpenTelemetry up.
        self.runs = Runs()  # the spans runs are in, until their outcomes are written (a worker that traces)
        self.spans: JobSpans | None = start(self.read_parents.trace_contexts, self.runs)

    def spec(self, name: str) -> HandlerSpec:
        """The handler called ``name`` (HandlerNotFound / HandlerLoadError when it cannot be had;
        a miss is looked up again next time: a rolling deploy may install it meanwhile)."""
        found = self.specs.get(name)
        if found is None:
            func = self.registry.resolve(name)
            logs.adopt_structlog()  # a handler module that logs with structlog itself: into our lines
            if self.spans is None:
                self.spans = start(self.read_parents.trace_contexts, self.runs)
            found = self.specs[name] = HandlerSpec(func, declared_time_limit(func), is_transactional(func),
                                                    inspect.iscoroutinefunction(func))
        return found

    def prepare(self, job: ClaimedJob) -> Prepared | Outcome:
        """Decode and resolve; an Outcome when the job cannot even start."""
        started = time.monotonic()
        try:
            payload = decode_payload(job.payload)
        except (ValueError, UnicodeDecodeError) as exc:
            return undecodable(job, exc, started, self.settings.keys)
        spec = self.specs.get(job.handler)
        if spec is None:
            try:
                spec = self.spec(job.handler)
            except (HandlerNotFound, HandlerLoadError) as exc:
                # Retried like any failure: during a rolling deploy another worker may have it.
                return Outcome("failed", time.monotonic() - started, str(exc))
            # The first lookup imports the handler's module: a cost of the worker's start, not of
            # this job, whose time sizes the next claims (a blind claim would shrink for it).
            started = time.monotonic()
        limit = self.limit(job, spec)
        func = spec.func if self.spans is None else self.spans.wrap(job, spec.func, spec.is_async, limit)
        entry = self.enter_by.pop(job.id, None) if self.enter_by else None
        return Prepared(job, func, payload, limit, spec.transactional, spec.is_async, started, entry)

    def limit(self, job: ClaimedJob, spec: HandlerSpec) -> float:
        """A job's time limit: its own, else its handler's declared one, else the worker's default."""
        return job.time_limit or spec.limit or self.default_limit

    def run_here(self, job: ClaimedJob, spec: HandlerSpec) -> Outcome | DoneIn:
        """The fast branch of the run path, for a plain, non-transactional handler known to be quick,
        on the main thread (its limit enforced by SIGALRM): :meth:`prepare` and :meth:`call` in one
        step, with no Prepared made. A job done with nothing to store (most jobs) returns only the
        seconds it took: no Outcome is made either. Never for a worker that traces (its jobs' spans are
        made in :meth:`prepare`)."""
        started = time.monotonic()
        try:
            payload = loads_strict(job.payload)  # decode_payload(), one call fewer
        except (ValueError, UnicodeDecodeError) as exc:
            return undecodable(job, exc, started, self.settings.keys)
        ctx = JobContext(job, self.shared)
        self.cancels.running_here(job.id, ctx)
        return self._plain(spec.func, payload, ctx, self.limit(job, spec), started, True)

    def context(self, prepared: Prepared, conn: Connection | None) -> JobContext:
        return JobContext(prepared.job, self.shared, conn)

    def call(self, prepared: Prepared, batch_id: int, conn: Connection | None, alarm: bool = False) -> Outcome:
        """Call a prepared ``def`` handler (in its transaction when it is transactional); with ``alarm``,
        SIGALRM ends it at its limit (main thread only)."""
        if prepared.entry is not None and (too_late := late(prepared)) is not None:
            return too_late
        ctx = self.context(prepared, conn)
        self.cancels.started(prepared.job.id, ctx)
        if prepared.transactional:
            return self._in_transaction(prepared, batch_id, conn, ctx, alarm)
        outcome = self._plain(prepared.func, prepared.payload, ctx, prepared.limit, prepared.started, alarm)
        return Outcome("done", outcome) if isinstance(outcome, float) else outcome

    def _plain(self, func: Callable[..., Any], payload: Any, ctx: JobContext, limit: float, started: float,
               alarm: bool) -> Outcome | DoneIn:
        """The run of a plain handler, on every path: called under its limit, its exception or its
        value made the outcome. Done with nothing to store: only the seconds it took."""
        if alarm:
            self.alarm.arm(limit, started)
        try:
            try:
                value = func(payload, ctx)
            finally:
                if alarm:
                    self.alarm.deadline = None  # disarm(): a timer ringing later finds no job
        except RUN_ENDS as exc:
            return ended(exc, limit, started)
        if value is None:  # most handlers: nothing to store, nothing more to write
            return time.monotonic() - started
        return self._done(started, value)

    def _in_transaction(self, prepared: Prepared, batch_id: int, conn: Connection | None, ctx: JobContext,
                        alarm: bool) -> Outcome:
        """A transactional ``def`` handler: its writes and its fenced completion commit together."""
        assert conn is not None
        if alarm:
            self.alarm.arm(prepared.limit, prepared.started)
        try:
            try:
                with transaction(conn):
                    value = prepared.func(prepared.payload, ctx)
                    woken = self._complete(conn, batch_id, prepared, value)
            finally:
                if alarm:
                    self.alarm.disarm()
        except RUN_ENDS as exc:
            return ended(exc, prepared.limit, prepared.started, transactional=True)
        return Outcome("done", time.monotonic() - prepared.started, recorded=True, woken=woken)

    async def run_async(self, prepared: Prepared, batch_id: int, conn: Connection | None) -> Outcome:
        """Await an ``async def`` handler, cancelled at its time limit (or when its job is cancelled)."""
        import asyncio  # loaded already: this runs on an event loop

        if prepared.entry is not None and (too_late := late(prepared)) is not None:
            return too_late
        ctx = self.context(prepared, conn)
        task, loop = asyncio.current_task(), asyncio.get_running_loop()
        if task is not None:
            self.cancels.started(prepared.job.id, AsyncStop(ctx, task, loop))
        try:
            if prepared.transactional:
                assert conn is not None
                with transaction(conn):
                    value = await asyncio.wait_for(prepared.func(prepared.payload, ctx), prepared.limit)
                    woken = self._complete(conn, batch_id, prepared, value)
                return Outcome("done", time.monotonic() - prepared.started, recorded=True, woken=woken)
            value = await asyncio.wait_for(prepared.func(prepared.payload, ctx), prepared.limit)
        except TimeoutError:  # wait_for's, at the limit
            return timed_out(prepared.limit, prepared.started)
        except (*RUN_ENDS, asyncio.CancelledError) as exc:
            return ended(exc, prepared.limit, prepared.started, prepared.transactional)
        return self._done(prepared.started, value)

    def _complete(self, conn: Connection, batch_id: int, prepared: Prepared, value: Any) -> set[str]:
        """Inside a transactional handler's transaction, after it returned ``value``: the fenced completion."""
        result = sealed_result(self._result(value), prepared.job.id, self.settings.keys)
        return complete(conn, batch_id, prepared, result, self.runs.of(prepared.job.id),
                        prepared.job.queue in self.discard_done)

    def _result(self, value: Any) -> bytes | None:
        """The stored form of a handler's return value (ResultNotStored fails the job)."""
        return None if value is None else encode_result(value, self.settings.result_max_bytes)

    def _done(self, started: float, value: Any) -> Outcome:
        """A handler returned ``value``: done, with it stored as the result (failed if it cannot be)."""
        if value is None:  # most handlers: nothing to store, nothing more to write
            return Outcome("done", time.monotonic() - started)
        try:
            result = encode_result(value, self.settings.result_max_bytes)
        except ResultNotStored as exc:  # a value the handler returned: never the database's fault
            return failed(exc, started)
        return Outcome("done", time.monotonic() - started, result=result)


def ended(exc: BaseException, limit: float, started: float, transactional: bool = False) -> Outcome:
    """What a run that raised makes of its job, on every path: past its time limit; a transactional
    handler's claim taken over (its effect rolled back); else as :func:`failed` says."""
    if isinstance(exc, JobTimeout):
        return timed_out(limit, started)
    if isinstance(exc, ClaimLost):
        return claim_lost(started)
    return failed(exc, started, transactional)


def failed(exc: BaseException, started: float, transactional: bool = False) -> Outcome:
    """What a handler's exception makes of its job: snoozed when it raised Snooze; failed (retried
    while attempts are left); or, when the database failed under a transactional handler, released
    without spending an attempt."""
    duration = time.monotonic() - started
    if isinstance(exc, Snooze):
        return Outcome("snoozed", duration, str(exc), delay=exc.seconds)
    if transactional and (is_transient(exc) or isinstance(exc, DatabaseUnavailable)):
        return Outcome("release", duration, describe(exc))
    return Outcome("failed", duration, describe(exc))


@dataclass(slots=True)
class AsyncStop:
    """How a running coroutine is asked to stop: its context says so, and its task is cancelled."""

    ctx: JobContext
    task: asyncio.Task[Any]
    loop: asyncio.AbstractEventLoop

    def cancel(self) -> None:
        self.ctx.cancel()
        self.loop.call_soon_threadsafe(self.task.cancel)


class ClaimLost(Exception):
    """A transactional handler's completion found the claim taken over: its effect is rolled back."""


def complete(conn: Connection, batch_id: int, prepared: Prepared, result: bytes | None,
             ran_in: str | None = None, discard: bool = False) -> set[str]:
    """Inside the handler's transaction: the fenced completion (with the result; the job deleted with
    ``discard``, its queue keeping no history), so that both commit or neither does; the jobs waiting
    for it are released in the same transaction (and the span it ``ran_in`` kept for theirs, when the
    worker traces)."""
    with conn.cursor() as cur:
        woken = claims.finish_one(cur, batch_id, prepared.job.id, result, ran_in, discard)
    if woken is None:
        raise ClaimLost()
    return woken


def claim_lost(started: float) -> Outcome:
    return Outcome("lost", time.monotonic() - started, "claim was taken over; effect rolled back", True)
