"""Group commit: enqueues that come while a commit of the same producer is in flight are written
together (one multi-row INSERT, one commit), and each caller is told its own job's id."""

from __future__ import annotations

import asyncio
import threading
import time
from collections.abc import Callable, Iterator
from concurrent.futures import ThreadPoolExecutor
from datetime import UTC, datetime, timedelta
from typing import Any

import MySQLdb
import pytest
from opentelemetry.sdk.trace import TracerProvider

from mysqlq import InvalidJob
from mysqlq.store import grouped
from mysqlq.store import jobs as store

from ..conftest import QueueDB


def hold_the_first_commit(monkeypatch: pytest.MonkeyPatch, producer: Any, until_waiting: int) -> threading.Event:
    """The next commit (a lone enqueue's, or a group's) is let through only once ``until_waiting``
    enqueues wait behind it: the group that follows is then exactly those (a commit in flight, not a
    clock, is what groups them)."""
    held = threading.Event()

    def hold() -> None:
        if not held.is_set():
            held.set()
            deadline = time.monotonic() + 30
            while len(producer.grouped._pending) < until_waiting:
                came = len(producer.grouped._pending)
                assert time.monotonic() < deadline, f"{came} enqueues came, not {until_waiting}"
                time.sleep(0.001)

    send, receive = store.insert_rendered, grouped.SentGroup.receive

    def held_send(conn: Any, row: Any, renderer: Any) -> int:
        hold()
        return send(conn, row, renderer)

    def held_receive(self: grouped.SentGroup) -> list[int]:
        hold()
        return receive(self)

    monkeypatch.setattr(store, "insert_rendered", held_send)
    monkeypatch.setattr(grouped.SentGroup, "receive", held_receive)
    return held


def groups_written(monkeypatch: pytest.MonkeyPatch) -> list[int]:
    """The sizes of the groups written from now on (a lone enqueue's single INSERT is none)."""
    sizes: list[int] = []
    send = grouped.send_group

    def counted(conn: Any, rows: Any, renderer: Any) -> grouped.SentGroup:
        sizes.append(len(rows))
        return send(conn, rows, renderer)

    monkeypatch.setattr(grouped, "send_group", counted)
    return sizes


@pytest.fixture
def one_commit_in_flight(qdb: QueueDB) -> Iterator[Any]:
    """A producer that has at most one commit in flight (the default is two), so that a held commit
    leaves every other enqueue waiting; connected already."""
    with qdb.producer() as producer:
        producer.grouped.in_flight = 1
        producer.enqueue("test.record", {"first": True})
        yield producer


def in_threads(count: int, call: Callable[[int], Any], held: threading.Event | None = None) -> list[Any]:
    """``call(n)`` for n in range(count), each on a thread of its own; what each returned or raised.
    With ``held``: call(0) first, the others once its commit is held (so call(0) is the lone one)."""
    def caught(n: int) -> Any:
        try:
            return call(n)
        except Exception as exc:
            return exc

    with ThreadPoolExecutor(count) as pool:
        first = pool.submit(caught, 0)
        if held is not None:
            assert held.wait(30)
        rest = pool.map(caught, range(1, count))
        return [first.result(), *rest]


def test_enqueues_that_come_during_a_commit_are_written_together_each_with_its_own_options(
        qdb: QueueDB, one_commit_in_flight: Any, monkeypatch: pytest.MonkeyPatch) -> None:
    producer = one_commit_in_flight
    at = datetime.now(UTC).replace(tzinfo=None, microsecond=0) + timedelta(hours=2)
    options: list[dict[str, Any]] = [{} for _ in range(16)]
    options[1] = {"priority": 7}
    options[2] = {"queue": "other"}
    options[3] = {"delay": 3600}
    options[4] = {"run_at": at}
    options[5] = {"max_attempts": 2, "time_limit": 9}
    options[6] = {"concurrency_key": "tenant-6"}
    hints: list[tuple[set[str], float]] = []
    notify = producer.hints.notify
    monkeypatch.setattr(producer.hints, "notify",
                        lambda queues, delay=0.0: hints.append((set(queues), delay)) or notify(queues, delay))
    sizes = groups_written(monkeypatch)
    held = hold_the_first_commit(monkeypatch, producer, until_waiting=15)

    ids = in_threads(16, lambda n: producer.enqueue("test.record", {"n": n}, **options[n]), held)

    assert [job_id for job_id in ids if not isinstance(job_id, int)] == []
    assert len(set(ids)) == 16
    assert sizes == [15]  # the first alone, at once; the fifteen that came meanwhile in one commit
    rows = {job_id: row for job_id, *row in qdb.query(
        "SELECT id, JSON_VALUE(CAST(payload AS CHAR), '$.n'), queue, status, priority, run_at, max_attempts, "
        "time_limit, concurrency_key FROM mysqlq_jobs WHERE JSON_VALUE(CAST(payload AS CHAR), '$.n') IS NOT NULL")}
    for n, job_id in enumerate(ids):
        found = rows[job_id]
        assert int(found[0]) == n  # every caller was told the id of its own job
        assert found[1] == options[n].get("queue", "default")
        assert found[2] == ("scheduled" if n in (3, 4) else "ready")
        assert found[3] == options[n].get("priority", 0)
        assert (found[5], found[6], found[7]) == (options[n].get("max_attempts", found[5]),
                                                 options[n].get("time_limit"), options[n].get("concurrency_key"))
    assert rows[ids[4]][4] == at
    later = rows[ids[3]][4] - datetime.now(UTC).replace(tzinfo=None)
    assert timedelta(minutes=55) < later <= timedelta(hours=1)
    # One wake-up for the lone job and one for the group: each of its queues once, with its shortest delay.
    assert sorted(hints, key=lambda hinted: len(hinted[0])) == [({"default"}, 0.0), ({"default", "other"}, 0.0)]


def test_a_dedupe_key_in_a_group_answers_its_own_caller_and_two_callers_of_one_key_get_one_job(
        qdb: QueueDB, one_commit_in_flight: Any, monkeypatch: pytest.MonkeyPatch) -> None:
    producer = one_commit_in_flight
    holder = producer.enqueue("test.record", {"held": True}, dedupe_key="taken")
    active = producer.enqueue("test.record", {"held": True}, dedupe_key="active-one", dedupe_scope="active")
    keys = ["fresh", None, "taken", "fresh", None, "active-one", "new-active", None]
    scopes = {"new-active": "active", "active-one": "active"}
    sizes = groups_written(monkeypatch)
    held = hold_the_first_commit(monkeypatch, producer, until_waiting=len(keys))

    ids = in_threads(len(keys) + 1, lambda n: producer.enqueue(
        "test.record", {"n": n}, **({"dedupe_key": keys[n - 1], "dedupe_scope": scopes.get(keys[n - 1], "forever")}
                                    if n else {})), held)

    assert sizes == [len(keys)]
    by_caller = dict(zip([None, *keys], ids, strict=True))
    assert ids[1] == ids[4] == by_caller["fresh"]  # one job for both callers of the new key
    assert by_caller["taken"] == holder and by_caller["active-one"] == active  # the holders' ids
    plain = [ids[n + 1] for n, key in enumerate(keys) if key is None]
    assert len({*plain, by_caller["fresh"], by_caller["new-active"], holder, active, ids[0]}) == 8
    assert qdb.scalar("SELECT COUNT(*) FROM mysqlq_jobs WHERE dedupe_key = 'fresh'") == 1
    payload = dict(qdb.query("SELECT id, CAST(payload AS CHAR) FROM mysqlq_jobs"))
    assert payload[by_caller["fresh"]] == '{"n":1}'  # the first of the two callers' job
    assert payload[by_caller["new-active"]] == '{"n":7}'
    assert payload[holder] == payload[active] == '{"held":true}'  # the holders are as they were
    for n, key in enumerate(keys):
        if key is None:
            assert payload[ids[n + 1]] == f'{{"n":{n + 1}}}'
    assert qdb.scalar("SELECT COUNT(*) FROM mysqlq_jobs") == 1 + 2 + 1 + 3 + 2  # first, holders, lone, plain, new keys


def test_a_database_error_fails_exactly_its_group_and_writes_none_of_it(
        qdb: QueueDB, one_commit_in_flight: Any, monkeypatch: pytest.MonkeyPatch) -> None:
    producer = one_commit_in_flight
    qdb.query("CREATE TRIGGER refuse_poison BEFORE INSERT ON mysqlq_jobs FOR EACH ROW "
              "IF CAST(NEW.payload AS CHAR) LIKE '%poison%' THEN "
              "SIGNAL SQLSTATE '45000' SET MESSAGE_TEXT = 'poisoned job'; END IF")
    sizes = groups_written(monkeypatch)
    held = hold_the_first_commit(monkeypatch, producer, until_waiting=5)

    outcomes = in_threads(
        6, lambda n: producer.enqueue("test.record", {"n": n, **({"poison": 1} if n == 3 else {})}), held)

    assert sizes == [5]
    lone = [outcome for outcome in outcomes if isinstance(outcome, int)]
    failed = [outcome for outcome in outcomes if not isinstance(outcome, int)]
    assert len(lone) == 1 and len(failed) == 5  # the poisoned job's whole group, and only it
    assert all(isinstance(exc, MySQLdb.OperationalError) for exc in failed)
    assert all("poisoned job" in str(exc) for exc in failed)
    payloads = [row[0] for row in qdb.query("SELECT CAST(payload AS CHAR) FROM mysqlq_jobs")]
    assert sorted(payloads) == ['{"first":true}', '{"n":0}']  # nothing of the group
    assert producer.enqueue("test.record", {"after": True}) > lone[0]  # the producer goes on


def test_async_callers_share_a_commit_and_a_bad_job_is_refused_alone(
        qdb: QueueDB, one_commit_in_flight: Any, monkeypatch: pytest.MonkeyPatch) -> None:
    producer = one_commit_in_flight
    sizes = groups_written(monkeypatch)
    held = hold_the_first_commit(monkeypatch, producer, until_waiting=13)
    lone = threading.Thread(target=producer.enqueue, args=("test.record", {"lone": True}))
    lone.start()  # its commit is in flight (held) while every call below comes
    assert held.wait(30)

    async def main() -> list[Any]:
        calls = [producer.aenqueue("test.record", {"n": n}, priority=n % 3) for n in range(11)]
        calls.insert(5, producer.aenqueue("test.record", {"bad": object()}))  # not JSON
        calls.insert(8, producer.aenqueue("test.record", {"n": "x"}, priority="high"))  # type: ignore[arg-type]
        return await asyncio.gather(*calls, return_exceptions=True)

    outcomes = asyncio.run(main())
    lone.join()

    assert isinstance(outcomes[5], InvalidJob) and "JSON" in str(outcomes[5])
    assert isinstance(outcomes[8], InvalidJob) and "priority" in str(outcomes[8])
    ids = [outcome for n, outcome in enumerate(outcomes) if n not in (5, 8)]
    assert [job_id for job_id in ids if not isinstance(job_id, int)] == []
    assert sizes == [11]  # all that came during the lone commit, together, less the two refused
    rows = dict(qdb.query("SELECT id, JSON_VALUE(CAST(payload AS CHAR), '$.n') FROM mysqlq_jobs"))
    assert [int(rows[job_id]) for job_id in ids] == list(range(11))
    assert qdb.scalar("SELECT COUNT(*) FROM mysqlq_jobs") == 1 + 1 + 11


def test_each_job_of_a_group_keeps_its_callers_trace_context(
        qdb: QueueDB, one_commit_in_flight: Any, monkeypatch: pytest.MonkeyPatch) -> None:
    producer = one_commit_in_flight
    tracer = TracerProvider().get_tracer("test.group")
    sizes = groups_written(monkeypatch)
    held = hold_the_first_commit(monkeypatch, producer, until_waiting=5)

    def in_a_span(n: int) -> tuple[int, str]:
        with tracer.start_as_current_span(f"request {n}") as span:
            context = span.get_span_context()
            parent = f"00-{context.trace_id:032x}-{context.span_id:016x}-{context.trace_flags:02x}"
            return producer.enqueue("test.record", {"n": n}), parent

    async def from_async() -> list[tuple[int, str]]:
        async def one(n: int) -> tuple[int, str]:
            with tracer.start_as_current_span(f"task {n}") as span:
                context = span.get_span_context()
                return (await producer.aenqueue("test.record", {"n": n}),
                        f"00-{context.trace_id:032x}-{context.span_id:016x}-{context.trace_flags:02x}")
        return await asyncio.gather(*(one(n) for n in range(6, 10)))

    found = in_threads(6, in_a_span, held)
    assert sizes == [5]
    found += asyncio.run(from_async())
    stored = dict(qdb.query("SELECT id, trace_context FROM mysqlq_jobs"))
    assert all(stored[job_id] == parent for job_id, parent in found)
    assert len({parent for _, parent in found}) == 10


def test_many_threads_and_tasks_on_one_producer_each_get_their_own_job(qdb: QueueDB) -> None:
    """Default settings, no hold: sixteen threads and a thousand tasks at once, some with dedupe keys."""
    with qdb.producer() as producer:
        per_thread = 40

        def work(thread: int) -> list[tuple[int, str | None]]:
            told = []
            for n in range(per_thread):
                key = f"shared-{n % 5}" if thread % 4 == 0 else None
                told.append((producer.enqueue("test.record", {"thread": thread, "n": n}, dedupe_key=key), key))
            return told

        async def tasks() -> list[int]:
            return await asyncio.gather(*(producer.aenqueue("test.record", {"task": n}) for n in range(1000)))

        async_ids: list[int] = []
        runner = threading.Thread(target=lambda: async_ids.extend(asyncio.run(tasks())))
        runner.start()
        told = in_threads(16, work)
        runner.join()
    rows = {job_id: (payload, key) for job_id, payload, key in qdb.query(
        "SELECT id, CAST(payload AS CHAR), dedupe_key FROM mysqlq_jobs")}
    holders = {}
    for thread, answers in enumerate(told):
        for n, (job_id, key) in enumerate(answers):
            if key is None:
                assert rows[job_id] == (f'{{"thread":{thread},"n":{n}}}', None)
            else:
                assert rows[job_id][1] == key
                assert holders.setdefault(key, job_id) == job_id  # one job per key, whoever enqueued it
    assert [rows[job_id][0] for job_id in async_ids] == [f'{{"task":{n}}}' for n in range(1000)]
    assert len(rows) == 12 * per_thread + 5 + 1000
