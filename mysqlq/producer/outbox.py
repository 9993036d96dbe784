"""Enqueueing inside a transaction the caller holds (the outbox pattern): the job exists only if that
transaction commits."""

from __future__ import annotations

from collections.abc import Iterable
from typing import Unpack

from mysqlq.core.config import Dsn, Settings
from mysqlq.core.jobs import EnqueueOptions, Job
from mysqlq.producer import workflows
from mysqlq.producer.workflows import Group
from mysqlq.store.db import Connection, Cursor


class Transaction:
    """Enqueue inside a transaction the caller controls (the outbox pattern)."""

    def __init__(self, conn: Connection, settings: Settings) -> None:
        self.conn = conn
        self.settings = settings
        self.queues: set[str] = set()

    def cursor(self) -> Cursor:
        """A cursor for the caller's own statements in the same transaction."""
        cursor: Cursor = self.conn.cursor()
        return cursor

    def enqueue(self, handler: str, payload: object = None, **options: Unpack[EnqueueOptions]) -> int:
        """Like Producer.enqueue, but the job exists only if the transaction commits."""
        job = Job(handler, payload, **options)
        job_id = enqueue_on(self.conn, job, self.settings)
        self.queues.add(job.queue)
        return job_id

    def group(self, members: Iterable[Job], then: Job) -> Group:
        """Like Producer.group, in this transaction."""
        jobs = workflows.check_jobs(members, "group")
        with self.conn.cursor() as cur:
            found = workflows.insert_group(cur, jobs, then, self.settings)
        self.queues.update(job.queue for job in jobs)
        return found

    def chain(self, *steps: Job) -> list[int]:
        """Like Producer.chain, in this transaction."""
        jobs = workflows.check_jobs(steps, "chain")
        with self.conn.cursor() as cur:
            ids = workflows.insert_chain(cur, jobs, self.settings)
        self.queues.update(job.queue for job in jobs[:1])
        return ids


def enqueue_on(conn: Connection, job: Job, settings: Settings | None = None) -> int:
    """Enqueue on a connection the caller holds, in its current transaction; nothing is committed.

    Call :func:`mysqlq.hint.notify` after your commit to wake idle workers at once;
    without it the job starts at the workers' next poll. A job with tags (or ``after``, or a
    dedupe key held for a period) is written in more than one statement: call this between BEGIN
    and COMMIT, so that they commit together.
    """
    with conn.cursor() as cur:
        return workflows.insert(cur, job, settings or Settings(dsn=Dsn()))
