"""Schedule files: what an entry may say, the one-line refusals, and when entries tick (also across DST)."""

from __future__ import annotations

import re
import stat
import subprocess
from datetime import UTC, datetime, timedelta
from pathlib import Path
from zoneinfo import ZoneInfo

import pytest

from mysqlq import ConfigError
from mysqlq.leader.schedule_file import Entry, load, parse, tick_key

from ..conftest import MYSQLQ

BERLIN = ZoneInfo("Europe/Berlin")

EXAMPLE = """
[nightly-report]
cron = "0 3 * * *"            # five fields, or @hourly / @daily / @weekly ...
timezone = "Europe/Berlin"
handler = "report.build"
payload = {kind = "daily"}
queue = "reports"
priority = 5
max_attempts = 3
time_limit = "5m"

[refresh-cache]
every = "30s"
handler = "cache.refresh"

[weekly]
cron = "@weekly"
handler = "report.weekly"
"""


def utc(*fields: int) -> datetime:
    return datetime(*fields, tzinfo=UTC)  # type: ignore[misc]


def berlin(*fields: int, fold: int = 0) -> datetime:
    return datetime(*fields, tzinfo=BERLIN, fold=fold)  # type: ignore[misc]


def ticks(entry: Entry, start: datetime, count: int) -> list[datetime]:
    found = [entry.next_after(start)]
    while len(found) < count:
        found.append(entry.next_after(found[-1]))
    return found


def test_the_example_file_gives_its_entries_with_defaults_filled_in() -> None:
    report, cache, weekly = parse(EXAMPLE)
    assert report == Entry("nightly-report", "report.build", cron="0 3 * * *", timezone="Europe/Berlin",
                           payload={"kind": "daily"}, queue="reports", priority=5, max_attempts=3, time_limit=300.0)
    assert cache == Entry("refresh-cache", "cache.refresh", every=30)
    assert (weekly.cron, weekly.timezone) == ("0 0 * * 0", "UTC")
    assert [entry.timing for entry in (report, cache, weekly)] == [
        "cron 0 3 * * * Europe/Berlin", "every 30s", "cron 0 0 * * 0 UTC"]


def test_a_tick_job_carries_the_entry_fields_and_a_key_per_entry_and_tick() -> None:
    report = parse(EXAMPLE)[0]
    job = report.job(utc(2026, 11, 24, 2))
    assert (job.handler, job.payload, job.queue, job.priority, job.max_attempts, job.time_limit) == (
        "report.build", {"kind": "daily"}, "reports", 5, 3, 300.0)
    assert job.dedupe_key == "mysqlq:schedule:nightly-report:2026-11-24T02:00:00Z" == tick_key(
        "nightly-report", berlin(2026, 11, 24, 3))
    assert job.dedupe_scope == "forever"


@pytest.mark.parametrize(("value", "scope"), [('"1h"', "1h"), ("600", 600), ("1.5", 1.5), ('"active"', "active")])
def test_an_entry_may_hold_its_ticks_keys_for_a_period(value: str, scope: object) -> None:
    [entry] = parse(f'[digest]\nevery = "1m"\nhandler = "h"\ndedupe_scope = {value}')
    assert entry.dedupe_scope == scope
    job = entry.job(utc(2026, 11, 24, 2))
    assert (job.dedupe_key, job.dedupe_scope) == ("mysqlq:schedule:digest:2026-11-24T02:00:00Z", scope)


BAD = [
    ('[a]\ncron = "61 * * * *"\nhandler = "h"', "entry 'a', field 'cron': '61 * * * *' is not a cron expression: "
     "bad minute"),
    ('[a]\ncron = "0 3 * *"\nhandler = "h"', "entry 'a', field 'cron': '0 3 * *' has 4 fields; cron takes five"),
    ('[a]\ncron = "0 0 0 3 * *"\nhandler = "h"', "entry 'a', field 'cron': '0 0 0 3 * *' has 6 fields"),
    ('[a]\ncron = "@reboot"\nhandler = "h"', "entry 'a', field 'cron': unknown '@reboot'"),
    ('[a]\ncron = 5\nhandler = "h"', "entry 'a', field 'cron': must be a string"),
    ('[a]\nhandler = "h"', "entry 'a', field 'cron': missing: give cron or every"),
    ('[a]\ncron = "* * * * *"\nevery = "1m"\nhandler = "h"', "entry 'a', field 'every': give either cron or every"),
    ('[a]\nevery = "soon"\nhandler = "h"', "entry 'a', field 'every': duration 'soon' is not a duration"),
    ('[a]\nevery = "0.5s"\nhandler = "h"', "entry 'a', field 'every': must be a whole number of seconds, at least 1s"),
    ('[a]\nevery = 0\nhandler = "h"', "entry 'a', field 'every': must be more than 0 seconds"),
    ('[a]\nevery = "1h"\ntimezone = "Europe/Berlin"\nhandler = "h"', "entry 'a', field 'timezone': applies to cron"),
    ('[a]\ncron = "0 3 * * *"\ntimezone = "Mars/Olympus"\nhandler = "h"',
     "entry 'a', field 'timezone': unknown time zone 'Mars/Olympus'"),
    ('[a]\ncron = "0 3 * * *"', "entry 'a', field 'handler': missing"),
    ('[a]\ncron = "0 3 * * *"\nhandler = ""', "entry 'a', field 'handler': handler name must not be empty"),
    ('[a]\ncron = "0 3 * * *"\nhandler = "h"\nqueue = 7', "entry 'a', field 'queue': must be a string"),
    ('[a]\ncron = "0 3 * * *"\nhandler = "h"\npriority = "high"', "entry 'a', field 'priority': must be an integer"),
    ('[a]\ncron = "0 3 * * *"\nhandler = "h"\npriority = 99999', "entry 'a', field 'priority': priority must be "
     "an integer from -32768 to 32767"),
    ('[a]\ncron = "0 3 * * *"\nhandler = "h"\nmax_attempts = 0', "entry 'a', field 'max_attempts': max attempts "
     "must be an integer from 1 to 1000"),
    ('[a]\ncron = "0 3 * * *"\nhandler = "h"\ntime_limit = -1', "entry 'a', field 'time_limit': must be more than 0"),
    ('[a]\ncron = "0 3 * * *"\nhandler = "h"\npayload = 2026-01-01T00:00:00',
     "entry 'a', field 'payload': payload cannot be stored as JSON"),
    ('[a]\ncron = "0 3 * * *"\nhandler = "h"\nqueu = "x"', "entry 'a', field 'queu': unknown field (known: cron, "),
    ('[a]\ncron = "0 3 * * *"\nhandler = "h"\nconcurrency_key = 7', "entry 'a', field 'concurrency_key': must be a "
     "string"),
    ('[a]\ncron = "0 3 * * *"\nhandler = "h"\nconcurrency_key = ""', "entry 'a', field 'concurrency_key': "
     "concurrency key must be"),
    ('[a]\ncron = "0 3 * * *"\nhandler = "h"\ndedupe_scope = "0s"', "entry 'a', field 'dedupe_scope': dedupe scope "
     "must be 'forever', 'active' or a period ('10m', '1h', seconds or a timedelta, more than 0"),
    ('[a]\ncron = "0 3 * * *"\nhandler = "h"\ndedupe_scope = "sometimes"', "entry 'a', field 'dedupe_scope': "
     "dedupe scope must be 'forever', 'active' or a period"),
    ('a = 1', "entry 'a': must be a table"),
    ('["a b "]\ncron = "0 3 * * *"\nhandler = "h"', "entry 'a b ': entry name 'a b ' has whitespace at its ends"),
    ('[a\ncron = "0 3 * * *"', "not valid TOML: "),
]


@pytest.mark.parametrize(("text", "message"), BAD, ids=range(len(BAD)))
def test_a_bad_entry_is_refused_in_one_line_naming_the_entry_and_the_field(text: str, message: str) -> None:
    good = '[fine]\nevery = "1m"\nhandler = "h"\n'  # entries before and after a bad one do not matter
    with pytest.raises(ConfigError) as refused:
        parse(f"{text}\n\n{good}", "/etc/mysqlq/schedule.toml")
    assert str(refused.value).startswith(f"schedule /etc/mysqlq/schedule.toml: {message}")
    assert "\n" not in str(refused.value)


def test_an_unreadable_file_is_refused_in_one_line() -> None:
    with pytest.raises(ConfigError, match=r"^schedule /nonexistent/schedule.toml: cannot read it: "):
        load("/nonexistent/schedule.toml")


def test_every_ticks_at_whole_multiples_of_its_interval() -> None:
    cache = Entry("c", "h", every=30)
    assert cache.next_after(utc(2026, 11, 23, 10, 0, 0)) == utc(2026, 11, 23, 10, 0, 30)
    assert cache.next_after(utc(2026, 11, 23, 10, 0, 29, 999999)) == utc(2026, 11, 23, 10, 0, 30)
    assert cache.latest_at(utc(2026, 11, 23, 10, 0, 30)) == utc(2026, 11, 23, 10, 0, 30)
    assert cache.latest_at(utc(2026, 11, 23, 10, 1, 29)) == utc(2026, 11, 23, 10, 1)
    assert Entry("h", "h", every=3600).next_after(utc(2026, 11, 23, 10, 17)) == utc(2026, 11, 23, 11)


def test_a_daily_cron_runs_once_a_day_across_both_dst_changes() -> None:
    """Europe/Berlin: 2026-03-29 02:00 CET jumps to 03:00 CEST; 2026-10-25 03:00 CEST goes back to 02:00 CET."""
    at_0230 = Entry("n", "h", cron="30 2 * * *", timezone="Europe/Berlin")
    # Spring: 02:30 does not exist on the 29th; that day's run comes right after the jump, not never.
    spring = ticks(at_0230, berlin(2026, 3, 27, 12), 4)
    assert [tick.astimezone(BERLIN).isoformat() for tick in spring] == [
        "2026-03-28T02:30:00+01:00", "2026-03-29T03:00:00+02:00", "2026-03-30T02:30:00+02:00",
        "2026-03-31T02:30:00+02:00"]
    # Autumn: 02:30 happens twice on the 25th; it runs at the first, not again an hour later.
    autumn = ticks(at_0230, berlin(2026, 10, 23, 12), 4)
    assert [tick.astimezone(BERLIN).isoformat() for tick in autumn] == [
        "2026-10-24T02:30:00+02:00", "2026-10-25T02:30:00+02:00", "2026-10-26T02:30:00+01:00",
        "2026-10-27T02:30:00+01:00"]
    # Outside the changed hour nothing moves: 03:00 local every day, whatever the offset.
    at_3 = Entry("n", "h", cron="0 3 * * *", timezone="Europe/Berlin")
    for start in (berlin(2026, 3, 27, 12), berlin(2026, 10, 23, 12)):
        assert [tick.astimezone(BERLIN).hour for tick in ticks(at_3, start, 4)] == [3, 3, 3, 3]
        days = [tick.astimezone(BERLIN).date() for tick in ticks(at_3, start, 4)]
        assert days == [days[0] + timedelta(days=n) for n in range(4)]


def test_an_hourly_cron_follows_the_real_clock_across_dst() -> None:
    hourly = Entry("n", "h", cron="0 * * * *", timezone="Europe/Berlin")
    # Autumn: the hour from 02:00 happens twice and runs twice (an hour apart): no gap, no double.
    autumn = ticks(hourly, utc(2026, 10, 24, 22, 30), 6)
    assert [tick.strftime("%H:%M") for tick in autumn] == ["23:00", "00:00", "01:00", "02:00", "03:00", "04:00"]
    # Spring: the local hour from 02:00 does not exist; the UTC ticks go on one hour apart.
    spring = ticks(hourly, utc(2026, 3, 28, 23, 30), 4)
    assert [tick.strftime("%d %H:%M") for tick in spring] == ["29 00:00", "29 01:00", "29 02:00", "29 03:00"]


def test_the_latest_tick_agrees_with_the_next_one_across_dst() -> None:
    """latest_at (used to catch up after downtime) goes back to the very tick next_after goes forward to."""
    for cron in ("30 2 * * *", "0 3 * * *", "0 * * * *", "*/20 * * * *", "15 1-3 * * 0"):
        entry = Entry("n", "h", cron=cron, timezone="Europe/Berlin")
        for start in (utc(2026, 3, 28, 20), utc(2026, 10, 24, 20)):
            for tick in ticks(entry, start, 30):
                assert entry.latest_at(tick) == tick, (cron, tick)
                assert entry.latest_at(tick + timedelta(seconds=59)) == tick, (cron, tick)
                assert entry.next_after(entry.latest_at(tick - timedelta(microseconds=1))) == tick, (cron, tick)


def test_the_installer_writes_a_commented_example_schedule_that_parses_once_uncommented(tmp_path: Path) -> None:
    command = [MYSQLQ, "install-systemd", "--root", str(tmp_path), "--no-reload"]
    result = subprocess.run(command, capture_output=True, text=True, check=False)
    assert result.returncode == 0, result.stderr
    path = tmp_path / "etc/mysqlq/schedule.toml"
    assert stat.S_IMODE(path.stat().st_mode) == 0o644
    text = path.read_text()
    assert parse(text) == []  # every entry commented out: nothing recurs until you say so
    uncommented = re.sub(r"^# (?=\[|\w+ = )", "", text, flags=re.MULTILINE)
    assert [(entry.name, entry.timing) for entry in parse(uncommented)] == [
        ("nightly-report", "cron 0 3 * * * Europe/Berlin"), ("refresh-cache", "every 30s")]
    assert "\n#MYSQLQ_SCHEDULE=/etc/mysqlq/schedule.toml\n" in (tmp_path / "etc/mysqlq/mysqlq.env").read_text()
    path.write_text("# mine\n")
    again = subprocess.run(command, capture_output=True, text=True, check=False)
    assert f"kept {path}" in again.stdout and path.read_text() == "# mine\n"
