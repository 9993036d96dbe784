"""One Producer shared by many threads: a bounded pool of connections, none used by two threads at once."""

from __future__ import annotations

import os
import threading
import time
from concurrent.futures import ThreadPoolExecutor

import pytest

from mysqlq import DatabaseUnavailable, Job

from ..conftest import QueueDB

THREADS = 16


def test_sixteen_threads_share_one_producer_through_its_pool(qdb: QueueDB) -> None:
    per_thread = 50
    with qdb.producer() as producer:
        # Count each connection's users at the moment of use: never two threads on one connection.
        in_use: dict[int, int] = {}
        lock = threading.Lock()
        overlaps = []
        take, give = producer.pool.take, producer.pool.give

        def watched_take():  # type: ignore[no-untyped-def]
            lent = take()
            with lock:
                in_use[id(lent[0])] = in_use.get(id(lent[0]), 0) + 1
                if in_use[id(lent[0])] > 1:
                    overlaps.append(id(lent[0]))
            return lent

        def watched_give(lent):  # type: ignore[no-untyped-def]
            with lock:
                in_use[id(lent[0])] -= 1
            give(lent)

        producer.pool.take = watched_take  # type: ignore[method-assign]
        producer.pool.give = watched_give  # type: ignore[method-assign]

        def work(thread: int) -> list[int]:
            ids = [producer.enqueue("test.record", {"thread": thread, "n": n}) for n in range(per_thread)]
            ids += [producer.enqueue_many([Job("test.record", {"thread": thread, "bulk": b}) for b in range(10)])]
            with producer.transaction() as tx:
                ids.append(tx.enqueue("test.record", {"thread": thread, "tx": True}))
            return ids

        with ThreadPoolExecutor(THREADS) as pool:
            results = list(pool.map(work, range(THREADS)))
        opened = producer.pool._opened
    assert overlaps == []
    assert 1 <= opened <= producer.pool.size  # bounded: not a connection per call, nor per thread
    singles = [job_id for ids in results for job_id in ids[:per_thread]]
    assert len(set(singles)) == THREADS * per_thread  # every id answered to the thread that enqueued it
    assert all(ids[per_thread] == 10 for ids in results)
    expected = THREADS * (per_thread + 10 + 1)
    assert qdb.scalar("SELECT COUNT(*) FROM mysqlq_jobs") == expected
    # Each thread's payloads went in once, under the ids it was given.
    for thread, ids in enumerate(results):
        rows = qdb.query("SELECT id FROM mysqlq_jobs WHERE JSON_VALUE(CAST(payload AS CHAR), '$.thread') = %s "
                         "AND JSON_VALUE(CAST(payload AS CHAR), '$.n') IS NOT NULL ORDER BY id", (thread,))
        assert [row[0] for row in rows] == sorted(ids[:per_thread])


def test_a_thread_waits_for_a_connection_and_then_gives_up_in_one_line(qdb: QueueDB) -> None:
    with qdb.producer(pool_size=1) as producer:
        producer.pool.wait = 0.2
        with producer.transaction() as tx:  # holds the only connection
            tx.enqueue("test.record")
            failed: list[BaseException] = []

            def other() -> None:
                try:  # a job with tags: a transaction, on a connection of the pool
                    producer.enqueue("test.record", tags=["pooled"])
                except DatabaseUnavailable as exc:
                    failed.append(exc)

            thread = threading.Thread(target=other)
            thread.start()
            thread.join()
        assert len(failed) == 1 and "all 1 connections of the producer were in use" in str(failed[0])
        producer.enqueue("test.record", tags=["pooled"])  # free again
        producer.enqueue("test.record")  # a plain job is written apart from the pool (its group commit)
    assert qdb.statuses() == {"ready": 3}


def test_a_forked_child_opens_its_own_connections(qdb: QueueDB) -> None:
    with qdb.producer() as producer:
        parent_id = producer.enqueue("test.record", {"who": "parent"})
        pid = os.fork()
        if pid == 0:  # the child: its enqueue must not touch the parent's socket
            code = 0
            try:
                producer.enqueue("test.record", {"who": "child"})
            except BaseException:
                code = 1
            finally:
                os._exit(code)
        _, status = os.waitpid(pid, 0)
        assert os.waitstatus_to_exitcode(status) == 0
        assert producer.enqueue("test.record", {"who": "parent again"}) > parent_id  # its connection still works
    assert qdb.statuses() == {"ready": 3}


@pytest.mark.parametrize("size", [0, -1, 1.5, True])
def test_a_bad_pool_size_is_refused(qdb: QueueDB, size: object) -> None:
    from mysqlq import Producer

    with pytest.raises(ValueError, match="pool_size must be a positive integer"):
        Producer(qdb.settings(), pool_size=size)  # type: ignore[arg-type]


def test_the_pool_lends_each_connection_to_one_thread_and_wakes_a_waiting_one() -> None:
    """The pool alone, under contention: 8 threads on 2 connections, each borrow held a moment, so
    that threads wait for a connection to come back (the locked path) while others take one that
    was just returned (the lock-free path). Every borrow is served, none by a connection in use."""
    from mysqlq.producer.pool import Pool

    made: list[object] = []
    pool = Pool(lambda: made.append(object()) or made[-1], size=2, wait=10.0)  # type: ignore[func-returns-value]
    holders: dict[int, int] = {}
    lock = threading.Lock()
    overlaps: list[int] = []
    served = []

    def borrow(n: int) -> None:
        for _ in range(200):
            lent = pool.take()
            with lock:
                holders[id(lent[0])] = holders.get(id(lent[0]), 0) + 1
                if holders[id(lent[0])] > 1:
                    overlaps.append(id(lent[0]))
            time.sleep(0.0001 if n % 2 else 0)
            with lock:
                holders[id(lent[0])] -= 1
            pool.give(lent)
            served.append(n)

    with ThreadPoolExecutor(8) as threads:
        list(threads.map(borrow, range(8)))
    assert overlaps == []
    assert len(made) == 2  # never more than its size
    assert len(served) == 8 * 200  # no thread gave up waiting
