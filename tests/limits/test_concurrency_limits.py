"""Concurrency limits: jobs that carry a concurrency key run at most the handler's limit at once, across
worker processes; the rest wait blocked, without a slot, and start as slots free; a slot held by a
killed worker frees when the reaper returns its job; jobs without a key are not touched."""

from __future__ import annotations

import json
import os
import signal
import threading
import time

import pytest
from mysqlq_harness.jobs import EVERY_JOB

import mysqlq
from mysqlq import InvalidJob, Job
from mysqlq.core.errors import ConfigError

from ..conftest import QueueDB
from ..worker.test_concurrency import widest_overlap

FAST = ("--heartbeat-interval", "0.5", "--lease", "3", "--concurrency", "3")


def limited_spans(qdb: QueueDB, ids: set[int] | None = None) -> list[tuple[float, float, str]]:
    """(start, end, job id) of each finished run of the test.limited* handlers (of ``ids`` if given)."""
    return [(float(r[2]), float(r[3]), r[0]) for r in qdb.records()
            if r[1] == "lspan" and (ids is None or int(r[0]) in ids)]


def started(qdb: QueueDB) -> list[list[str]]:
    """``job_id lstart pid attempt`` lines: runs that began, finished or not."""
    return [r for r in qdb.records() if r[1] == "lstart"]


def workers(qdb: QueueDB, count: int, *args: str) -> None:
    for n in range(count):
        qdb.worker("--name", f"w{n}", *FAST, *args)
    qdb.wait_for(lambda: qdb.scalar("SELECT COUNT(*) FROM mysqlq_workers") == count, what=f"{count} workers")


def semaphore_rows(qdb: QueueDB) -> tuple[int, int, int]:
    return (qdb.scalar("SELECT COUNT(*) FROM mysqlq_semaphores"),
            qdb.scalar("SELECT COUNT(*) FROM mysqlq_semaphore_holders"),
            qdb.scalar("SELECT COUNT(*) FROM mysqlq_blocked_jobs"))


def test_ten_jobs_of_one_key_with_limit_one_on_three_workers_never_overlap(qdb: QueueDB) -> None:
    # Each worker serves a queue of its own and the jobs are spread over the three queues, so every
    # process surely takes part (one worker serving them all could win every claim) and the key's
    # limit is held across processes, not only within one.
    for n in range(3):
        qdb.worker("--name", f"w{n}", "--queue", f"q{n}", *FAST)
    qdb.wait_for(lambda: qdb.scalar("SELECT COUNT(*) FROM mysqlq_workers") == 3, what="3 workers")
    with qdb.producer() as producer:
        ids = {producer.enqueue("test.limited", {"seconds": 0.2}, queue=f"q{i % 3}", concurrency_key="account-7")
               for i in range(10)}
    qdb.wait_done(10, timeout=90)
    spans = limited_spans(qdb)
    assert sorted(int(job_id) for _, _, job_id in spans) == sorted(ids)  # each ran once
    assert widest_overlap(spans) == 1
    assert len({r[2] for r in started(qdb)}) == 3  # every process ran jobs of the key
    assert "job.blocked" in qdb.logs()  # claimed while the slot was taken: set aside, not run
    # Blocked jobs got their claimed attempt back: each job ran on its first attempt.
    assert {r[3] for r in started(qdb)} == {"1"}
    assert qdb.query(f"SELECT DISTINCT attempts FROM {EVERY_JOB}") == [(1,)]
    # Nothing is kept for a key no job uses (a slot goes back just after its job's outcome is written).
    qdb.wait_for(lambda: semaphore_rows(qdb) == (0, 0, 0), what="every slot given back")


def test_limit_two_reaches_two_and_never_more(qdb: QueueDB) -> None:
    workers(qdb, 3)
    with qdb.producer() as producer:
        producer.enqueue_many([Job("test.limited2", {"seconds": 0.4}, concurrency_key="export") for _ in range(10)])
    qdb.wait_done(10, timeout=90)
    spans = limited_spans(qdb)
    assert len(spans) == 10
    assert widest_overlap(spans) == 2


def test_keys_are_independent_and_jobs_without_a_key_are_not_limited(qdb: QueueDB) -> None:
    workers(qdb, 2)
    with qdb.producer() as producer:
        a = {producer.enqueue("test.limited", {"seconds": 0.3}, concurrency_key="a") for _ in range(4)}
        b = {producer.enqueue("test.limited", {"seconds": 0.3}, concurrency_key="b") for _ in range(4)}
        free = {producer.enqueue("test.unlimited", {"seconds": 0.3}) for _ in range(6)}
    qdb.wait_done(14, timeout=90)
    assert widest_overlap(limited_spans(qdb, a)) == 1
    assert widest_overlap(limited_spans(qdb, b)) == 1
    assert widest_overlap(limited_spans(qdb, a | b)) == 2  # two keys: two at once
    assert widest_overlap(limited_spans(qdb, free)) >= 3  # no key: as many as there are slots
    rows = qdb.query(f"SELECT concurrency_key, COUNT(*) FROM {EVERY_JOB} GROUP BY concurrency_key ORDER BY 1")
    assert rows == [(None, 6), ("a", 4), ("b", 4)]


def test_a_handler_without_a_declared_limit_runs_one_job_per_key(qdb: QueueDB) -> None:
    workers(qdb, 2)
    with qdb.producer() as producer:
        producer.enqueue_many([Job("test.unlimited", {"seconds": 0.2}, concurrency_key="k") for _ in range(6)])
    qdb.wait_done(6, timeout=90)
    assert widest_overlap(limited_spans(qdb)) == 1


def test_keyless_jobs_never_touch_the_limit_tables(qdb: QueueDB) -> None:
    with qdb.producer() as producer:
        producer.enqueue_many([Job("test.record") for _ in range(300)])
    proc = qdb.worker("--burst")
    assert proc.wait(timeout=60) == 0, qdb.logs()
    assert qdb.statuses() == {"done": 300}
    # A slot is given back just after its job's outcome is written: wait for the last one.
    qdb.wait_for(lambda: semaphore_rows(qdb) == (0, 0, 0), what="every slot given back")
    assert qdb.scalar("SELECT version FROM mysqlq_semaphores") is None
    assert "job.blocked" not in qdb.logs() and "limits.settled" not in qdb.logs()


@pytest.mark.parametrize("max_attempts", [5, 1])
def test_a_killed_worker_holding_the_slot_frees_it_when_reaped(qdb: QueueDB, max_attempts: int) -> None:
    """max_attempts 5: the job goes back to ready keeping its slot, runs again, then the rest run;
    max_attempts 1: it ends dead, and its slot is given back to the next job."""
    workers(qdb, 3)
    with qdb.producer() as producer:
        holder = producer.enqueue("test.limited", {"first_seconds": 120, "seconds": 0.1}, concurrency_key="k",
                                  max_attempts=max_attempts)
        qdb.wait_for(lambda: started(qdb), what="the first job to start")
        rest = {producer.enqueue("test.limited", {"seconds": 0.1}, concurrency_key="k") for _ in range(5)}
    qdb.wait_for(lambda: qdb.statuses().get("blocked") == 5, what="the others to wait for the slot")
    assert not limited_spans(qdb)
    os.kill(int(started(qdb)[0][2]), signal.SIGKILL)  # the worker running the holder
    qdb.wait_for(lambda: all(qdb.scalar(f"SELECT status FROM {EVERY_JOB} WHERE id = %s", (i,)) == "done"
                             for i in rest), timeout=60, what="every other job of the key to finish")
    status, attempts = qdb.query(f"SELECT status, attempts FROM {EVERY_JOB} WHERE id = %s", (holder,))[0]
    if max_attempts == 5:
        assert (status, attempts) == ("done", 2)
    else:
        assert status == "dead"
    assert widest_overlap(limited_spans(qdb)) == 1
    # A slot is given back just after its job's outcome is written: wait for the last one.
    qdb.wait_for(lambda: semaphore_rows(qdb) == (0, 0, 0), what="every slot given back")


def test_a_transactional_handler_with_a_limit_commits_and_hands_on_its_slot(qdb: QueueDB) -> None:
    qdb.query("CREATE TABLE test_effects (job_id BIGINT NOT NULL, attempt INT NOT NULL, KEY (job_id))")
    workers(qdb, 2)
    with qdb.producer() as producer:
        failing = producer.enqueue("test.limited_effect", {"seconds": 0.1, "fail": True}, concurrency_key="t",
                                   max_attempts=2)
        ok = {producer.enqueue("test.limited_effect", {"seconds": 0.2}, concurrency_key="t") for _ in range(6)}
    qdb.wait_for(lambda: qdb.statuses() == {"done": 6, "dead": 1}, timeout=60, what="six done, one dead")
    assert widest_overlap(limited_spans(qdb)) == 1
    # The failing job's effects rolled back with it; each other job's effect committed once.
    assert sorted(row[0] for row in qdb.query("SELECT job_id FROM test_effects")) == sorted(ok)
    assert qdb.scalar(f"SELECT attempts FROM {EVERY_JOB} WHERE id = %s", (failing,)) == 2  # retried once
    # A slot is given back just after its job's outcome is written: wait for the last one.
    qdb.wait_for(lambda: semaphore_rows(qdb) == (0, 0, 0), what="every slot given back")


def test_stats_show_blocked_jobs_and_a_blocked_job_can_be_cancelled(qdb: QueueDB) -> None:
    qdb.worker("--name", "only", "--queue", "q", *FAST)
    with qdb.producer() as producer:
        producer.enqueue("test.limited", {"seconds": 3}, concurrency_key="k", queue="q")
        qdb.wait_for(lambda: started(qdb), what="the first job to start")
        waiting = [producer.enqueue("test.limited", {"seconds": 0.1}, concurrency_key="k", queue="q")
                   for _ in range(3)]
    qdb.wait_for(lambda: qdb.statuses().get("blocked") == 3, what="three blocked jobs")
    stats = json.loads(qdb.cli("stats", "--json", check=True).stdout)
    assert [(s["queue"], s["counts"]["blocked"], s["counts"]["running"]) for s in stats] == [("q", 3, 1)]
    table = qdb.cli("stats", check=True).stdout.splitlines()
    header, row = table[0].split(), table[1].split()
    assert row[header.index("blocked")] == "3"
    assert qdb.cli("cancel", str(waiting[0]), check=True).stdout.strip() == "cancelled 1 job"
    assert qdb.scalar("SELECT COUNT(*) FROM mysqlq_blocked_jobs") == 2
    qdb.wait_done(3, timeout=60)
    assert qdb.scalar("SELECT status FROM mysqlq_jobs WHERE id = %s", (waiting[0],)) == "cancelled"
    assert waiting[0] not in {int(job_id) for _, _, job_id in limited_spans(qdb)}
    # A slot is given back just after its job's outcome is written: wait for the last one.
    qdb.wait_for(lambda: semaphore_rows(qdb) == (0, 0, 0), what="every slot given back")


def test_cancelling_the_job_that_holds_the_slot_frees_it(qdb: QueueDB) -> None:
    with qdb.producer() as producer:
        ids = [producer.enqueue("test.limited", {"seconds": 0.1}, concurrency_key="k") for _ in range(3)]
    # Give the first job the slot as a claim would, then take the job back to ready (a release).
    qdb.query("INSERT INTO mysqlq_semaphores (concurrency_key) VALUES ('k')")
    qdb.query("INSERT INTO mysqlq_semaphore_holders (concurrency_key, job_id) VALUES ('k', %s)", (ids[0],))
    qdb.query("UPDATE mysqlq_jobs SET status = 'blocked' WHERE id IN (%s, %s)", (ids[1], ids[2]))
    qdb.query("INSERT INTO mysqlq_blocked_jobs VALUES ('k', %s, 1), ('k', %s, 1)", (ids[1], ids[2]))
    assert qdb.cli("cancel", str(ids[0]), check=True).stdout.strip() == "cancelled 1 job"
    assert qdb.query("SELECT id, status FROM mysqlq_jobs ORDER BY id") == [
        (ids[0], "cancelled"), (ids[1], "ready"), (ids[2], "blocked")]
    assert qdb.query("SELECT job_id FROM mysqlq_semaphore_holders") == [(ids[1],)]


def test_the_key_comes_from_the_cli_and_from_jsonl_lines(qdb: QueueDB) -> None:
    job_id = int(qdb.cli("enqueue", "test.limited", "{}", "--concurrency-key", "cli-key", check=True).stdout)
    path = qdb.tmp / "jobs.jsonl"
    path.write_text('{"handler": "test.limited", "concurrency_key": "line-key"}\n{"handler": "test.limited"}\n')
    qdb.cli("enqueue", "--file", str(path), "--concurrency-key", "default-key", check=True)
    rows = qdb.query("SELECT id, concurrency_key FROM mysqlq_jobs ORDER BY id")
    assert rows[0] == (job_id, "cli-key")
    assert [key for _, key in rows[1:]] == ["line-key", "default-key"]


def test_bad_keys_and_limits_are_refused_in_one_line_writing_nothing(qdb: QueueDB) -> None:
    result = qdb.cli("enqueue", "test.limited", "--concurrency-key", "k" * 192)
    assert result.returncode != 0 and "Traceback" not in result.stderr
    assert result.stderr.strip().splitlines() == [
        "mysqlq: error: concurrency key must be a string of 1 to 191 characters"]
    path = qdb.tmp / "jobs.jsonl"
    path.write_text('{"handler": "test.limited"}\n{"handler": "test.limited", "concurrency_key": 7}\n')
    result = qdb.cli("enqueue", "--file", str(path))
    assert result.returncode != 0 and len(result.stderr.strip().splitlines()) == 1
    assert "line 2: concurrency key must be a string" in result.stderr
    with qdb.producer() as producer:
        with pytest.raises(InvalidJob, match="concurrency key must be"):
            producer.enqueue_many([Job("test.limited"), Job("test.limited", concurrency_key="")])
        with pytest.raises(InvalidJob, match="concurrency key must be"):
            producer.enqueue("test.limited", concurrency_key="x" * 200)
    assert qdb.statuses() == {}
    for bad in (0, -1, 10_001, 1.5, True, "2"):
        with pytest.raises(ConfigError) as refused:
            mysqlq.handler(concurrency_limit=bad)  # type: ignore[arg-type]
        assert str(refused.value) == f"concurrency_limit must be an integer from 1 to 10000, got {bad!r}"


def test_the_leaders_sweep_settles_slots_of_jobs_that_moved_on_silently(qdb: QueueDB) -> None:
    from mysqlq import Dsn, Settings
    from mysqlq.leader.limits_sweep import LimitsSweep
    from mysqlq.store.db import Database

    with qdb.producer() as producer:
        ids = [producer.enqueue("test.limited", concurrency_key="k", queue="q") for _ in range(3)]
    # The first job ended done, but its worker died before giving its slot back; two jobs wait.
    qdb.query("UPDATE mysqlq_jobs SET status = 'done' WHERE id = %s", (ids[0],))
    qdb.query("UPDATE mysqlq_jobs SET status = 'blocked' WHERE id IN (%s, %s)", (ids[1], ids[2]))
    qdb.query("INSERT INTO mysqlq_semaphores (concurrency_key) VALUES ('k')")
    qdb.query("INSERT INTO mysqlq_semaphore_holders VALUES ('k', %s)", (ids[0],))
    qdb.query("INSERT INTO mysqlq_blocked_jobs VALUES ('k', %s, 1), ('k', %s, 1)", (ids[1], ids[2]))
    db = Database(Dsn.parse(qdb.dsn))

    class Log:
        def info(self, event: str, **fields: object) -> None:
            pass

    sweep = LimitsSweep(Settings(dsn=Dsn.parse(qdb.dsn)), db, Log()).sweep
    try:
        assert sweep(starved=False) == {"q"}
        assert qdb.query("SELECT id, status FROM mysqlq_jobs ORDER BY id") == [
            (ids[0], "done"), (ids[1], "ready"), (ids[2], "blocked")]
        assert qdb.query("SELECT job_id FROM mysqlq_semaphore_holders") == [(ids[1],)]
        assert sweep(starved=True) == set()  # the slot is rightly held: nothing to do
        # A slot lost without its holder moving on (a row deleted by hand): the slower check finds
        # the waiting job that could run.
        qdb.query("DELETE FROM mysqlq_semaphore_holders")
        assert sweep(starved=False) == set()
        assert sweep(starved=True) == {"q"}
        assert qdb.scalar("SELECT status FROM mysqlq_jobs WHERE id = %s", (ids[2],)) == "ready"
        assert qdb.query("SELECT job_id FROM mysqlq_blocked_jobs") == []
    finally:
        db.close()


def test_the_leaders_sweep_looks_rarely_while_no_slot_is_held_and_at_once_when_a_worker_dies(qdb: QueueDB) -> None:
    """Concurrency limits unused (or every slot given back): the sweep's one statement runs once a
    minute, not every reap interval; a slot held makes it look every reap interval again; and the
    reaper finding a dead worker (who may have left a slot held) calls for a look at once."""
    from mysqlq import Dsn, Settings
    from mysqlq.leader.elector import Elector
    from mysqlq.leader.limits_sweep import IDLE_EVERY, LimitsSweep
    from mysqlq.leader.maintainer import Maintainer
    from mysqlq.store import workers as worker_store
    from mysqlq.store.db import Database

    class Log:
        def __getattr__(self, level: str) -> object:
            return lambda event, **fields: None

    settings = Settings(dsn=Dsn.parse(qdb.dsn), hint_dir=str(qdb.tmp / "hints"))
    db = Database(settings.dsn)
    try:
        sweep = LimitsSweep(settings, db, Log())
        assert sweep.run() == IDLE_EVERY  # nothing held, nobody waits
        with qdb.producer() as producer:
            job = producer.enqueue("test.limited", concurrency_key="k")
        qdb.query("INSERT INTO mysqlq_semaphores (concurrency_key) VALUES ('k')")
        qdb.query("INSERT INTO mysqlq_semaphore_holders VALUES ('k', %s)", (job,))
        assert sweep.run() == settings.reap_interval  # a slot is held (rightly: the job is ready)
        qdb.query("DELETE FROM mysqlq_semaphore_holders")
        qdb.query("DELETE FROM mysqlq_semaphores")

        maintainer = Maintainer(settings, db, Log(), Elector(settings, db, Log(), lambda: 1, threading.Event()))
        limits = maintainer.chores.index(maintainer.limits)
        maintainer.due = [time.monotonic() + IDLE_EVERY] * len(maintainer.chores)
        reaper = maintainer.chores[0]
        dead = db.run(lambda cur: worker_store.register(cur, "gone", "host", 1, ["default"], 1.0, 3.0))
        qdb.query("UPDATE mysqlq_workers SET heartbeat_at = NOW(6) - INTERVAL 1 HOUR WHERE id = %s", (dead,))
        reaper.run()
        assert maintainer.due[limits] == 0.0  # the sweep runs in the same round
        assert qdb.scalar("SELECT COUNT(*) FROM mysqlq_workers") == 0
    finally:
        db.close()
