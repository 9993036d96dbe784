"""Pausing one schedule entry: its ticks pass without a job while paused, and once resumed it goes on
from its next tick; from the CLI (`mysqlq schedule pause/resume`) and the dashboard's schedules page."""

from __future__ import annotations

import json

from mysqlq.leader.schedule_file import parse

from ..conftest import QueueDB
from ..ops_fixtures import assert_one_line_error
from ..web.test_web_pages import client, csrf_of
from .test_scheduler import EVERY_MINUTE, scheduler, state, ticks, utc, write_schedule


def test_a_paused_entry_enqueues_nothing_and_resumes_from_its_next_tick(qdb: QueueDB) -> None:
    sched = scheduler(qdb, EVERY_MINUTE)
    sched.turn(utc(2026, 11, 24, 10, 0, 30))  # started: next tick 10:01
    assert qdb.cli("schedule", "pause", "minutely", check=True).stdout.strip() == "paused schedule entry minutely"
    sched.turn(utc(2026, 11, 24, 10, 1, 1))
    sched.turn(utc(2026, 11, 24, 10, 3, 1))  # two ticks pass while paused
    assert ticks(qdb, "minutely") == []
    assert state(qdb, "minutely")[2] == utc(2026, 11, 24, 10, 4).replace(tzinfo=None)  # moved along
    assert qdb.cli("schedule", "pause", "minutely", check=True).stdout.strip() == (
        "schedule entry minutely was paused already")
    assert qdb.cli("schedule", "resume", "minutely", check=True).stdout.strip() == "resumed schedule entry minutely"
    sched.turn(utc(2026, 11, 24, 10, 4, 1))
    assert ticks(qdb, "minutely") == [utc(2026, 11, 24, 10, 4)]  # its next tick, no catch-up of 10:01-10:03


def test_pausing_an_entry_no_worker_started_is_one_line(qdb: QueueDB) -> None:
    assert_one_line_error(qdb.cli("schedule", "pause", "nightly"),
                          "no schedule entry named 'nightly' has started")
    assert_one_line_error(qdb.cli("schedule", "resume", " "), "schedule entry name must not be empty")


def test_schedule_list_says_an_entry_is_paused(qdb: QueueDB) -> None:
    text = '[minutely]\nevery = "1m"\nhandler = "test.record"\n'
    path = write_schedule(qdb, text)
    (entry,) = parse(text)
    scheduler(qdb, entry).turn(utc(2026, 11, 24, 10, 0, 30))
    qdb.cli("schedule", "pause", "minutely", check=True)
    rows = json.loads(qdb.cli("schedule", "list", "--json", "--schedule", str(path), check=True).stdout)
    assert rows[0]["state"] == "paused"
    listed = qdb.cli("schedule", "list", "--schedule", str(path), check=True).stdout
    assert "(paused: `mysqlq schedule resume` to go on)" in listed


def test_the_schedules_page_shows_entries_and_pauses_and_resumes_one(qdb: QueueDB) -> None:
    sched = scheduler(qdb, EVERY_MINUTE)
    sched.turn(utc(2026, 11, 24, 10, 0, 30))
    sched.turn(utc(2026, 11, 24, 10, 1, 1))  # one run: job and last tick shown
    web = client(qdb)
    page = web.get("/schedules").get_data(as_text=True)
    assert 'data-schedule="minutely"' in page and "every 1m" in page and "2026-11-24 10:01:00 UTC" in page
    assert "/schedules/minutely/pause" in page
    response = web.post("/schedules/minutely/pause", data={"csrf": csrf_of(page)}, follow_redirects=True)
    body = response.get_data(as_text=True)
    assert "schedule entry minutely is paused" in body and "/schedules/minutely/resume" in body
    assert qdb.scalar("SELECT paused FROM mysqlq_schedules WHERE name = 'minutely'") == 1
    response = web.post("/schedules/minutely/resume", data={"csrf": csrf_of(body)}, follow_redirects=True)
    assert "schedule entry minutely is resumed" in response.get_data(as_text=True)
    missing = web.post("/schedules/nightly/pause", data={"csrf": csrf_of(body)}, follow_redirects=True)
    assert "no schedule entry named &#39;nightly&#39; has started" in missing.get_data(as_text=True)
    assert client(qdb, read_only=True).post("/schedules/minutely/pause").status_code == 403
