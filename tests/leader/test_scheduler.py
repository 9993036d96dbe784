"""The scheduler: each tick enqueued once however many workers run it, one catch-up job after downtime,
a first start that runs nothing from before, and file changes that take effect on restart."""

from __future__ import annotations

import itertools
import json
import signal
import threading
import time
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import structlog
from mysqlq_harness.jobs import EVERY_JOB

from mysqlq.leader.schedule_file import Entry, parse
from mysqlq.leader.scheduler import IDLE, Scheduler
from mysqlq.store import schedules as store
from mysqlq.store.db import CLI_RETRY, Database

from ..conftest import QueueDB

EVERY_MINUTE = Entry("minutely", "test.record", every=60, payload={"from": "schedule"})


def utc(*fields: int) -> datetime:
    return datetime(*fields, tzinfo=UTC)  # type: ignore[misc]


def scheduler(qdb: QueueDB, *entries: Entry) -> Scheduler:
    settings = qdb.settings()
    return Scheduler(settings, Database(settings.dsn, retry=CLI_RETRY), structlog.get_logger("test"), list(entries))


def ticks(qdb: QueueDB, name: str) -> list[datetime]:
    """The tick of every job an entry enqueued, read back from its dedupe key, in order."""
    prefix = f"mysqlq:schedule:{name}:"
    keys = [row[0] for row in qdb.query(f"SELECT dedupe_key FROM {EVERY_JOB} WHERE dedupe_key LIKE %s ORDER BY id",
                                        (prefix + "%",))]
    return [datetime.strptime(key[len(prefix):], "%Y-%m-%dT%H:%M:%SZ").replace(tzinfo=UTC) for key in keys]


def state(qdb: QueueDB, name: str) -> tuple[Any, ...]:
    rows = qdb.query("SELECT timing, last_tick, next_tick FROM mysqlq_schedules WHERE name = %s", (name,))
    return rows[0] if rows else ()


def test_a_first_start_runs_nothing_from_before_and_waits_for_the_next_tick(qdb: QueueDB) -> None:
    wait = scheduler(qdb, EVERY_MINUTE).turn(utc(2026, 11, 23, 10, 0, 30))
    assert qdb.statuses() == {}
    assert state(qdb, "minutely") == ("every 1m", None, datetime(2026, 11, 23, 10, 1))
    assert 30 <= wait < 30.1


def test_a_due_tick_is_enqueued_once_with_the_entry_fields(qdb: QueueDB) -> None:
    entry = Entry("report", "test.record", every=60, payload={"kind": "daily"}, queue="reports", priority=3,
                  max_attempts=2, time_limit=30, concurrency_key="reports")
    first = scheduler(qdb, entry)
    first.turn(utc(2026, 11, 23, 10, 0, 30))
    first.turn(utc(2026, 11, 23, 10, 1, 0, 5000))
    first.turn(utc(2026, 11, 23, 10, 1, 20))
    scheduler(qdb, entry).turn(utc(2026, 11, 23, 10, 1, 30))  # another worker, leading meanwhile
    assert ticks(qdb, "report") == [utc(2026, 11, 23, 10, 1)]
    assert qdb.query("SELECT handler, payload, queue, priority, max_attempts, time_limit, concurrency_key, status "
                     "FROM mysqlq_jobs") == [
        ("test.record", b'{"kind":"daily"}', "reports", 3, 2, 30, "reports", "ready")]
    job_id = qdb.scalar("SELECT id FROM mysqlq_jobs")
    assert qdb.query("SELECT last_tick, next_tick, last_job_id FROM mysqlq_schedules") == [
        (datetime(2026, 11, 23, 10, 1), datetime(2026, 11, 23, 10, 2), job_id)]


def test_a_tick_whose_key_is_taken_is_recorded_not_enqueued_again(qdb: QueueDB) -> None:
    sched = scheduler(qdb, EVERY_MINUTE)
    sched.turn(utc(2026, 11, 23, 10, 0, 30))
    with qdb.producer() as producer:  # as if another leader had enqueued 10:01 meanwhile
        taken = producer.enqueue("test.record", dedupe_key="mysqlq:schedule:minutely:2026-11-23T10:01:00Z")
    sched.turn(utc(2026, 11, 23, 10, 1, 1))
    assert qdb.query("SELECT id FROM mysqlq_jobs") == [(taken,)]
    assert qdb.query("SELECT last_tick, next_tick, last_job_id FROM mysqlq_schedules") == [
        (datetime(2026, 11, 23, 10, 1), datetime(2026, 11, 23, 10, 2), taken)]


def test_downtime_spanning_three_ticks_yields_one_catch_up_job(qdb: QueueDB) -> None:
    sched = scheduler(qdb, EVERY_MINUTE)
    sched.turn(utc(2026, 11, 23, 10, 0, 30))
    sched.turn(utc(2026, 11, 23, 10, 1, 0, 10))
    # Down from 10:01:10 to 10:04:20: the ticks of 10:02, 10:03 and 10:04 were missed.
    wait = scheduler(qdb, EVERY_MINUTE).turn(utc(2026, 11, 23, 10, 4, 20))
    assert ticks(qdb, "minutely") == [utc(2026, 11, 23, 10, 1), utc(2026, 11, 23, 10, 4)]
    assert state(qdb, "minutely")[1:] == (datetime(2026, 11, 23, 10, 4), datetime(2026, 11, 23, 10, 5))
    assert 40 <= wait < 40.1


def test_a_cron_entry_catches_up_once_across_a_dst_change(qdb: QueueDB) -> None:
    [nightly] = parse('[nightly]\ncron = "30 2 * * *"\ntimezone = "Europe/Berlin"\nhandler = "test.record"')
    sched = scheduler(qdb, nightly)
    sched.turn(utc(2026, 10, 23, 12))  # known from Friday noon
    # Down from Friday until Tuesday noon, over the night the clocks went back: one job, for Tuesday 02:30 CET.
    sched.turn(utc(2026, 10, 27, 11))
    assert ticks(qdb, "nightly") == [utc(2026, 10, 27, 1, 30)]
    sched.turn(utc(2026, 10, 27, 11, 5))
    assert state(qdb, "nightly")[1:] == (datetime(2026, 10, 27, 1, 30), datetime(2026, 10, 28, 1, 30))


def test_a_changed_timing_starts_afresh_and_removed_entries_are_forgotten(qdb: QueueDB) -> None:
    hourly = Entry("sometimes", "test.record", every=3600)
    scheduler(qdb, EVERY_MINUTE, hourly).turn(utc(2026, 11, 23, 10, 0, 30))
    assert state(qdb, "sometimes")[2] == datetime(2026, 11, 23, 11)
    # The file changes (the minutely entry goes, the other one becomes a cron) and the workers restart.
    [changed] = parse('[sometimes]\ncron = "45 10 * * *"\nhandler = "test.record"')
    wait = scheduler(qdb, changed).turn(utc(2026, 11, 23, 10, 1, 30))
    assert qdb.query("SELECT name, timing, next_tick FROM mysqlq_schedules") == [
        ("sometimes", "cron 45 10 * * * UTC", datetime(2026, 11, 23, 10, 45))]
    assert qdb.statuses() == {}  # the changed entry's old tick at 11:00 never runs, nor a tick from before
    assert wait == IDLE  # 44 minutes away: the scheduler looks again within a minute anyway


def test_schedulers_racing_each_other_enqueue_every_tick_once(qdb: QueueDB) -> None:
    """Exactly once does not rest on a single leader: three schedulers turn as fast as they can."""
    every_second = Entry("racy", "test.record", every=1)
    stop = threading.Event()
    errors: list[BaseException] = []

    def race() -> None:
        sched = scheduler(qdb, every_second)
        try:
            while not stop.is_set():
                sched.run()
                time.sleep(0.01)
        except BaseException as exc:
            errors.append(exc)

    threads = [threading.Thread(target=race) for _ in range(3)]
    for thread in threads:
        thread.start()
    qdb.wait_for(lambda: len(ticks(qdb, "racy")) >= 5, timeout=60, what="five ticks")
    stop.set()
    for thread in threads:
        thread.join(timeout=30)
    assert not errors
    found = ticks(qdb, "racy")
    assert len(set(found)) == len(found)
    assert all(later - earlier == timedelta(seconds=1) for earlier, later in itertools.pairwise(found))


def test_an_entry_whose_ticks_hold_their_key_for_a_period(qdb: QueueDB) -> None:
    """Each tick's key is held for the entry's period, apart from its job: done, the job leaves the
    live table at once, and another leader that enqueues the same tick still finds the key taken."""
    [hourly_key] = parse('[digest]\nevery = "1m"\nhandler = "test.record"\ndedupe_scope = "1h"')
    assert hourly_key.dedupe_scope == "1h"
    sched = scheduler(qdb, hourly_key)
    sched.turn(utc(2026, 11, 23, 10, 0, 30))
    sched.turn(utc(2026, 11, 23, 10, 1, 0, 5000))
    key = "mysqlq:schedule:digest:2026-11-23T10:01:00Z"
    job_id = qdb.scalar("SELECT id FROM mysqlq_jobs")
    assert qdb.query("SELECT dedupe_key, job_id FROM mysqlq_dedupe_periods") == [(key, job_id)]
    assert qdb.scalar("SELECT dedupe_key FROM mysqlq_jobs") is None
    assert qdb.worker("--burst").wait(timeout=60) == 0, qdb.logs()
    assert qdb.query("SELECT id, status FROM mysqlq_jobs_history") == [(job_id, "done")]
    qdb.query("UPDATE mysqlq_schedules SET next_tick = last_tick")  # a leader that has not seen the tick's advance
    scheduler(qdb, hourly_key).turn(utc(2026, 11, 23, 10, 1, 10))
    assert qdb.scalar(f"SELECT COUNT(*) FROM {EVERY_JOB}") == 1
    assert qdb.query("SELECT last_job_id FROM mysqlq_schedules") == [(job_id,)]


def write_schedule(qdb: QueueDB, text: str) -> Path:
    path = qdb.tmp / "schedule.toml"
    path.write_text(text)
    return path


def test_workers_enqueue_an_every_second_entry_once_per_tick(qdb: QueueDB) -> None:
    path = write_schedule(qdb, '[pulse]\nevery = "1s"\nhandler = "test.record"\npayload = {tag = "pulse"}\n')
    for number in range(3):
        qdb.worker("--schedule", str(path), "--name", f"w{number}")
    qdb.wait_for(lambda: len(ticks(qdb, "pulse")) >= 10, timeout=90, what="ten ticks")
    qdb.stop_workers()
    found = ticks(qdb, "pulse")
    assert len(set(found)) == len(found), found  # no tick twice
    gaps = [later - earlier for earlier, later in itertools.pairwise(found)]
    assert all(timedelta(seconds=1) <= gap <= timedelta(seconds=2) for gap in gaps), gaps  # no gap beyond one tick
    # About one job a second, not one per worker: the span of the ticks accounts for every job.
    assert len(found) <= (found[-1] - found[0]).total_seconds() + 1
    assert qdb.scalar(f"SELECT COUNT(*) FROM {EVERY_JOB} WHERE status = 'done'") >= 1
    assert "schedule.enqueued" in qdb.logs()


def test_a_worker_down_for_three_ticks_enqueues_one_catch_up_job(qdb: QueueDB) -> None:
    path = write_schedule(qdb, '[pulse]\nevery = "1s"\nhandler = "test.record"\n')
    worker = qdb.worker("--schedule", str(path))
    qdb.wait_for(lambda: len(ticks(qdb, "pulse")) >= 2, timeout=60, what="two ticks")
    worker.send_signal(signal.SIGTERM)
    assert worker.wait(timeout=30) == 0
    before = ticks(qdb, "pulse")
    time.sleep(4.5)  # at least three ticks pass with no worker
    qdb.worker("--schedule", str(path))
    qdb.wait_for(lambda: len(ticks(qdb, "pulse")) > len(before) + 1, timeout=60, what="ticks after the restart")
    qdb.stop_workers()
    found = ticks(qdb, "pulse")
    assert found[:len(before)] == before
    catch_up, after = found[len(before)], found[len(before):]
    assert catch_up - before[-1] >= timedelta(seconds=4)  # the missed ticks collapsed into this one job
    assert all(timedelta(seconds=1) <= later - earlier <= timedelta(seconds=2)
               for earlier, later in itertools.pairwise(after))
    assert len(set(found)) == len(found)


def test_schedule_list_shows_each_entry_with_its_last_and_next_run(qdb: QueueDB) -> None:
    text = ('[minutely]\nevery = "1m"\nhandler = "test.record"\n\n'
            '[nightly]\ncron = "0 3 * * *"\ntimezone = "Europe/Berlin"\nhandler = "test.record"\nqueue = "reports"\n')
    path = write_schedule(qdb, text)
    minutely, nightly = parse(text)
    db = Database(qdb.settings().dsn)
    now = db.run(store.now)
    db.close()
    sched = scheduler(qdb, minutely)
    sched.turn(now - timedelta(minutes=2))
    sched.turn(now)  # one tick of the minutely entry is enqueued, the nightly one is not started yet
    result = qdb.cli("schedule", "list", "--json", "--schedule", str(path), check=True)
    rows = {row["name"]: row for row in json.loads(result.stdout)}
    tick = minutely.latest_at(now)
    assert rows["minutely"] | {"last_enqueued_at": None} == {
        "name": "minutely", "timing": "every 1m", "cron": None, "every": 60, "timezone": "UTC",
        "handler": "test.record", "payload": None, "queue": "default", "priority": 0, "max_attempts": None,
        "time_limit": None, "state": "active", "last_tick": tick.isoformat().replace("+00:00", "Z"),
        "last_enqueued_at": None, "last_job_id": qdb.scalar("SELECT MAX(id) FROM mysqlq_jobs"),
        "next_tick": (tick + timedelta(minutes=1)).isoformat().replace("+00:00", "Z")}
    assert rows["minutely"]["last_enqueued_at"] is not None
    nightly_row = rows["nightly"]
    assert (nightly_row["state"], nightly_row["last_tick"], nightly_row["queue"]) == ("new", None, "reports")
    next_nightly = datetime.fromisoformat(nightly_row["next_tick"]).astimezone(nightly.zone)
    assert (next_nightly.hour, next_nightly.minute) == (3, 0)
    text_output = qdb.cli("schedule", "list", env=qdb.env(MYSQLQ_SCHEDULE=str(path)), check=True).stdout
    assert text_output.splitlines()[0].startswith("minutely  every 1m  handler=test.record queue=default  last=")
    assert "(not started: no worker has led with this entry yet)" in text_output.splitlines()[1]


BAD_FILE = '[ok]\nevery = "1m"\nhandler = "test.record"\n\n[nightly]\ncron = "0 25 * * *"\nhandler = "test.record"\n'
REFUSAL = "entry 'nightly', field 'cron': '0 25 * * *' is not a cron expression: bad hour"


def test_a_bad_file_is_refused_by_the_worker_check_and_list_in_one_line(qdb: QueueDB) -> None:
    path = write_schedule(qdb, BAD_FILE)
    for args in (["worker", "--schedule", str(path), "--burst"], ["check", "--schedule", str(path)],
                 ["schedule", "list", "--schedule", str(path)]):
        result = qdb.cli(*args)
        assert result.returncode == 1, (args, result)
        assert result.stderr.splitlines() == [f"mysqlq: error: schedule {path}: {REFUSAL}"], args
    assert qdb.scalar("SELECT COUNT(*) FROM mysqlq_workers") == 0
    assert qdb.scalar("SELECT COUNT(*) FROM mysqlq_schedules") == 0


def test_check_names_an_entry_whose_handler_is_not_installed(qdb: QueueDB) -> None:
    path = write_schedule(qdb, '[ok]\nevery = "1m"\nhandler = "test.record"\n')
    # (The test handlers include one whose import fails on purpose: check goes on to report it.)
    assert f"schedule: ok (1 entries in {path})" in qdb.cli("check", "--schedule", str(path)).stdout.splitlines()
    path.write_text('[ok]\nevery = "1m"\nhandler = "test.record"\n\n[typo]\nevery = "1h"\nhandler = "test.recrod"\n')
    result = qdb.cli("check", env=qdb.env(MYSQLQ_SCHEDULE=str(path)))
    assert result.returncode == 1
    assert result.stderr.splitlines() == [f"mysqlq: error: schedule {path}: entry 'typo' names handler "
                                          "'test.recrod', which no installed entry point provides"]
