"""Rate limits: at most N jobs of one bucket start in any window of a period, across every worker and
host, held exactly (the server's clock stamps each start under the bucket's lock: mysqlq.store.rates).

Which limit a job has: what an operator set for its handler (``mysqlq limits set --handler``, or
lifted), else what the handler declares (``@mysqlq.handler(rate_limit="100/m", rate_key=...)``),
else what an operator set for its queue. The bucket its start counts in: the handler's, per rate key
when the handler gives a ``rate_key`` function of the payload; or the queue's.

Like concurrency limits, the worker applies them right after a claim, before the jobs start: a job
over its limit is not started; it waits as a scheduled job until its turn (its attempt refunded), in
order within its bucket, and becomes ready then without anyone polling for it. A job admitted has
its handler entered within its limit's grace of the admission, or goes back to the queue unrun (the
dispatcher sees to it, from the time kept in ``enter_by``), so the limit holds as the handler's own clock
sees its calls too. Jobs without a limit pay one dictionary look-up each, in Python.
"""

from __future__ import annotations

import datetime
import heapq
import time
from functools import partial
from typing import Any, NamedTuple

from mysqlq.core.errors import HandlerLoadError, HandlerNotFound
from mysqlq.core.handlers import Registry, declared_rate_limit
from mysqlq.core.jobs import ClaimedJob, decode_payload
from mysqlq.core.logs import Log
from mysqlq.core.rates import TURN_SPAN, RateLimit, handler_bucket, queue_bucket
from mysqlq.store import rates as store
from mysqlq.store.db import Database
from mysqlq.worker.running.job_runner import Entry

_NONE = (None, None)
TURNS_KEPT = 10_000  # turns a worker remembers to promote; past that, its polls find the rest
ENTRIES_KEPT = 10_000  # admitted jobs whose entry time is kept before those long past are forgotten


class Rates:
    """A worker's side of rate limits: admitting what it claims, and the operators' limits it keeps."""

    def __init__(self, registry: Registry, db: Database, log: Log, enter_by: dict[int, Entry] | None = None) -> None:
        self.registry = registry
        self.db = db
        self.log = log
        self.handlers: dict[str, tuple[RateLimit | None, Any]] = {}  # by handler name: its limit and key function
        self.overrides: dict[tuple[str, str], RateLimit | None] = {}
        self.changed: str | None = None  # how many limits operators set and their newest change, as last read
        self.soonest: float | None = None  # seconds until the next job set aside comes due (the last admission)
        self.turns: list[float] = []  # a heap: when (monotonic) jobs this worker set aside come due
        # By job admitted: when (monotonic) its handler must be entered at the latest (the runner's).
        self.enter_by = enter_by if enter_by is not None else {}
        self.unlogged: list[tuple[int, int, store.Limited, float]] = []  # set aside: logged once the admitted start

    # ---------------------------------------------------------------- which limit

    def _declared(self, handler: str) -> tuple[RateLimit | None, Any]:
        found = self.handlers.get(handler)
        if found is None:
            try:
                found = declared_rate_limit(self.registry.resolve(handler))
            except (HandlerNotFound, HandlerLoadError):
                found = _NONE  # it fails when it runs, as before
            self.handlers[handler] = found
        return found

    def bucket_of(self, job: ClaimedJob) -> tuple[str, RateLimit] | None:
        """The bucket a job's start counts in and its limit (None: the job is not limited)."""
        overrides = self.overrides
        if overrides and ("handler", job.handler) in overrides:
            limit, key_of = overrides[("handler", job.handler)], self._declared(job.handler)[1]
        else:
            limit, key_of = self._declared(job.handler)
        if limit is not None:
            return handler_bucket(job.handler, _key(key_of, job)), limit
        if overrides:
            queue_limit = overrides.get(("queue", job.queue))
            if queue_limit is not None:
                return queue_bucket(job.queue), queue_limit
        return None

    def changed_at(self, changed: str | None) -> None:
        """The poll's reading of the operators' newest change: read their limits again when it moved."""
        if changed != self.changed:
            self.overrides = {(o.scope, o.name): o.limit for o in self.db.run(store.overrides)}
            self.changed = changed
            self.log.info("limits.loaded", overrides=len(self.overrides))

    # ---------------------------------------------------------------- admission

    def admit(self, batch_id: int, jobs: list[ClaimedJob]) -> list[ClaimedJob]:
        """The jobs of a just-claimed batch that may start: those without a rate limit, and those whose
        bucket has room now. The others wait for their turn, or are no longer ours."""
        self.soonest = None
        if not self.overrides and all(self._declared(handler)[0] is None for handler in {job.handler for job in jobs}):
            return jobs  # the common batch: none of its handlers has a limit, and no operator set one
        limited = []
        for job in jobs:
            found = self.bucket_of(job)
            if found is not None:
                limited.append(store.Limited(job.id, found[0], found[1]))
        if not limited:
            return jobs
        admission = self._admit(batch_id, limited)
        result, buckets = admission.result, {entry.job_id: entry for entry in limited}
        self._enter_by(admission.stamped, buckets, result.stamps)
        self.unlogged += [(job_id, batch_id, buckets[job_id], seconds)
                          for job_id, seconds in sorted(result.deferred.items())]
        for job_id in result.lost:
            self.log.warning("job.claim_lost", job_id=job_id, batch_id=batch_id,
                             note="another worker took the claim over before it started; not run")
        if result.deferred:
            self.soonest = min(result.deferred.values())
            self._remember(set(result.deferred.values()))
        return [job for job in jobs if job.id not in buckets or job.id in result.admitted]

    def log_set_aside(self) -> None:
        """Log the jobs the last admissions set aside; after the jobs admitted have started (their
        handlers are entered within the grace; a claim of hundreds would spend it on log lines)."""
        for job_id, batch_id, entry, seconds in self.unlogged:
            self.log.info("job.rate_limited", job_id=job_id, batch_id=batch_id, bucket=entry.bucket,
                          rate_limit=str(entry.limit), starts_in=round(seconds, 3))
        self.unlogged = []

    def _admit(self, batch_id: int, limited: list[store.Limited]) -> _Admitted:
        """Admit in the database; a job whose turn comes within TURN_SPAN is held, claimed, and admitted
        again at its turn, here (twice at most, then set aside): its round trip through the queue (set
        aside, promoted, claimed again) would bring it back later than its turn, when jobs that came
        back meanwhile may have taken its place, and it would go round again."""
        result = self.db.run(partial(store.admit, batch_id=batch_id, limited=limited, hold=TURN_SPAN))
        admitted = _Admitted(result, {job_id: result.stamped for job_id in result.admitted})
        for hold in (TURN_SPAN, 0.0):
            if not result.held:
                break
            time.sleep(max(result.held.values()))
            again = [entry for entry in limited if entry.job_id in result.held]
            later = self.db.run(partial(store.admit, batch_id=batch_id, limited=again, hold=hold))
            result.admitted |= later.admitted
            result.deferred.update(later.deferred)
            result.lost += later.lost
            result.held = later.held
            result.stamps.update(later.stamps)
            admitted.stamped.update((job_id, later.stamped) for job_id in later.admitted)
        return admitted

    def _enter_by(self, stamped: dict[int, float], buckets: dict[int, store.Limited],
                  stamps: dict[int, datetime.datetime]) -> None:
        """Keep by when each admitted job's handler must be entered: its admission's stamp (the
        worker's time just before it) and its limit's grace; and the stamp as the server gave it, by
        which its start is no longer counted if it goes back unrun."""
        enter_by = self.enter_by
        if len(enter_by) >= ENTRIES_KEPT:  # jobs admitted, then given back or cancelled unstarted
            now = time.monotonic()
            for job_id in [job_id for job_id, entry in enter_by.items() if entry.by < now]:
                del enter_by[job_id]
        for job_id, at in stamped.items():
            limited = buckets[job_id]
            enter_by[job_id] = Entry(at + limited.limit.grace, limited.bucket, stamps[job_id])

    def _remember(self, turns: set[float]) -> None:
        now = time.monotonic()
        for seconds in sorted(turns)[:TURNS_KEPT - len(self.turns)]:
            heapq.heappush(self.turns, now + seconds)

    def next_turn(self) -> float | None:
        """Seconds until the next turn of the jobs this worker set aside (None: none to come). The
        worker promotes each in its time, so a job set aside never waits for a poll."""
        turns = self.turns
        if not turns:
            return None
        now = time.monotonic()
        while turns and turns[0] <= now:
            heapq.heappop(turns)
        return turns[0] - now if turns else None


class _Admitted(NamedTuple):
    """An admission's outcome over its rounds, and each admitted job's stamp (the worker's time)."""

    result: store.RateAdmission
    stamped: dict[int, float]


def _key(key_of: Any, job: ClaimedJob) -> str | None:
    """A job's rate key: its handler's ``rate_key`` of the payload; one it cannot compute (a payload
    that is not valid JSON, a field missing) counts the job with the handler's other keyless jobs."""
    if key_of is None:
        return None
    try:
        key = key_of(decode_payload(job.payload))
    except Exception:
        return None
    return None if key is None else str(key)
