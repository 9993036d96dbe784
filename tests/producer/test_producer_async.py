"""The producer from async code: aenqueue, aenqueue_many and atransaction never block the event loop."""

from __future__ import annotations

import asyncio

import pytest

from mysqlq import Job

from ..conftest import QueueDB


def test_a_thousand_aenqueues_in_flight_each_get_their_own_job(qdb: QueueDB) -> None:
    async def main() -> list[int]:
        with qdb.producer() as producer:
            return await asyncio.gather(*(producer.aenqueue("test.record", {"n": n}) for n in range(1000)))

    ids = asyncio.run(main())
    assert len(set(ids)) == 1000
    payloads = dict(qdb.query("SELECT id, JSON_VALUE(CAST(payload AS CHAR), '$.n') FROM mysqlq_jobs"))
    assert [int(payloads[job_id]) for job_id in ids] == list(range(1000))


def test_aenqueue_many_and_the_options_of_enqueue(qdb: QueueDB) -> None:
    async def main() -> tuple[int, int]:
        with qdb.producer() as producer:
            many = await producer.aenqueue_many([Job("test.record", {"i": i}, queue="bulk") for i in range(2500)])
            one = await producer.aenqueue("test.record", queue="later", delay=3600, priority=-5)
            return many, one

    many, one = asyncio.run(main())
    assert many == 2500
    assert qdb.query("SELECT queue, status, priority FROM mysqlq_jobs WHERE id = %s", (one,)) == [
        ("later", "scheduled", -5)]
    assert qdb.statuses() == {"ready": 2500, "scheduled": 1}


def test_an_async_transaction_commits_or_rolls_back_with_your_statements(qdb: QueueDB) -> None:
    qdb.query("CREATE TABLE orders (id INT PRIMARY KEY)")

    async def main() -> None:
        with qdb.producer() as producer:
            async with producer.atransaction() as tx:
                await tx.run(lambda cur: cur.execute("INSERT INTO orders VALUES (1)"))
                await tx.aenqueue("test.record", {"order": 1})
            with pytest.raises(RuntimeError):
                async with producer.atransaction() as tx:
                    await tx.run(lambda cur: cur.execute("INSERT INTO orders VALUES (2)"))
                    await tx.aenqueue("test.record", {"order": 2})
                    raise RuntimeError("the request failed")
            # Cancelled while inside: rolled back too.
            entered = asyncio.Event()

            async def cancelled() -> None:
                async with producer.atransaction() as tx:
                    await tx.run(lambda cur: cur.execute("INSERT INTO orders VALUES (3)"))
                    await tx.aenqueue("test.record", {"order": 3})
                    entered.set()
                    await asyncio.sleep(60)

            task = asyncio.create_task(cancelled())
            await entered.wait()
            task.cancel()
            with pytest.raises(asyncio.CancelledError):
                await task
            assert await producer.aenqueue("test.record", {"after": True})  # the pool is whole again

    asyncio.run(main())
    assert qdb.query("SELECT id FROM orders") == [(1,)]
    orders = qdb.query("SELECT JSON_VALUE(CAST(payload AS CHAR), '$.order') FROM mysqlq_jobs "
                       "WHERE JSON_VALUE(CAST(payload AS CHAR), '$.order') IS NOT NULL")
    assert [int(order) for (order,) in orders] == [1]


def test_the_loop_runs_while_an_enqueue_waits_for_the_server(qdb: QueueDB) -> None:
    """The table is locked by another session: the enqueue waits on its thread, and the loop is free to
    run the coroutine that unlocks it (were the loop blocked, this test could never finish)."""
    blocker = qdb.connect()

    async def main() -> int:
        with qdb.producer() as producer:
            await producer.aenqueue("test.record")  # connects (and checks the schema) before the lock
            with blocker.cursor() as cur:
                cur.execute("LOCK TABLES mysqlq_jobs WRITE")
            enqueue = asyncio.create_task(producer.aenqueue("test.record", {"waited": True}))
            await asyncio.sleep(0.5)
            assert not enqueue.done()  # waiting for the lock, on its thread

            def unlock() -> None:
                with blocker.cursor() as cur:
                    cur.execute("UNLOCK TABLES")

            unlock()  # on the loop's thread: only possible because the loop is not blocked
            return await asyncio.wait_for(enqueue, 30)

    try:
        assert asyncio.run(main()) > 0
    finally:
        blocker.close()
