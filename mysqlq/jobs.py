"""What a job is: the validated description a producer enqueues and the claimed row a worker runs."""

from __future__ import annotations

import json
import math
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

from .config import Settings, check_name
from .errors import InvalidJob

STATUSES = ("ready", "scheduled", "running", "done", "dead", "cancelled")
MAX_DEDUPE_KEY = 191
MAX_ATTEMPTS_LIMIT = 1000
# How long a dedupe key holds: until the job is purged, or only while it is ready, scheduled or running.
DEDUPE_SCOPES = ("forever", "active")


@dataclass(frozen=True)
class Job:
    """A job to enqueue. ``delay`` (seconds) and ``run_at`` (a datetime, naive means UTC) are exclusive."""

    handler: str
    payload: Any = None
    queue: str = "default"
    delay: float = 0.0
    run_at: datetime | None = None
    priority: int = 0
    dedupe_key: str | None = None
    max_attempts: int | None = None
    time_limit: float | None = None
    dedupe_scope: str = "forever"

    def row(self, settings: Settings) -> tuple[Any, ...]:
        """The insert_jobs parameters, after checking every field (InvalidJob says what is wrong)."""
        check_name("handler", self.handler, InvalidJob)
        check_name("queue", self.queue, InvalidJob)
        payload = encode_payload(self.payload, settings.max_payload_bytes)
        if not isinstance(self.delay, int | float) or math.isnan(self.delay) or self.delay < 0:
            raise InvalidJob(f"delay must be a number of seconds >= 0, got {self.delay!r}")
        if self.delay and self.run_at is not None:
            raise InvalidJob("give either delay or run_at, not both")
        if not isinstance(self.priority, int) or not -32768 <= self.priority <= 32767:
            raise InvalidJob(f"priority must be an integer from -32768 to 32767, got {self.priority!r}")
        if self.dedupe_key is not None and not 0 < len(self.dedupe_key) <= MAX_DEDUPE_KEY:
            raise InvalidJob(f"dedupe key must be 1 to {MAX_DEDUPE_KEY} characters long")
        if self.dedupe_scope not in DEDUPE_SCOPES:
            raise InvalidJob(f"dedupe scope must be 'forever' or 'active', got {self.dedupe_scope!r}")
        attempts = settings.max_attempts if self.max_attempts is None else self.max_attempts
        if not isinstance(attempts, int) or not 1 <= attempts <= MAX_ATTEMPTS_LIMIT:
            raise InvalidJob(f"max attempts must be an integer from 1 to {MAX_ATTEMPTS_LIMIT}, got {attempts!r}")
        if self.time_limit is not None and not 0 < self.time_limit < 2**31:
            raise InvalidJob(f"time limit must be a positive number of seconds, got {self.time_limit!r}")
        run_at = utc_naive(self.run_at) if self.run_at is not None else None
        status = "scheduled" if self.delay > 0 or run_at is not None else "ready"
        time_limit = math.ceil(self.time_limit) if self.time_limit is not None else None
        return (self.queue, self.handler, payload, status, self.priority, run_at,
                round(self.delay * 1_000_000), attempts, time_limit, self.dedupe_key, self.dedupe_scope)


def encode_payload(payload: Any, limit: int) -> bytes:
    """JSON-encode a payload, refusing what JSON cannot hold and what is over the size limit."""
    try:
        data = json.dumps(payload, separators=(",", ":"), ensure_ascii=False, allow_nan=False).encode()
    except (TypeError, ValueError) as exc:
        raise InvalidJob(f"payload cannot be stored as JSON: {exc}") from None
    if len(data) > limit:
        raise InvalidJob(f"payload is {len(data)} bytes; the limit is {limit} (max_payload_bytes)")
    return data


def utc_naive(moment: datetime) -> datetime:
    """The UTC wall time the database stores (naive datetimes are taken to be UTC already)."""
    if moment.tzinfo is not None:
        moment = moment.astimezone(UTC).replace(tzinfo=None)
    return moment


@dataclass(slots=True)
class ClaimedJob:
    """A job as a worker holds it after a claim."""

    id: int
    queue: str
    handler: str
    payload: bytes
    attempt: int
    max_attempts: int
    time_limit: float | None
    age: float  # seconds since it was enqueued, at claim time
