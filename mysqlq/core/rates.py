"""Rate limits as people write them: ``"100/m"`` (100 jobs a minute), ``"5/s"``, ``"1000/h"``,
``"20/10s"`` (20 jobs in any 10 seconds); and the name of the bucket a job's starts are counted in.

A limit of N per period means: **in any window of the period's length, at most N jobs of one
bucket start** (mysqlq.worker.rates admits them; mysqlq.store.rates counts).
"""

from __future__ import annotations

import hashlib
import re
from dataclasses import dataclass

from mysqlq.core.durations import format_duration, parse_duration
from mysqlq.core.errors import ConfigError

MAX_STARTS = 1_000_000  # per period
MIN_PERIOD = 0.001  # seconds
MAX_PERIOD = 7 * 86400.0  # a week: starts older than that are never counted
MAX_KEY = 150  # characters of a rate key kept in a bucket's name; a longer one is hashed
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
