"""The producer API: enqueue jobs on mysqlq's own connection or inside the caller's transaction."""

from __future__ import annotations

import contextvars
from collections.abc import Callable, Iterable, Iterator, Sequence
from contextlib import AbstractAsyncContextManager, contextmanager
from datetime import datetime
from functools import partial
from typing import TYPE_CHECKING, Any, TypeVar, TypeVarTuple, Unpack

from mysqlq import hint
from mysqlq.core.config import Dsn, Settings
from mysqlq.core.errors import InvalidJob
from mysqlq.core.jobs import DEDUPE_SCOPES, DedupeScope, EnqueueOptions, Job, JobState, job_row, opened
from mysqlq.producer import workflows
from mysqlq.producer.group_commit import GroupCommit
from mysqlq.producer.offload import Offload
from mysqlq.producer.outbox import Transaction
from mysqlq.producer.pool import Pool
from mysqlq.producer.workflows import Group
from mysqlq.store import fairness
from mysqlq.store import jobs as store
from mysqlq.store.db import CLI_RETRY, Connection, Cursor, Database, transaction
from mysqlq.store.schema import check_schema

if TYPE_CHECKING:
    from mysqlq.producer.aio import AsyncTransaction

T = TypeVar("T")
Ts = TypeVarTuple("Ts")
BULK_CHUNK = 1000  # jobs per INSERT of enqueue_many, at most
BULK_BYTES = 4 * 1024 * 1024  # an INSERT of enqueue_many ends once its payloads reach this many bytes
POOL_SIZE = 8  # connections a Producer opens at most, shared by its threads


class Producer:
    """Enqueues jobs on connections of its own (autocommit), then hints idle workers (mysqlq.hint).

    One Producer may be shared by every thread of a process: each call borrows a connection of its
    pool (at most ``pool_size``, opened as needed) that no other thread uses meanwhile.

    >>> with Producer(Settings(dsn=Dsn.parse("mysql://app:pw@db/app"))) as q:
    ...     job_id = q.enqueue("mail.send", {"to": "a@example.com"})
    """

    def __init__(self, settings: Settings | None = None, *, dsn: str | None = None,
                 pool_size: int = POOL_SIZE) -> None:
        if settings is None:
            settings = Settings(dsn=Dsn.parse(dsn)) if dsn else Settings()
        self.settings = settings
        self.pool = Pool(lambda: Database(settings.dsn, retry=CLI_RETRY, on_connect=self._on_connect), pool_size)
        self.hints = hint.Sender(settings)
        self.offload = Offload(pool_size)  # the async methods' threads
        self.renderer = store.RowRenderer()  # its connections are all opened alike (mysqlq.store.db.connect)
        self.grouped = GroupCommit(settings, self.renderer, self.hints)

    def _on_connect(self, conn: Connection) -> None:
        with conn.cursor() as cur:
            check_schema(cur)

    def enqueue(
        self,
        handler: str,
        payload: object = None,
        *,
        queue: str = "default",
        delay: float = 0.0,
        run_at: datetime | None = None,
        priority: int = 0,
        dedupe_key: str | None = None,
        max_attempts: int | None = None,
        time_limit: float | None = None,
        dedupe_scope: DedupeScope = "forever",
        concurrency_key: str | None = None,
        after: Sequence[int] = (),
        on_parent_failure: str = "cancel",
        tags: Sequence[str] = (),
        fairness_key: str | None = None,
    ) -> int:
        """Enqueue one job and return its id (with a taken dedupe key: the existing job's id).

        ``dedupe_scope``: "forever" holds the key until the job is purged, "active" only until it
        ends (done, dead or cancelled); a period ("10m", "1h", seconds or a timedelta) holds it for that
        long from this enqueue, whatever becomes of the job, and an enqueue after it makes a new job
        (mysqlq.store.dedupe_periods). ``concurrency_key``: at most the handler's
        ``concurrency_limit`` jobs with this key run at once (see mysqlq.worker.intake.concurrency_admission).
        ``after``: ids of jobs that must be done first; the job waits (status ``waiting``) until the
        last of them is. If one ends dead or cancelled the job is cancelled, unless
        ``on_parent_failure="run"``. ``tags``: a few labels (at most 10, each 1 to 64 characters without
        spaces) to find the job by: ``mysqlq jobs list --tag``, the dashboard. ``fairness_key``: a tenant
        (or any party) the job is for; within a queue and a priority, workers take jobs in turn across
        keys instead of in the order they were enqueued (mysqlq.store.fairness).
        """
        # More than one statement (parents, tag rows, a turn, a key's period): one transaction.
        if after or tags or fairness_key is not None or (dedupe_key is not None and dedupe_scope not in DEDUPE_SCOPES):
            job = Job(handler, payload, queue, delay, run_at, priority, dedupe_key, max_attempts, time_limit,
                      dedupe_scope, concurrency_key, after, on_parent_failure, tags, fairness_key)
            job.row(self.settings)
            job.parents()  # both checked before a connection is taken
            with self.pool.database() as db:
                job_id = db.run(lambda cur: _in_transaction(cur, workflows.insert, job, self.settings, self.renderer))
            self.hints.notify((queue,), delay)
            return job_id
        # The common case, on the shortest path (no Job made); written together with the enqueues of
        # other threads that come while a commit is in flight (mysqlq.producer.group_commit).
        row = job_row(self.settings, handler, payload, queue, delay, run_at, priority, dedupe_key,
                      max_attempts, time_limit, dedupe_scope, concurrency_key)
        return self.grouped.insert(row, delay)

    def group(self, members: Iterable[Job], then: Job) -> Group:
        """Enqueue jobs and a callback that runs once, when the last of them has finished, in one
        transaction. The callback reads the members' ids and results from ``ctx.parents``. A member
        that ends dead or cancelled cancels the callback, unless it has ``on_parent_failure="run"``."""
        jobs = workflows.check_jobs(members, "group")
        with self.pool.database() as db:
            found = db.run(lambda cur: _in_transaction(cur, workflows.insert_group, jobs, then, self.settings,
                                                       self.renderer))
        self.hints.notify({job.queue for job in jobs})
        return found

    def chain(self, *steps: Job) -> list[int]:
        """Enqueue jobs that run one after the other, in one transaction; returns their ids. Each step
        reads the previous one's result from ``ctx.parent_result``. A step that ends dead or cancelled
        cancels the rest (a step with ``on_parent_failure="run"`` runs anyway)."""
        jobs = workflows.check_jobs(steps, "chain")
        with self.pool.database() as db:
            ids = db.run(lambda cur: _in_transaction(cur, workflows.insert_chain, jobs, self.settings, self.renderer))
        if jobs:
            self.hints.notify((jobs[0].queue,))
        return ids

    def enqueue_many(self, jobs: Iterable[Job], progress: Callable[[int], object] | None = None) -> int:
        """Enqueue many jobs in multi-row INSERTs of one transaction, all or nothing; returns how many
        were new (a job whose dedupe key is taken is skipped).

        Jobs are checked a chunk at a time, while the server inserts the chunk before; a bad job
        (InvalidJob names its position) rolls back every chunk already sent, so nothing is written.
        ``progress`` hears of each chunk inserted. Jobs with ``tags`` go in chunks of their own (one
        more statement for a chunk's tag rows, and one to read their ids), jobs with a fairness key
        too (two more statements per queue, priority and key, for their turns), jobs with ``after``
        or a key held for a period one at a time, after the others, in the same transaction.
        """
        try:
            batch = list(jobs)
        except TypeError:
            raise InvalidJob(f"enqueue_many takes an iterable of mysqlq.Job, got {type(jobs).__name__}") from None
        wrong = next((n for n, job in enumerate(batch) if not isinstance(job, Job)), None)
        if wrong is not None:
            raise InvalidJob(f"enqueue_many takes mysqlq.Job objects; item {wrong} is {type(batch[wrong]).__name__}")
        with self.pool.database() as db:
            inserted = db.run(lambda cur: self._insert_all(cur, batch, progress))
        self.hints.notify({job.queue for job in batch})
        return inserted

    def _chunks(self, batch: Sequence[tuple[int, Job]]) -> Iterator[list[tuple[Any, ...]]]:
        """The checked rows of ``batch`` (jobs with their places in the caller's list), BULK_CHUNK jobs
        or BULK_BYTES of payload at a time (so that one statement stays well under the server's
        max_allowed_packet, 16 MiB by default)."""
        settings = self.settings
        rows: list[tuple[Any, ...]] = []
        size = 0
        for n, job in batch:
            try:
                row = job.row(settings)
            except InvalidJob as exc:
                raise InvalidJob(f"item {n}: {exc}") from None
            rows.append(row)
            size += len(row[2])
            if len(rows) == BULK_CHUNK or size >= BULK_BYTES:
                yield rows
                rows, size = [], 0
        if rows:
            yield rows

    def _insert_all(self, cur: Cursor, batch: list[Job], progress: Callable[[int], object] | None) -> int:
        try:
            return self._insert_in_chunks(cur, batch, progress, tagged_in_chunks=True)
        except store.Interleaved:  # rolled back (``progress`` heard of chunks that are gone): go again
            return self._insert_in_chunks(cur, batch, progress, tagged_in_chunks=False)

    def _insert_in_chunks(self, cur: Cursor, batch: list[Job], progress: Callable[[int], object] | None,
                          tagged_in_chunks: bool) -> int:
        alone = [_alone(job) for job in batch]
        plain = [(n, job) for n, job in enumerate(batch)
                 if not (alone[n] or job.tags or job.fairness_key is not None)]
        keyed = [(n, job) for n, job in enumerate(batch)
                 if job.fairness_key is not None and not (alone[n] or job.tags)]
        tagged = [(n, job) for n, job in enumerate(batch)
                  if job.tags and not alone[n] and job.fairness_key is None] if tagged_in_chunks else []
        # Each after its parents or its key's period taken, or with its tag rows (a keyed job's, or when
        # a chunk's ids were not one block), one at a time.
        later = [(n, job) for n, job in enumerate(batch)
                 if alone[n] or (job.tags and (job.fairness_key is not None or not tagged_in_chunks))]
        with transaction(cur.connection):
            total, sent = 0, 0
            with store.bulk_insert(cur, self.renderer) as bulk:
                for rows in self._chunks(plain):  # checked while the server inserts the chunk before
                    total += bulk.send(rows)
                    if sent and progress:
                        progress(sent)
                    sent = len(rows)
                total += bulk.wait()
                if sent and progress:
                    progress(sent)
            chunks = list(self._chunks(keyed))  # their turns taken once per queue, priority and key
            turned = iter(fairness.with_turns(cur, [row for rows in chunks for row in rows]))
            for rows in chunks:
                total += fairness.insert_turned(cur, [next(turned) for _ in rows], self.renderer)
                if progress:
                    progress(len(rows))
            for rows in self._chunks(tagged):
                total += store.insert_tagged(cur, rows, self.renderer)
                if progress:
                    progress(len(rows))
            for n, job in later:
                try:
                    total += workflows.insert_counted(cur, job, self.settings, self.renderer)[1]
                except InvalidJob as exc:
                    raise InvalidJob(f"item {n}: {exc}") from None
            if later and progress:
                progress(len(later))
        return total

    def job(self, job_id: int | None = None, *, dedupe_key: str | None = None) -> JobState | None:
        """Where job ``job_id`` (or the job holding ``dedupe_key``) stands: status, attempts, times,
        last error and, once done, the value its handler returned (``.result``). None when there is
        no such job (or it was purged)."""
        if (job_id is None) == (dedupe_key is None):
            raise InvalidJob("give a job id or a dedupe key, not both")
        with self.pool.database() as db:
            state = db.run(lambda cur: store.job_state(cur, job_id, dedupe_key))
        return None if state is None else opened(state, self.settings.keys)

    @contextmanager
    def transaction(self) -> Iterator[Transaction]:
        """A transaction on the producer's connection: your statements and enqueues commit together.

        Workers are hinted after the commit, never before.
        """
        with self.pool.database() as db:
            conn = db.conn
            tx = Transaction(conn, self.settings)
            with transaction(conn):
                yield tx
        if tx.queues:
            self.hints.notify(tx.queues)

    # ------------------------------------------------------------------ from async code

    async def aenqueue(self, handler: str, payload: object = None, **options: Unpack[EnqueueOptions]) -> int:
        """Like :meth:`enqueue` (the same options), without blocking the event loop: the job is made
        and written on a thread, together with the others enqueued meanwhile (one commit)."""
        if _grouped(options):
            make = partial(contextvars.copy_context().run, self._plain_row, handler, payload, options)
            return await self.grouped.submit(make, options.get("delay", 0.0))
        return await self.offload.call(partial(self.enqueue, handler, payload, **options))

    def _plain_row(self, handler: str, payload: object, options: EnqueueOptions) -> tuple[Any, ...]:
        return Job(handler, payload, **options).row(self.settings)

    async def aenqueue_many(self, jobs: Iterable[Job], progress: Callable[[int], object] | None = None) -> int:
        """Like :meth:`enqueue_many`, without blocking the event loop (``progress`` is called on a thread)."""
        return await self.offload.call(self.enqueue_many, list(jobs), progress)

    async def agroup(self, members: Iterable[Job], then: Job) -> Group:
        """Like :meth:`group`, without blocking the event loop."""
        return await self.offload.call(self.group, list(members), then)

    async def achain(self, *steps: Job) -> list[int]:
        """Like :meth:`chain`, without blocking the event loop."""
        return await self.offload.call(self.chain, *steps)

    async def ajob(self, job_id: int | None = None, *, dedupe_key: str | None = None) -> JobState | None:
        """Like :meth:`job`, without blocking the event loop."""
        return await self.offload.call(partial(self.job, job_id, dedupe_key=dedupe_key))

    def atransaction(self) -> AbstractAsyncContextManager[AsyncTransaction]:
        """``async with producer.atransaction() as tx``: ``await tx.aenqueue(…)`` and ``await tx.run(fn)``
        (your statements, ``fn(cursor)``) commit together when the block ends, or roll back."""
        from mysqlq.producer.aio import atransaction  # asyncio's import, for async callers only

        return atransaction(self.pool, self.settings, self.offload, self.hints)

    def close(self) -> None:
        self.pool.close()
        self.grouped.close()
        self.hints.close()
        self.offload.close()

    def __enter__(self) -> Producer:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


def _grouped(options: EnqueueOptions) -> bool:
    """Whether a job of these options is written in one row (no tags, ``after``, fairness key or key
    held for a period), so that its enqueue may share a commit with others'."""
    return not (options.get("after") or options.get("tags") or options.get("fairness_key") is not None
                or (options.get("dedupe_key") is not None
                    and options.get("dedupe_scope", "forever") not in DEDUPE_SCOPES))


def _alone(job: Job) -> bool:
    """Whether enqueue_many inserts ``job`` by itself: after its parents, or once its key's period is
    taken (mysqlq.store.dedupe_periods)."""
    return bool(job.after) or (job.dedupe_key is not None and job.dedupe_scope not in DEDUPE_SCOPES)


def _in_transaction(cur: Cursor, insert: Callable[[Cursor, *Ts], T], *args: *Ts) -> T:
    """``insert(cur, *args)`` in a transaction of its own (a workflow is enqueued whole or not at all)."""
    with transaction(cur.connection):
        return insert(cur, *args)
