"""Schedule files: recurring jobs declared in TOML, checked entry by entry, and when each entry ticks.

```toml
[nightly-report]
cron = "0 3 * * *"            # five fields, or @hourly, @daily, @weekly, @monthly, @yearly
timezone = "Europe/Berlin"    # IANA name, default UTC
handler = "report.build"
payload = {kind = "daily"}
queue = "reports"             # and priority, max_attempts, time_limit, concurrency_key, tags,
                              # fairness_key as for enqueue

[refresh-cache]
every = "30s"                 # an interval instead of cron: ticks at whole multiples of it since 1970 UTC
handler = "cache.refresh"
dedupe_scope = "1h"           # each tick's key held for an hour ("forever" by default: until purged)
```

Each tick's job carries the dedupe key of its entry and tick (:func:`tick_key`). With a period as its
``dedupe_scope`` the key is held for that long and the done job leaves the live table at once, like
any other; "forever" keeps each done tick live until retention purges it.

Cron times are computed by cronsim, which follows Debian's cron across DST changes: an entry with a
fixed hour and minute runs once when the clocks go back, and right after the jump when its time is
skipped. Ticks are aware UTC datetimes.
"""

from __future__ import annotations

import math
import tomllib
from collections.abc import Callable
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta, tzinfo
from pathlib import Path
from typing import Any
from zoneinfo import ZoneInfo, ZoneInfoNotFoundError

from cronsim import CronSim, CronSimError

from mysqlq.core.config import Dsn, Settings, check_name
from mysqlq.core.durations import format_duration, parse_duration
from mysqlq.core.errors import ConfigError, InvalidJob
from mysqlq.core.jobs import DedupeScope, Job

# The @-names crontab(5) gives (not @reboot: a schedule has no boot).
MACROS = {"@yearly": "0 0 1 1 *", "@annually": "0 0 1 1 *", "@monthly": "0 0 1 * *", "@weekly": "0 0 * * 0",
          "@daily": "0 0 * * *", "@midnight": "0 0 * * *", "@hourly": "0 * * * *"}
JOB_FIELDS = ("handler", "payload", "queue", "priority", "max_attempts", "time_limit", "concurrency_key", "tags",
              "fairness_key", "dedupe_scope")
FIELDS = ("cron", "every", "timezone", *JOB_FIELDS)
MAX_CRON = 200  # characters: the timing is stored beside the schedule's state (VARCHAR(255))
KEY_PREFIX = "mysqlq:schedule:"
EPOCH = datetime(1970, 1, 1, tzinfo=UTC)
MICROSECOND = timedelta(microseconds=1)


def tick_key(name: str, tick: datetime) -> str:
    """The dedupe key of one tick of one entry: whoever enqueues it, it exists once."""
    return f"{KEY_PREFIX}{name}:{tick.astimezone(UTC):%Y-%m-%dT%H:%M:%S}Z"


@dataclass(frozen=True)
class Entry:
    """One recurring job: when it ticks (``cron`` in ``zone``, or ``every`` seconds) and the job it enqueues."""

    name: str
    handler: str
    cron: str | None = None  # five fields; @-names are expanded
    every: int | None = None  # whole seconds
    timezone: str = "UTC"
    payload: Any = None
    queue: str = "default"
    priority: int = 0
    max_attempts: int | None = None
    time_limit: float | None = None
    concurrency_key: str | None = None  # ticks of the entry then run at most the handler's limit at once
    tags: tuple[str, ...] = ()  # each tick's job has them (`mysqlq jobs list --tag`)
    fairness_key: str | None = None  # each tick's job takes its turn among the queue's keys
    dedupe_scope: DedupeScope = "forever"  # how long a tick's key holds: a period fits (see the module's note)

    @property
    def zone(self) -> tzinfo:
        # datetime.UTC, not ZoneInfo("UTC"): cronsim skips its DST handling for it.
        return UTC if self.timezone == "UTC" else ZoneInfo(self.timezone)

    @property
    def timing(self) -> str:
        """When it ticks, as one line (stored with its state: a changed timing recomputes the next tick)."""
        if self.every is not None:
            return f"every {format_duration(self.every)}"
        return f"cron {self.cron} {self.timezone}"

    def next_after(self, moment: datetime) -> datetime:
        """The first tick strictly after ``moment`` (an aware datetime)."""
        if self.every is not None:
            return EPOCH + self._step() * ((moment - EPOCH) // self._step() + 1)
        assert self.cron is not None
        return next(CronSim(self.cron, moment.astimezone(self.zone))).astimezone(UTC)

    def latest_at(self, moment: datetime) -> datetime:
        """The last tick at or before ``moment`` (an aware datetime)."""
        if self.every is not None:
            return EPOCH + self._step() * ((moment - EPOCH) // self._step())
        assert self.cron is not None
        # Going back, cronsim counts the start itself when it has microseconds, and not otherwise.
        start = moment if moment.microsecond else moment + MICROSECOND
        return next(CronSim(self.cron, start.astimezone(self.zone), reverse=True)).astimezone(UTC)

    def _step(self) -> timedelta:
        return timedelta(seconds=self.every or 0)

    def job(self, tick: datetime) -> Job:
        """The job one tick enqueues, keyed by entry and tick (the key holds for the entry's dedupe_scope)."""
        return Job(self.handler, self.payload, self.queue, priority=self.priority, dedupe_key=tick_key(self.name, tick),
                   max_attempts=self.max_attempts, time_limit=self.time_limit, dedupe_scope=self.dedupe_scope,
                   concurrency_key=self.concurrency_key, tags=self.tags, fairness_key=self.fairness_key)


class EntryError(ConfigError):
    """One field of one entry is wrong; the message names both."""


def load(path: str | Path, settings: Settings | None = None) -> list[Entry]:
    """The entries of a schedule file, every one checked; ConfigError (one line) names what is wrong."""
    try:
        text = Path(path).read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as exc:
        raise ConfigError(f"schedule {path}: cannot read it: {exc}") from None
    return parse(text, str(path), settings)


def parse(text: str, source: str = "schedule", settings: Settings | None = None) -> list[Entry]:
    """The entries of a schedule file's text (``source`` names it in errors)."""
    try:
        document = tomllib.loads(text)
    except tomllib.TOMLDecodeError as exc:
        raise ConfigError(f"schedule {source}: not valid TOML: {exc}") from None
    settings = settings or Settings(dsn=Dsn())
    entries = []
    for name, table in document.items():
        try:
            entries.append(_entry(name, table, settings))
        except EntryError as exc:
            raise ConfigError(f"schedule {source}: {exc}") from None
    return entries


def _entry(name: str, table: Any, settings: Settings) -> Entry:
    try:
        check_name("entry", name, EntryError)
    except EntryError as exc:
        raise EntryError(f"entry {name!r}: {exc}") from None
    if not isinstance(table, dict):
        raise EntryError(f"entry {name!r}: must be a table: [{name}] with cron or every, and handler")

    def bad(field: str, problem: str) -> EntryError:
        return EntryError(f"entry {name!r}, field {field!r}: {problem}")

    unknown = sorted(set(table) - set(FIELDS))
    if unknown:
        raise bad(unknown[0], f"unknown field (known: {', '.join(FIELDS)})")
    if "handler" not in table:
        raise bad("handler", "missing: name the handler the job runs")
    if ("cron" in table) == ("every" in table):
        field = "every" if "cron" in table else "cron"
        raise bad(field, "give either cron or every, not both" if "cron" in table else "missing: give cron or every")
    values: dict[str, Any] = {field: table[field] for field in JOB_FIELDS if field in table}
    for field in ("handler", "queue", "concurrency_key", "fairness_key"):
        if field in values and not isinstance(values[field], str):
            raise bad(field, f"must be a string, got {values[field]!r}")
    for field in ("priority", "max_attempts"):
        if field in values and (not isinstance(values[field], int) or isinstance(values[field], bool)):
            raise bad(field, f"must be an integer, got {values[field]!r}")
    if "time_limit" in values:
        values["time_limit"] = _seconds(values["time_limit"], lambda problem: bad("time_limit", problem))
    for field, value in values.items():  # each field alone, so that an error names it
        try:
            Job(**{"handler": "x", field: value}).row(settings)
        except InvalidJob as exc:
            raise bad(field, str(exc)) from None
    if "tags" in values:
        values["tags"] = tuple(values["tags"])
    if "every" in table:
        if "timezone" in table:
            raise bad("timezone", "applies to cron only (every counts seconds, whatever the zone)")
        every = _seconds(table["every"], lambda problem: bad("every", problem))
        if every < 1 or every != int(every):
            raise bad("every", f"must be a whole number of seconds, at least 1s, got {table['every']!r}")
        return Entry(name, every=int(every), **values)
    timezone = table.get("timezone", "UTC")
    if not isinstance(timezone, str) or not _zone_exists(timezone):
        raise bad("timezone", f"unknown time zone {timezone!r} (use an IANA name such as Europe/Berlin, or UTC)")
    entry = Entry(name, cron=_cron(table["cron"], lambda problem: bad("cron", problem)), timezone=timezone,
                  **values)
    try:
        entry.next_after(datetime.now(UTC))
    except StopIteration:
        raise bad("cron", f"{table['cron']!r} never matches") from None
    return entry


def _seconds(value: Any, bad: Callable[[str], EntryError]) -> float:
    if isinstance(value, bool) or not isinstance(value, int | float | str):
        raise bad(f"must be a duration such as \"30s\" or \"5m\", got {value!r}")
    try:
        seconds = parse_duration(str(value)) if isinstance(value, str) else float(value)
    except ConfigError as exc:
        raise bad(str(exc)) from None
    if not math.isfinite(seconds) or seconds <= 0:
        raise bad(f"must be more than 0 seconds, got {value!r}")
    return seconds


def _cron(value: Any, bad: Callable[[str], EntryError]) -> str:
    if not isinstance(value, str):
        raise bad(f"must be a string such as \"0 3 * * *\" or \"@daily\", got {value!r}")
    expression = " ".join(value.split())
    if expression.startswith("@"):
        if expression.lower() not in MACROS:
            raise bad(f"unknown {expression!r} (known: {', '.join(MACROS)})")
        return MACROS[expression.lower()]
    if len(expression) > MAX_CRON:
        raise bad(f"is {len(expression)} characters long; the limit is {MAX_CRON}")
    if len(expression.split()) != 5:
        raise bad(f"{value!r} has {len(expression.split())} fields; cron takes five: minute hour day month weekday")
    try:
        CronSim(expression, datetime.now(UTC))
    except CronSimError as exc:
        raise bad(f"{value!r} is not a cron expression: {str(exc).lower()}") from None
    return expression


def _zone_exists(name: str) -> bool:
    if name == "UTC":
        return True
    try:
        ZoneInfo(name)
    except (ZoneInfoNotFoundError, ValueError):
        return False
    return True
