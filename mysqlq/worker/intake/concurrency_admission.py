"""Concurrency limits: at most N jobs of one concurrency key run at once, N declared by the handler
(``@mysqlq.handler(concurrency_limit=N)``, 1 when it declares none).

The limit is applied by the worker, the only party that surely has the handler installed (a
producer may not). A job with a key is enqueued ready like any other; the worker that claims it
admits it before it starts: the job takes a slot of its key (a row in
``mysqlq_semaphore_holders``), or, when its handler's limit of slots is taken, it is set aside as
``blocked``, its claim and attempt given back, invisible to claims, costing nothing while it waits.
When a job with a key moves on (done, dead, failed and waiting to retry, cancelled), its slot is
given back and the oldest blocked job of the key is made ready holding that slot, in one
transaction. A job returned by the reaper, or released unstarted, keeps its slot: it is ready and
next in line. The worker leading the reaper settles keys whose holder is gone without saying so (a
worker killed between recording an outcome and giving the slot back): mysqlq.leader.limits_sweep.
The statements are in mysqlq.store.limits.

Jobs without a key pay one test per claimed batch and one per written batch of outcomes, in Python.
"""

from __future__ import annotations

from collections.abc import Iterable
from functools import partial
from operator import attrgetter

from mysqlq.core.errors import HandlerLoadError, HandlerNotFound
from mysqlq.core.handlers import Registry, declared_concurrency_limit
from mysqlq.core.jobs import ClaimedJob
from mysqlq.core.logs import Log
from mysqlq.store import limits as store
from mysqlq.store.db import Database

_KEY = attrgetter("concurrency_key")


def keyed(jobs: Iterable[ClaimedJob]) -> bool:
    """True when any of these jobs carries a concurrency key (a test run in C, once per batch)."""
    return not _NONE.issuperset(map(_KEY, jobs))


_NONE = frozenset([None])


class Limits:
    """A worker's side of concurrency limits: admitting what it claims, giving slots back."""

    def __init__(self, registry: Registry, db: Database, log: Log) -> None:
        self.registry = registry
        self.db = db
        self.log = log

    def limit_of(self, handler: str) -> int:
        """The handler's declared limit; 1 for a handler that declares none or cannot be loaded
        (its job then fails like any other and gives its slot back)."""
        try:
            return declared_concurrency_limit(self.registry.resolve(handler))
        except (HandlerNotFound, HandlerLoadError):
            return 1

    def admit(self, batch_id: int, jobs: list[ClaimedJob]) -> list[ClaimedJob]:
        """The jobs of a just-claimed batch that may start: those without a key, and those whose key
        had a slot for them. The others were set aside (blocked) or are no longer ours."""
        keyed_jobs = [store.Keyed(job.id, job.concurrency_key, self.limit_of(job.handler))
                      for job in jobs if job.concurrency_key is not None]
        result = self.db.run(partial(store.admit, batch_id=batch_id, keyed=keyed_jobs))
        for job in result.blocked:
            self.log.info("job.blocked", job_id=job.job_id, batch_id=batch_id, concurrency_key=job.key,
                          concurrency_limit=job.limit, note="its key's slots are taken; it waits for one")
        for job_id in result.lost:
            self.log.warning("job.claim_lost", job_id=job_id, batch_id=batch_id,
                             note="another worker took the claim over before it started; not run")
        return [job for job in jobs if job.concurrency_key is None or job.id in result.admitted]

    def settle(self, jobs: Iterable[ClaimedJob]) -> set[str]:
        """After outcomes were written: give back the slots of these jobs that moved on, and make the
        next waiting jobs ready. Returns the queues that gained ready jobs."""
        keys = {job.concurrency_key for job in jobs if job.concurrency_key is not None}
        if not keys:
            return set()
        return self.db.run(partial(store.settle, keys=keys))
