"""One Producer shared by many threads: a bounded pool of connections, none used by two threads at once."""

from __future__ import annotations

import os
import threading
from concurrent.futures import ThreadPoolExecutor

import pytest

from mysqlq import DatabaseUnavailable, Job

from .conftest import QueueDB

THREADS = 16


def test_sixteen_threads_share_one_producer_through_its_pool(qdb: QueueDB) -> None:
    per_thread = 50
    with qdb.producer() as producer:
        # Count each connection's users at the moment of use: never two threads on one connection.
        in_use: dict[int, int] = {}
        lock = threading.Lock()
        overlaps = []
        database = producer.pool.database

        def watched():  # type: ignore[no-untyped-def]
            cm = database()

            class Watch:
                def __enter__(self):  # type: ignore[no-untyped-def]
                    db = cm.__enter__()
                    with lock:
                        in_use[id(db)] = in_use.get(id(db), 0) + 1
                        if in_use[id(db)] > 1:
                            overlaps.append(id(db))
                    self.db = db
                    return db

                def __exit__(self, *exc):  # type: ignore[no-untyped-def]
                    with lock:
                        in_use[id(self.db)] -= 1
                    return cm.__exit__(*exc)

            return Watch()

        producer.pool.database = watched  # type: ignore[method-assign]

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
                try:
                    producer.enqueue("test.record")
                except DatabaseUnavailable as exc:
                    failed.append(exc)

            thread = threading.Thread(target=other)
            thread.start()
            thread.join()
        assert len(failed) == 1 and "all 1 connections of the producer were in use" in str(failed[0])
        producer.enqueue("test.record")  # free again
    assert qdb.statuses() == {"ready": 2}


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
