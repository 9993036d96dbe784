"""Rate limits as people write them: ``"100/m"`` (100 jobs a minute), ``"5/s"``, ``"1000/h"``,
``"20/10s"`` (20 jobs in any 10 seconds); and the name of the bucket a job's starts are counted in.

A limit of N per period means: **in any window of the period's length, at most N jobs of one
bucket start** (mysqlq.worker.intake.rate_admission admits them; mysqlq.store.rates counts).
"""

from __future__ import annotations

import datetime
import hashlib
import re
from collections.abc import Collection, Sequence
from dataclasses import dataclass, field

from mysqlq.core.durations import format_duration, parse_duration
from mysqlq.core.errors import ConfigError

MAX_STARTS = 1_000_000  # per period
MIN_PERIOD = 0.001  # seconds
MAX_PERIOD = 7 * 86400.0  # a week: starts older than that are never counted
MAX_KEY = 150  # characters of a rate key kept in a bucket's name; a longer one is hashed
# Jobs set aside together whose turns fall within this span come due together, at the last one's
# turn: one promotion, claim and admission for the lot instead of one each (each starts at most this
# much after its own turn; the limit is unaffected, it is counted at admission).
TURN_SPAN = 0.05  # seconds
# A job admitted under a rate limit has its handler entered within its grace of the admission's
# stamp, or not at all (it goes back to the queue, its start no longer counted), and admission counts
# each start over its period and that grace: so no window of the period holds more than N entries
# into the handler, however late within the grace each came. A fortieth of the period, from 10 to
# 25 ms: the rate a limit reaches is period / (period + grace) of it at most.
GRACE_SHARE = 0.025
MIN_GRACE = 0.01  # seconds
MAX_GRACE = 0.025  # seconds
_RATE = re.compile(r"\s*(\d+)\s*/\s*(\S+)\s*")


@dataclass(frozen=True, slots=True)
class RateLimit:
    """At most ``starts`` jobs of one bucket start in any window of ``period`` seconds."""

    starts: int
    period: float

    def __str__(self) -> str:
        period = format_duration(self.period)
        return f"{self.starts}/{period[1:] if period.startswith('1') and period[1:].isalpha() else period}"

    @property
    def spacing(self) -> float:
        """Seconds between two starts at the limit's steady rate."""
        return self.period / self.starts

    @property
    def grace(self) -> float:
        """Seconds after its admission within which a job's handler is entered, or not at all."""
        return min(MAX_GRACE, max(MIN_GRACE, self.period * GRACE_SHARE))

    @property
    def counted(self) -> RateLimit:
        """The limit as admission counts starts: at most N in any window of the period and the grace."""
        return RateLimit(self.starts, self.period + self.grace)


def parse_rate(text: str | RateLimit, what: str = "rate limit") -> RateLimit:
    """``N/PERIOD`` (``100/m``, ``5/s``, ``20/10s``, ``1000/1h``) as a RateLimit; ConfigError otherwise."""
    if isinstance(text, RateLimit):
        return text
    match = _RATE.fullmatch(str(text))
    if not match:
        raise ConfigError(f"{what} {text!r} is not N/PERIOD: e.g. 100/m, 5/s, 20/10s, 1000/h")
    period_text = match.group(2)
    try:
        period = parse_duration(period_text if period_text[0].isdigit() else "1" + period_text, what)
    except ConfigError:
        raise ConfigError(f"{what} {text!r}: the period must be a duration such as s, m, h, 10s or 1.5h") from None
    starts = int(match.group(1))
    if not 1 <= starts <= MAX_STARTS:
        raise ConfigError(f"{what} {text!r}: the number of jobs must be from 1 to {MAX_STARTS}")
    if not MIN_PERIOD <= period <= MAX_PERIOD:
        raise ConfigError(f"{what} {text!r}: the period must be from 1 ms to 7 days")
    return RateLimit(starts, period)


def handler_bucket(handler: str, key: str | None) -> str:
    """The bucket of a handler's jobs with this rate key (None: one bucket for all its jobs)."""
    if key is None:
        return f"handler:{handler}"
    if len(key) > MAX_KEY:
        key = "sha1:" + hashlib.sha1(key.encode()).hexdigest()
    return f"handler:{handler}:{key}"


def queue_bucket(queue: str) -> str:
    """The bucket of a queue limited as a whole."""
    return f"queue:{queue}"


def bucket_owner(bucket: str) -> tuple[str, str]:
    """Whose limit a bucket's starts count under, as an operator names it: ``("handler", NAME)`` for a
    handler's bucket, with or without a rate key (:func:`handler_bucket`); ``("queue", NAME)`` for a
    queue's (:func:`queue_bucket`)."""
    scope, _, rest = bucket.partition(":")
    return scope, rest.split(":", 1)[0] if scope == "handler" else rest


@dataclass
class Turns:
    """What an admission does with one bucket's jobs of a batch (see :func:`plan_turns`)."""

    admitted: list[int] = field(default_factory=list)  # start now, in order of id
    deferred: dict[int, datetime.datetime] = field(default_factory=dict)  # set aside until then
    waiting: list[int] = field(default_factory=list)  # set aside for the first time: join the waiting list
    next_at: datetime.datetime | None = None  # the waiting list's new tail (None: unchanged)


def plan_turns(limit: RateLimit, now: datetime.datetime, count: int, oldest: Sequence[datetime.datetime],
               next_at: datetime.datetime | None, jobs: Sequence[int], returning: Collection[int],
               queue_ahead: bool, span: float = TURN_SPAN) -> Turns:
    """Which of a bucket's claimed ``jobs`` (ids, ascending) start ``now`` and when the others come
    back. ``count`` starts lie in the window ending now, the first of them (oldest first) in
    ``oldest``; ``returning`` jobs were set aside before and their turn came; ``queue_ahead``: a job
    set aside before, not among these, still waits (new jobs queue behind it, at the limit's steady
    rate from ``next_at``).

    A job over the limit takes the place of the start that leaves the window first and is not taken
    yet, so jobs sent back together come back one place apart, not all at the same moment; those
    whose turns fall within ``span`` seconds come back together at the last one's turn."""
    period = datetime.timedelta(seconds=limit.period)
    spacing = datetime.timedelta(seconds=limit.spacing)
    turns = Turns()
    room = limit.starts - count
    tail = next_at if queue_ahead else None
    later: list[datetime.datetime] = []  # turns given in this admission, in order

    def start(index: int) -> datetime.datetime:
        """The window's ``index``-th start (oldest first), counting the admitted and the set aside."""
        if index < len(oldest):
            return oldest[index]
        if index < count:  # not read (more than a batch past the limit): as if it started now
            return now
        index -= count
        if index < len(turns.admitted):
            return now
        return later[index - len(turns.admitted)]

    for job_id in jobs:
        new = job_id not in returning
        if room > 0 and not (new and queue_ahead):
            turns.admitted.append(job_id)
            room -= 1
            continue
        passed = count + len(turns.admitted) + len(later) - limit.starts  # starts to leave the window first
        at = start(passed) + period if passed >= 0 else now
        if new:  # behind every job set aside before it, at the steady rate
            at = max(at, tail or now)
            tail = turns.next_at = at + spacing
            turns.waiting.append(job_id)
        later.append(at)
        turns.deferred[job_id] = at
    _together(turns.deferred, datetime.timedelta(seconds=span))
    return turns


def _together(deferred: dict[int, datetime.datetime], span: datetime.timedelta) -> None:
    """In order of id, no turn before an earlier job's; turns within ``span`` of the first of their
    group become the group's last."""
    group: list[int] = []
    for job_id in sorted(deferred):
        at = max(deferred[job_id], deferred[group[-1]]) if group else deferred[job_id]
        if group and at > deferred[group[0]] + span:
            _settle(deferred, group)
            group = []
        deferred[job_id] = at
        group.append(job_id)
    _settle(deferred, group)


def _settle(deferred: dict[int, datetime.datetime], group: list[int]) -> None:
    """Every job of a group comes due at its last one's turn."""
    for job_id in group[:-1]:
        deferred[job_id] = deferred[group[-1]]
