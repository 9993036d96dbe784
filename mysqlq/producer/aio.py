"""Enqueueing inside a transaction from async code: ``async with producer.atransaction() as tx``.
Every statement runs on a thread (mysqlq.producer.offload) on one connection of the producer's pool,
held from BEGIN to COMMIT; the job exists only if the transaction commits."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager
from functools import partial
from typing import TypeVar, Unpack

from mysqlq import hint
from mysqlq.core.config import Settings
from mysqlq.core.jobs import EnqueueOptions
from mysqlq.producer.offload import Offload, Steps
from mysqlq.producer.outbox import Transaction
from mysqlq.producer.pool import Pool
from mysqlq.store.db import Connection, Cursor, transaction

T = TypeVar("T")


class AsyncTransaction:
    """What ``atransaction()`` yields: enqueue, and run your own statements, in one transaction."""

    def __init__(self, tx: Transaction, steps: Steps, offload: Offload) -> None:
        self.tx = tx
        self.steps = steps
        self.offload = offload

    @property
    def queues(self) -> set[str]:
        return self.tx.queues

    async def aenqueue(self, handler: str, payload: object = None, **options: Unpack[EnqueueOptions]) -> int:
        """Like Producer.enqueue (the same options), but the job exists only if the transaction commits."""
        return await self.offload.on_thread(self.steps.run, partial(self.tx.enqueue, handler, payload, **options))

    async def run(self, statements: Callable[[Cursor], T]) -> T:
        """``statements(cursor)`` on the transaction's connection, on a thread: your own writes and reads."""

        def on_cursor() -> T:
            with self.tx.cursor() as cur:
                return statements(cur)

        return await self.offload.on_thread(self.steps.run, on_cursor)


@asynccontextmanager
async def atransaction(pool: Pool, settings: Settings, offload: Offload,
                       hints: hint.Sender) -> AsyncIterator[AsyncTransaction]:
    async with offload.place():
        steps = Steps()

        def begin() -> Connection:
            try:
                conn = steps.stack.enter_context(pool.database()).conn
                steps.stack.enter_context(transaction(conn))
                return conn
            except BaseException:
                steps.stack.close()
                raise

        conn = await offload.on_thread(steps.run, begin)
        tx = AsyncTransaction(Transaction(conn, settings), steps, offload)
        try:
            yield tx
        except BaseException as exc:
            # Rolled back even when the task is being cancelled (shielded: the thread finishes it).
            await asyncio.shield(offload.on_thread(steps.close, exc))
            raise
        await asyncio.shield(offload.on_thread(steps.close, None))
    if tx.queues:
        hints.notify(tx.queues)
