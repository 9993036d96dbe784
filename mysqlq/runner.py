"""Running one claimed job: decode, resolve the handler, enforce the time limit, catch everything."""

from __future__ import annotations

import json
import signal
import threading
import time
import traceback
from collections.abc import Callable
from contextlib import suppress
from typing import Any

import MySQLdb

from .config import Settings
from .context import JobContext
from .db import Connection, is_transient
from .errors import DatabaseUnavailable, HandlerLoadError, HandlerNotFound, JobTimeout
from .handlers import Registry, declared_time_limit, is_transactional
from .jobs import ClaimedJob
from .outcomes import Outcome
from .store import claims


def _raise_timeout(signum: int, frame: object) -> None:
    raise JobTimeout()


class Alarm:
    """The per-job time limit: SIGALRM raises JobTimeout in the running handler.

    The handler is installed once; each job only arms and disarms the timer. Signals reach only
    the main thread, so elsewhere (a worker embedded in a thread) limits are not enforced.
    """

    def __init__(self) -> None:
        self.enabled = threading.current_thread() is threading.main_thread()
        if self.enabled:
            signal.signal(signal.SIGALRM, _raise_timeout)

    def arm(self, seconds: float) -> None:
        if self.enabled:
            signal.setitimer(signal.ITIMER_REAL, seconds)

    def disarm(self) -> None:
        if self.enabled:
            signal.setitimer(signal.ITIMER_REAL, 0)


def describe(exc: BaseException) -> str:
    """The error as stored in last_error: one summary line, then the traceback."""
    summary = f"{type(exc).__name__}: {exc}".rstrip(": ")
    return summary + "\n\n" + "".join(traceback.format_exception(exc)).rstrip()


class Runner:
    """Turns a claimed job into an Outcome; never raises for anything the job did."""

    def __init__(self, settings: Settings, registry: Registry, log: Any, conn: Callable[[], Connection]) -> None:
        self.settings = settings
        self.registry = registry
        self.log = log
        self.conn = conn  # the worker's connection, for transactional handlers
        self.alarm = Alarm()

    def run(self, job: ClaimedJob, batch_id: int) -> Outcome:
        started = time.monotonic()
        try:
            payload = json.loads(job.payload)
        except (ValueError, UnicodeDecodeError) as exc:
            # Bad bytes stay bad: no attempt can succeed, so the job is dead at once.
            return Outcome("dead", time.monotonic() - started, f"payload is not valid JSON: {exc}")
        try:
            func = self.registry.resolve(job.handler)
        except (HandlerNotFound, HandlerLoadError) as exc:
            # Retried like any failure: during a rolling deploy another worker may have it.
            return Outcome("failed", time.monotonic() - started, str(exc))
        limit = job.time_limit or declared_time_limit(func) or self.settings.time_limit
        transactional = is_transactional(func)
        ctx = JobContext(
            job_id=job.id, attempt=job.attempt, max_attempts=job.max_attempts, queue=job.queue,
            handler=job.handler, worker=self.settings.worker_name,
            conn=self.conn() if transactional else None, base_log=self.log,
        )
        try:
            self.alarm.arm(limit)
            try:
                if transactional:
                    return self._run_in_transaction(func, payload, ctx, batch_id, started)
                func(payload, ctx)
            finally:
                self.alarm.disarm()
        except JobTimeout:
            return Outcome("failed", time.monotonic() - started, f"JobTimeout: ran past its time limit of {limit:g}s")
        except Exception as exc:
            if transactional and (is_transient(exc) or isinstance(exc, DatabaseUnavailable)):
                # The database, not the job, failed: give the job back without spending an attempt.
                return Outcome("release", time.monotonic() - started, describe(exc))
            return Outcome("failed", time.monotonic() - started, describe(exc))
        return Outcome("done", time.monotonic() - started)

    def _run_in_transaction(
        self, func: Callable[..., Any], payload: Any, ctx: JobContext, batch_id: int, started: float
    ) -> Outcome:
        """The handler's writes and the fenced completion commit together, or neither does."""
        conn = ctx.conn
        assert conn is not None
        conn.begin()
        try:
            func(payload, ctx)
            with conn.cursor() as cur:
                completed = claims.complete_one(cur, batch_id, ctx.job_id)
            if completed != 1:
                conn.rollback()
                return Outcome("lost", time.monotonic() - started, "claim was taken over; effect rolled back", True)
            conn.commit()
        except BaseException:
            with suppress(MySQLdb.Error):
                conn.rollback()
            raise
        return Outcome("done", time.monotonic() - started, recorded=True)
