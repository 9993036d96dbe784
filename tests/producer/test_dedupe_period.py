"""Dedupe keys held for a period: the key is taken for that long from the enqueue that took it,
whatever becomes of its job; an enqueue within the period returns that job's id and writes nothing,
one after it makes a new job. Exact under concurrent producers, in every way of enqueueing."""

from __future__ import annotations

import asyncio
import json
import math
import threading
from collections.abc import Callable
from datetime import timedelta
from typing import Any

import pytest
from mysqlq_harness.jobs import EVERY_JOB

from mysqlq import InvalidJob, Job, enqueue_on
from mysqlq.core.jobs import period_microseconds

from ..conftest import QueueDB

PRODUCERS = 8  # threads enqueueing one key at once, each on a connection of its own
KEYS = 12  # rounds of them, one key each


def keys_held(qdb: QueueDB) -> dict[str, int]:
    """Each key held for a period, with the id of the job holding it."""
    return dict(qdb.query("SELECT dedupe_key, job_id FROM mysqlq_dedupe_periods"))


def end_periods(qdb: QueueDB) -> None:
    """End every key's period now, by the server's clock (as if it had passed)."""
    qdb.query("UPDATE mysqlq_dedupe_periods SET expires_at = UTC_TIMESTAMP(6) - INTERVAL 1 MICROSECOND")


def at_once(calls: list[Callable[[], int]]) -> list[int]:
    """Run each call on a thread of its own, all released together; their results, in order."""
    start = threading.Barrier(len(calls))
    results: list[Any] = [None] * len(calls)

    def run(n: int) -> None:
        start.wait()
        try:
            results[n] = calls[n]()
        except BaseException as exc:  # reported by the assertion below
            results[n] = exc

    threads = [threading.Thread(target=run, args=(n,)) for n in range(len(calls))]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout=60)
    failed = [result for result in results if isinstance(result, BaseException)]
    assert not failed, failed
    return results


def every_form(qdb: QueueDB, producer: Any, key: str, period: Any) -> list[Callable[[], int]]:
    """PRODUCERS ways to enqueue ``key`` for ``period``, each returning the id it got (0: enqueue_many,
    which counts new jobs, added none)."""

    def plain(n: int) -> Callable[[], int]:
        return lambda: producer.enqueue("test.record", {"n": n}, dedupe_key=key, dedupe_scope=period)

    def in_transaction() -> int:
        with producer.transaction() as tx:
            return int(tx.enqueue("test.record", dedupe_key=key, dedupe_scope=period))

    def on_connection() -> int:
        conn = qdb.connect()
        try:
            conn.begin()
            job_id = enqueue_on(conn, Job("test.record", dedupe_key=key, dedupe_scope=period), qdb.settings())
            conn.commit()
            return job_id
        finally:
            conn.close()

    def many() -> int:
        added = producer.enqueue_many([Job("test.record", dedupe_key=key, dedupe_scope=period),
                                       Job("test.record", dedupe_key=key, dedupe_scope=period)])
        assert added in (0, 1)
        return 0

    def tagged_and_keyed() -> int:
        return int(producer.enqueue("test.record", dedupe_key=key, dedupe_scope=period, tags=["t"],
                                    fairness_key="tenant"))

    forms = [plain(0), plain(1), in_transaction, on_connection, many, tagged_and_keyed, plain(2), plain(3)]
    assert len(forms) == PRODUCERS
    return forms


def test_concurrent_producers_of_one_key_make_one_job_per_period(qdb: QueueDB) -> None:
    with qdb.producer(pool_size=PRODUCERS) as producer:
        for round_ in range(KEYS):
            key = f"sync-{round_}"
            ids = [job_id for job_id in at_once(every_form(qdb, producer, key, "1h")) if job_id]
            assert len(set(ids)) == 1, ids
            assert keys_held(qdb)[key] == ids[0]
        assert qdb.scalar(f"SELECT COUNT(*) FROM {EVERY_JOB}") == KEYS
        first = keys_held(qdb)

        # The periods end: the very next enqueues of each key, at once again, make one new job per key.
        end_periods(qdb)
        for round_ in range(KEYS):
            key = f"sync-{round_}"
            ids = [job_id for job_id in at_once(every_form(qdb, producer, key, 3600)) if job_id]
            assert len(set(ids)) == 1 and ids[0] != first[key], ids
            assert keys_held(qdb)[key] == ids[0]
    assert qdb.scalar(f"SELECT COUNT(*) FROM {EVERY_JOB}") == 2 * KEYS
    assert qdb.scalar(f"SELECT COUNT(*) FROM {EVERY_JOB} WHERE dedupe_key IS NOT NULL") == 0  # not on the job


def test_an_enqueue_within_the_period_returns_the_job_and_one_after_it_makes_a_new_one(qdb: QueueDB) -> None:
    with qdb.producer() as producer:
        first = producer.enqueue("test.record", {"n": 1}, dedupe_key="digest", dedupe_scope=1.0)
        assert producer.enqueue("test.record", {"n": 2}, dedupe_key="digest", dedupe_scope=1.0) == first
        # The server's clock decides when the period ends; wait for it there.
        qdb.wait_for(lambda: qdb.scalar("SELECT expires_at <= UTC_TIMESTAMP(6) FROM mysqlq_dedupe_periods") == 1,
                     what="the period to end", timeout=10)
        second = producer.enqueue("test.record", {"n": 3}, dedupe_key="digest", dedupe_scope=1.0)
        assert producer.enqueue("test.record", {"n": 4}, dedupe_key="digest", dedupe_scope=1.0) == second
    assert second != first
    assert qdb.query(f"SELECT id, payload FROM {EVERY_JOB} ORDER BY id") == [(first, b'{"n":1}'), (second, b'{"n":3}')]


def test_a_done_job_within_its_period_still_holds_the_key(qdb: QueueDB) -> None:
    with qdb.producer() as producer:
        first = producer.enqueue("test.record", {"n": 1}, dedupe_key="daily", dedupe_scope=timedelta(hours=1))
        assert qdb.worker("--burst").wait(timeout=60) == 0, qdb.logs()
        # Done, it moved into the history like any job without a key: the key stays taken all the same.
        assert qdb.query("SELECT id, status FROM mysqlq_jobs_history") == [(first, "done")]
        assert qdb.scalar("SELECT COUNT(*) FROM mysqlq_jobs") == 0
        assert producer.enqueue("test.record", {"n": 2}, dedupe_key="daily", dedupe_scope="1h") == first
        state = producer.job(dedupe_key="daily")
        assert state is not None and (state.id, state.status) == (first, "done")
        # Deleted (a queue that keeps no history, or a purge) within the period: still taken.
        qdb.query("DELETE FROM mysqlq_jobs_history")
        assert producer.enqueue("test.record", {"n": 3}, dedupe_key="daily", dedupe_scope="1h") == first
        end_periods(qdb)
        assert producer.job(dedupe_key="daily") is None
        second = producer.enqueue("test.record", {"n": 4}, dedupe_key="daily", dedupe_scope="1h")
    assert second != first
    assert qdb.query(f"SELECT id, payload FROM {EVERY_JOB}") == [(second, b'{"n":4}')]


def test_a_job_still_waiting_when_its_period_ends_does_not_hold_the_key(qdb: QueueDB) -> None:
    with qdb.producer() as producer:
        first = producer.enqueue("test.record", dedupe_key="later", dedupe_scope="10m", delay=3600)
        end_periods(qdb)
        second = producer.enqueue("test.record", dedupe_key="later", dedupe_scope="10m")
    assert second != first
    assert dict(qdb.query(f"SELECT id, status FROM {EVERY_JOB}")) == {first: "scheduled", second: "ready"}


def test_a_held_key_writes_nothing(qdb: QueueDB) -> None:
    with qdb.producer() as producer:
        first = producer.enqueue("test.record", dedupe_key="k", dedupe_scope="1h")
        held = qdb.query("SELECT dedupe_key, job_id, expires_at FROM mysqlq_dedupe_periods")
        assert producer.enqueue("test.record", dedupe_key="k", dedupe_scope="2h", tags=["x"]) == first
        assert producer.enqueue_many([Job("test.record", dedupe_key="k", dedupe_scope="1h")]) == 0
    assert qdb.query("SELECT dedupe_key, job_id, expires_at FROM mysqlq_dedupe_periods") == held
    assert qdb.scalar(f"SELECT COUNT(*) FROM {EVERY_JOB}") == 1
    assert qdb.scalar("SELECT COUNT(*) FROM mysqlq_job_tags") == 0


@pytest.mark.parametrize("scope", [0, -1, 0.0, -0.5, "0s", "-5m", "0", "soon", "10 minutes", "", math.nan,
                                   math.inf, 1e10, timedelta(0), timedelta(seconds=-1), True, None, [60]],
                         ids=repr)
def test_a_bad_period_is_refused_in_one_line_and_writes_nothing(qdb: QueueDB, scope: Any) -> None:
    with qdb.producer() as producer:
        for enqueue in (lambda: producer.enqueue("test.record", dedupe_key="k", dedupe_scope=scope),
                        lambda: producer.enqueue("test.record", dedupe_scope=scope),
                        lambda: producer.enqueue_many([Job("test.record", dedupe_key="ok", dedupe_scope="1h"),
                                                       Job("test.record", dedupe_key="k", dedupe_scope=scope)])):
            with pytest.raises(InvalidJob) as refused:
                enqueue()
            assert "dedupe scope must be 'forever', 'active' or a period" in str(refused.value)
            assert f"got {scope!r}" in str(refused.value) and "\n" not in str(refused.value)
    assert qdb.scalar(f"SELECT COUNT(*) FROM {EVERY_JOB}") == 0
    assert qdb.scalar("SELECT COUNT(*) FROM mysqlq_dedupe_periods") == 0


@pytest.mark.parametrize(("scope", "microseconds"), [
    ("10m", 600_000_000), ("1h", 3_600_000_000), ("30s", 30_000_000), (" 2D ", 172_800_000_000), ("90", 90_000_000),
    (45, 45_000_000), (0.25, 250_000), (timedelta(minutes=5), 300_000_000), (1e-9, 1),
])
def test_a_period_is_a_duration_seconds_or_a_timedelta(scope: Any, microseconds: int) -> None:
    assert period_microseconds(scope) == microseconds


def test_the_key_is_held_for_the_period_given(qdb: QueueDB) -> None:
    with qdb.producer() as producer:
        producer.enqueue("test.record", dedupe_key="k", dedupe_scope="10m")
    assert qdb.scalar("SELECT TIMESTAMPDIFF(SECOND, UTC_TIMESTAMP(6), expires_at) FROM mysqlq_dedupe_periods") \
        in (599, 600)


def test_workflows_and_async_forms_take_a_period(qdb: QueueDB) -> None:
    def period_job(key: str, **options: Any) -> Job:
        return Job("test.record", dedupe_key=key, dedupe_scope="1h", **options)

    with qdb.producer() as producer:
        parent = producer.enqueue("test.record")
        child = producer.enqueue("test.record", after=[parent], dedupe_key="child", dedupe_scope="1h")
        assert producer.enqueue("test.record", after=[parent], dedupe_key="child", dedupe_scope="1h") == child
        group = producer.group([period_job("member"), period_job("member")], then=period_job("callback"))
        assert group.members[0] == group.members[1]
        chain = producer.chain(period_job("step"), period_job("next"))

        async def from_async() -> list[int]:
            first = await producer.aenqueue("test.record", dedupe_key="async", dedupe_scope="1h")
            again = await producer.aenqueue("test.record", dedupe_key="async", dedupe_scope="1h")
            async with producer.atransaction() as tx:
                in_tx = await tx.aenqueue("test.record", dedupe_key="async", dedupe_scope="1h")
            return [first, again, in_tx, await producer.aenqueue_many([period_job("async")])]

        first, again, in_tx, added = asyncio.run(from_async())
    assert first == again == in_tx and added == 0
    assert keys_held(qdb) == {"child": child, "member": group.members[0], "callback": group.callback,
                              "step": chain[0], "next": chain[1], "async": first}
    assert qdb.scalar(f"SELECT COUNT(*) FROM {EVERY_JOB}") == 1 + 1 + 2 + 2 + 1
    assert qdb.scalar("SELECT COUNT(*) FROM mysqlq_dependencies WHERE child_id = %s", (child,)) == 1


def test_a_rolled_back_enqueue_leaves_the_key_free(qdb: QueueDB) -> None:
    with qdb.producer() as producer:
        with pytest.raises(RuntimeError), producer.transaction() as tx:
            tx.enqueue("test.record", dedupe_key="k", dedupe_scope="1h")
            raise RuntimeError("the caller's own work failed")
        assert keys_held(qdb) == {}
        job_id = producer.enqueue("test.record", dedupe_key="k", dedupe_scope="1h")
    assert keys_held(qdb) == {"k": job_id}


def test_the_cli_and_jsonl_lines_take_a_period(qdb: QueueDB) -> None:
    first = qdb.cli("enqueue", "test.record", "{}", "--dedupe-key", "c", "--dedupe-scope", "10m", check=True)
    again = qdb.cli("enqueue", "test.record", "{}", "--dedupe-key", "c", "--dedupe-scope", "10m", check=True)
    assert int(first.stdout) == int(again.stdout)
    path = qdb.tmp / "jobs.jsonl"
    path.write_text("\n".join(json.dumps(line) for line in [
        {"handler": "test.record", "dedupe_key": "j1", "dedupe_scope": "1h"},
        {"handler": "test.record", "dedupe_key": "j2", "dedupe_scope": 600},
        {"handler": "test.record", "dedupe_key": "j2", "dedupe_scope": 600},
        {"handler": "test.record", "dedupe_key": "j3"}]) + "\n")
    assert "enqueued 3 jobs (1 skipped by dedupe key)" in qdb.cli("enqueue", "--file", str(path), check=True).stdout
    assert sorted(keys_held(qdb)) == ["c", "j1", "j2"]
    bad = qdb.cli("enqueue", "test.record", "--dedupe-key", "c", "--dedupe-scope", "0s")
    assert bad.returncode == 2 and "'0s' is not forever, active or a period such as 10m, 1h or 90s" in bad.stderr
    path.write_text(json.dumps({"handler": "test.record", "dedupe_key": "j4", "dedupe_scope": -60}) + "\n")
    bad = qdb.cli("enqueue", "--file", str(path))
    assert bad.returncode == 1 and bad.stderr.count("\n") == 1 and "line 1: dedupe scope must be" in bad.stderr
    assert qdb.scalar(f"SELECT COUNT(*) FROM {EVERY_JOB}") == 4
