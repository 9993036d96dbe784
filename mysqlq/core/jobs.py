"""What a job is: the validated description a producer enqueues and the claimed row a worker runs."""

from __future__ import annotations

import dataclasses
import json
import math
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from enum import StrEnum
from functools import partial
from typing import Any, NamedTuple, TypedDict

from mysqlq.core.config import Settings, check_name
from mysqlq.core.durations import parse_duration
from mysqlq.core.encryption import EncryptedValue, Keyring, key_id_of, missing_key, open_error_text, open_json
from mysqlq.core.errors import ConfigError, InvalidJob, ResultNotStored
from mysqlq.core.tracing import current_trace_context


class Status(StrEnum):
    """Where a job stands, in the order of the schema's ENUM. A member is its string: it goes into SQL,
    JSON and output as it is."""

    READY = "ready"
    SCHEDULED = "scheduled"
    RUNNING = "running"
    DONE = "done"
    DEAD = "dead"
    CANCELLED = "cancelled"
    BLOCKED = "blocked"  # its concurrency key has no free slot (mysqlq.worker.intake.concurrency_admission)
    WAITING = "waiting"  # its parents have not all ended (mysqlq.store.dependencies)


STATUSES = tuple(Status)
PENDING = (Status.READY, Status.SCHEDULED, Status.BLOCKED, Status.WAITING)  # not started yet
CANCELLABLE = (*PENDING, Status.RUNNING)  # the statuses a cancel changes
FAILED = (Status.DEAD, Status.CANCELLED)  # ended without success
ENDED = (Status.DONE, *FAILED)  # finished: the history that retention purges
LIVE = (*CANCELLABLE, Status.DEAD)  # what the dashboard counts (dead jobs wait for an operator)
NOT_RUNNING = (*PENDING, *ENDED)


def any_of(statuses: Sequence[str]) -> str:
    """``ready, scheduled or running``: statuses as a message names the ones an action accepts."""
    return statuses[0] if len(statuses) == 1 else f"{', '.join(statuses[:-1])} or {statuses[-1]}"
MAX_DEDUPE_KEY = 191
MAX_CONCURRENCY_KEY = 191
MAX_FAIRNESS_KEY = 100  # mysqlq_jobs.fairness_key (VARCHAR(100))
MAX_ATTEMPTS_LIMIT = 1000
# The range of the schema's DATETIME(6) columns (run_at), a day inside it so that a client clock
# ahead of the server's cannot push a job past the end.
EARLIEST_RUN_AT = datetime(1000, 1, 2)
LATEST_RUN_AT = datetime(9999, 12, 30)
# How long a dedupe key holds: until the job is purged, or only while it is ready, scheduled or running.
# A period (a duration) holds it for that long from the enqueue, whatever the job does (DedupePeriod).
DEDUPE_SCOPES = ("forever", "active")
# What dedupe_scope takes: one of DEDUPE_SCOPES, or a period: "10m" (s, m, h, d, w), seconds, a timedelta.
DedupeScope = str | float | timedelta
# The longest period (about 31 years, as PLAINLY_VALID_DELAY): its end fits the schema's DATETIME(6).
MAX_DEDUPE_PERIOD = 1e9
MAX_PARENTS = 10_000  # jobs one job may wait for (a group's callback waits for every member)
# What a job enqueued after others does when one of them ends dead or cancelled.
PARENT_FAILURE = ("cancel", "run")
# Tags: a few short labels a job is listed by (``jobs list --tag``). Their JSON array fits the
# schema's mysqlq_jobs.tags (VARCHAR(700)), each tag mysqlq_job_tags.tag (VARCHAR(64)).
MAX_TAGS = 10
MAX_TAG_LENGTH = 64


class EnqueueOptions(TypedDict, total=False):
    """The options of an enqueue after the handler and the payload: the fields of :class:`Job`."""

    queue: str
    delay: float
    run_at: datetime | None
    priority: int
    dedupe_key: str | None
    max_attempts: int | None
    time_limit: float | None
    dedupe_scope: DedupeScope
    concurrency_key: str | None
    after: Sequence[int]
    on_parent_failure: str
    tags: Sequence[str]
    fairness_key: str | None


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
    dedupe_scope: DedupeScope = "forever"
    concurrency_key: str | None = None
    after: Sequence[int] = ()
    on_parent_failure: str = "cancel"
    tags: Sequence[str] = ()
    fairness_key: str | None = None

    def parents(self) -> tuple[int, ...]:
        """The ids of ``after``, checked and sorted (InvalidJob says what is wrong); () for none."""
        after = self.after
        if not after:
            return ()
        if isinstance(after, str | bytes) or not isinstance(after, Sequence | set | frozenset):
            raise InvalidJob(f"after must be a list of job ids, got {after!r}")
        ids = set()
        for job_id in after:
            if isinstance(job_id, bool) or not isinstance(job_id, int) or job_id < 1:
                raise InvalidJob(f"after must hold job ids (positive integers), got {job_id!r}")
            ids.add(job_id)
        if len(ids) > MAX_PARENTS:
            raise InvalidJob(f"a job may wait for at most {MAX_PARENTS} jobs, got {len(ids)}")
        if self.on_parent_failure not in PARENT_FAILURE:
            raise InvalidJob(f"on_parent_failure must be 'cancel' or 'run', got {self.on_parent_failure!r}")
        return tuple(sorted(ids))

    @property
    def run_anyway(self) -> bool:
        """Whether the job runs even if a job it waits for ends dead or cancelled."""
        return self.on_parent_failure == "run"

    def row(self, settings: Settings) -> tuple[Any, ...]:
        """The insert_jobs parameters, after checking every field (InvalidJob says what is wrong)."""
        return job_row(settings, self.handler, self.payload, self.queue, self.delay, self.run_at, self.priority,
                       self.dedupe_key, self.max_attempts, self.time_limit, self.dedupe_scope, self.concurrency_key,
                       self.tags, self.fairness_key)


def job_row(settings: Settings, handler: str, payload: object, queue: str, delay: float, run_at: datetime | None,
            priority: int, dedupe_key: str | None, max_attempts: int | None, time_limit: float | None,
            dedupe_scope: DedupeScope, concurrency_key: str | None, tags: Sequence[str] = (),
            fairness_key: str | None = None) -> tuple[Any, ...]:
    """:meth:`Job.row` of a job given field by field: what ``Producer.enqueue`` calls, without making
    a Job first (a frozen dataclass of thirteen fields costs about as much as all the checks).

    The row ends with the tags (a JSON array, None without), the trace context of the span current
    now (mysqlq.core.tracing; None without one), the fairness key (None without) and the key's
    :class:`DedupePeriod` when ``dedupe_scope`` is a period (None otherwise; the key then lives in
    mysqlq_dedupe_periods, so the row's own dedupe key is None): every way of enqueueing makes its
    row here."""
    check_name("handler", handler, InvalidJob)
    check_name("queue", queue, InvalidJob)
    encoded = encode_payload(payload, settings.max_payload_bytes)
    if settings.keys is not None:  # sealed, bound to its queue and handler (mysqlq.core.encryption)
        encoded = settings.keys.seal_payload(encoded, queue, handler)
    check_delay(delay)
    if delay and run_at is not None:
        raise InvalidJob("give either delay or run_at, not both")
    if not isinstance(priority, int) or not -32768 <= priority <= 32767:
        raise InvalidJob(f"priority must be an integer from -32768 to 32767, got {priority!r}")
    if dedupe_key is not None and not 0 < len(dedupe_key) <= MAX_DEDUPE_KEY:
        raise InvalidJob(f"dedupe key must be 1 to {MAX_DEDUPE_KEY} characters long")
    if concurrency_key is not None and (not isinstance(concurrency_key, str)
                                        or not 0 < len(concurrency_key) <= MAX_CONCURRENCY_KEY):
        raise InvalidJob(f"concurrency key must be a string of 1 to {MAX_CONCURRENCY_KEY} characters")
    if fairness_key is not None:
        check_fairness_key(fairness_key)
    period = None
    if dedupe_scope not in DEDUPE_SCOPES:
        microseconds = period_microseconds(dedupe_scope)  # InvalidJob for what is not a period either
        if dedupe_key is not None:
            period = DedupePeriod(dedupe_key, microseconds)
        dedupe_key, dedupe_scope = None, "forever"  # the key lives in mysqlq_dedupe_periods, not on the job
    attempts = settings.max_attempts if max_attempts is None else max_attempts
    if not isinstance(attempts, int) or not 1 <= attempts <= MAX_ATTEMPTS_LIMIT:
        raise InvalidJob(f"max attempts must be an integer from 1 to {MAX_ATTEMPTS_LIMIT}, got {attempts!r}")
    if time_limit is not None and (not isinstance(time_limit, int | float) or not 0 < time_limit < 2**31):
        raise InvalidJob(f"time limit must be a positive number of seconds, got {time_limit!r}")
    at = check_run_at(run_at) if run_at is not None else None
    status = Status.SCHEDULED if delay > 0 or at is not None else Status.READY
    limit = math.ceil(time_limit) if time_limit is not None else None
    return (queue, handler, encoded, status, priority, at, round(delay * 1_000_000), attempts, limit, dedupe_key,
            dedupe_scope, concurrency_key, encode_tags(tags) if tags else None, current_trace_context(), fairness_key,
            period)


class DedupePeriod(NamedTuple):
    """A dedupe key held for a period from the enqueue that takes it (mysqlq.store.dedupe_periods)."""

    key: str
    microseconds: int


def period_microseconds(scope: object) -> int:
    """A dedupe scope that is a period, in whole microseconds (at least 1); InvalidJob (one line)
    for anything else: "forever", "active", "10m" (s, m, h, d, w), seconds > 0, or a timedelta."""
    seconds: float | None = None
    if isinstance(scope, timedelta):
        seconds = scope.total_seconds()
    elif isinstance(scope, int | float) and not isinstance(scope, bool):
        seconds = float(scope)
    elif isinstance(scope, str):
        try:
            seconds = parse_duration(scope, "dedupe scope")
        except ConfigError:
            seconds = None
    if seconds is None or not 0 < seconds <= MAX_DEDUPE_PERIOD:  # NaN too
        raise InvalidJob("dedupe scope must be 'forever', 'active' or a period ('10m', '1h', seconds or a timedelta, "
                         f"more than 0 and at most {MAX_DEDUPE_PERIOD:g} s), got {scope!r}")
    return max(1, math.ceil(seconds * 1_000_000))


def check_fairness_key(key: object) -> str:
    """``key`` if it is a fairness key mysqlq stores: a string of 1 to MAX_FAIRNESS_KEY printable
    characters; InvalidJob says what is wrong."""
    if not isinstance(key, str) or not 0 < len(key) <= MAX_FAIRNESS_KEY or not key.isprintable():
        shown = f"{len(key)} characters" if isinstance(key, str) and len(key) > MAX_FAIRNESS_KEY else repr(key)
        raise InvalidJob(f"fairness key must be a string of 1 to {MAX_FAIRNESS_KEY} printable characters, got {shown}")
    return key


def check_tags(tags: object) -> list[str]:
    """``tags`` as a list without repeats, in the order given; InvalidJob says what is wrong."""
    if isinstance(tags, str | bytes) or not isinstance(tags, Sequence | set | frozenset):
        raise InvalidJob(f"tags must be a list of strings, got {tags!r}")
    for tag in tags:
        if not isinstance(tag, str) or not 0 < len(tag) <= MAX_TAG_LENGTH or not tag.isprintable() \
                or any(c.isspace() or c in '"\\' for c in tag):
            raise InvalidJob(f"a tag must be a string of 1 to {MAX_TAG_LENGTH} printable characters without "
                             f"spaces, quotes or backslashes, got {tag!r}")
    found = list(dict.fromkeys(tags))
    if len(found) > MAX_TAGS:
        raise InvalidJob(f"a job may have at most {MAX_TAGS} tags, got {len(found)}")
    return found


def encode_tags(tags: object) -> str:
    """The tags as the JSON array stored in mysqlq_jobs.tags, after :func:`check_tags`."""
    return _ENCODER.encode(check_tags(tags))


def decode_tags(stored: str | bytes | None) -> list[str]:
    """A stored tags column back as a list ([] for NULL)."""
    return [] if stored is None else [str(tag) for tag in json.loads(stored)]


# Delays up to this many seconds (about 31 years) end long before year 9999: no clock reading needed.
PLAINLY_VALID_DELAY = 1e9


def check_delay(delay: object) -> None:
    """Refuse a delay that is not a number of seconds the schema's run_at can hold (NaN, inf, 1e20...)."""
    if (type(delay) is float or type(delay) is int) and 0 <= delay <= PLAINLY_VALID_DELAY:
        return
    latest = (LATEST_RUN_AT - datetime.now(UTC).replace(tzinfo=None)).total_seconds()
    if isinstance(delay, bool) or not isinstance(delay, int | float) or not 0 <= delay <= latest:
        raise InvalidJob(f"delay must be a number of seconds >= 0 that ends before year 9999 (at most "
                         f"{latest:.4g}), got {delay!r}")


def check_run_at(moment: object) -> datetime:
    """``run_at`` as the naive UTC time the schema stores, refusing what DATETIME(6) cannot hold."""
    if not isinstance(moment, datetime):
        raise InvalidJob(f"run_at must be a datetime, got {moment!r}")
    naive = utc_naive(moment)
    if not EARLIEST_RUN_AT <= naive <= LATEST_RUN_AT:
        raise InvalidJob(f"run_at must be between {EARLIEST_RUN_AT:%Y-%m-%d} and {LATEST_RUN_AT:%Y-%m-%d}, "
                         f"got {naive.isoformat()}")
    return naive


# One encoder made once (``json.dumps`` with options builds a new one per call: it runs per job).
_ENCODER = json.JSONEncoder(separators=(",", ":"), ensure_ascii=False, allow_nan=False)


def encode_payload(payload: object, limit: int) -> bytes:
    """JSON-encode a payload, refusing what JSON cannot hold (NaN and Infinity included: they are not
    JSON), what is nested too deeply to encode, and what is over the size limit."""
    return _encode(payload, limit, "payload", "; the limit is {limit} (max_payload_bytes)", InvalidJob)


def encode_result(value: object, limit: int) -> bytes | None:
    """A handler's return value as its job's stored result: None (nothing stored, nothing written)
    for None; JSON up to ``limit`` bytes; else ResultNotStored saying why."""
    if value is None:
        return None
    return _encode(value, limit, "the handler's return value", " as JSON; the limit is {limit} (--result-max-bytes)",
                   ResultNotStored)


def _encode(value: object, limit: int, what: str, over: str, error: type[Exception]) -> bytes:
    try:
        data = _ENCODER.encode(value).encode()
    except (TypeError, ValueError) as exc:
        raise error(f"{what} cannot be stored as JSON: {exc}") from None
    except RecursionError:
        raise error(f"{what} is nested too deeply to be stored as JSON") from None
    if len(data) > limit:
        raise error(f"{what} is {len(data)} bytes" + over.format(limit=limit))
    return data


def _not_json(constant: str) -> Any:
    raise ValueError(f"{constant} is not JSON")


_STRICT = json.JSONDecoder(parse_constant=_not_json)
_SCAN = _STRICT.scan_once  # type: ignore[attr-defined]  # the decoder's own scanner (C): decode() is it plus checks for whitespace around


def decode_payload(data: bytes) -> Any:
    """Decode a stored payload; ValueError for anything that is not strict JSON: bad bytes, NaN,
    Infinity and -Infinity (Python's json reads those, but they are not JSON), or nesting too
    deep to decode. A worker marks such a job dead at once: no attempt can succeed."""
    return loads_strict(data)


def _first_loads(document: str | bytes) -> Any:
    """orjson.loads, imported at the first decode (with what it imports, 3 ms that a producer that
    never reads a payload back does not spend)."""
    global _fast_loads
    import orjson

    _fast_loads = orjson.loads
    return _fast_loads(document)


_fast_loads: Callable[[str | bytes], Any] = _first_loads


def load_decoder() -> None:
    """Import the payload decoder now (a worker, before its first job: the import is not that job's
    time, which sizes the next claims)."""
    if _fast_loads is _first_loads:
        _first_loads(b"0")


def loads_strict(document: str | bytes) -> Any:
    """``json.loads`` that accepts only JSON: ValueError for NaN/Infinity and for nesting too deep.

    orjson reads what it can (every compact document mysqlq writes, two to three times quicker than
    the standard decoder: this runs per job); what it refuses goes to the standard decoder, which
    reads the rest of JSON as ``json.loads`` does (integers beyond 64 bits, numbers too large for a
    float, lone surrogate escapes) and says what is wrong with anything else.
    """
    try:
        return _fast_loads(document)
    except json.JSONDecodeError:  # orjson's error is one
        pass
    text = document.decode() if isinstance(document, bytes) else document
    try:
        try:
            value, end = _SCAN(text, 0)  # one compact value
        except StopIteration:
            end = -1  # leading whitespace, or nothing that starts a value: decode() says which
        if end == len(text):
            return value
        return _STRICT.decode(text)  # whitespace around the value, or extra data after it
    except RecursionError:
        raise ValueError("nested too deeply") from None


def utc_naive(moment: datetime) -> datetime:
    """The UTC wall time the database stores (naive datetimes are taken to be UTC already)."""
    if moment.tzinfo is not None:
        moment = moment.astimezone(UTC).replace(tzinfo=None)
    return moment


@dataclass(frozen=True)
class JobState:
    """Where a job stands, as :meth:`mysqlq.Producer.job` reads it: its status, attempts and times
    (UTC), the worker that ran it last, its last error (a summary line, then the traceback) and,
    once done, what its handler returned (``result``, decoded from the stored JSON)."""

    id: int
    queue: str
    handler: str
    status: str
    priority: int
    attempts: int
    max_attempts: int
    worker: str | None
    enqueued_at: datetime
    run_at: datetime
    started_at: datetime | None
    finished_at: datetime | None
    error: str | None
    result_json: bytes | None  # the stored JSON; None when the handler returned nothing
    payload_json: bytes = b"null"  # the job's payload as stored
    dedupe_key: str | None = None

    @property
    def payload(self) -> Any:
        """The job's payload, decoded (EncryptedValue when it is encrypted with a key not configured here)."""
        return loads_strict(plain(self.payload_json, "payload"))

    @property
    def result(self) -> Any:
        """The handler's return value (None when it returned nothing, or has not finished)."""
        return None if self.result_json is None else loads_strict(plain(self.result_json, "result"))


def opened(state: JobState, keys: Keyring | None) -> JobState:
    """``state`` as a reader holding ``keys`` sees it: its payload, result and error decrypted where
    they are encrypted and the keys open them. A payload or result they cannot open stays as stored
    (reading it raises EncryptedValue); an error becomes ``(encrypted with key k1)``."""
    sealed = [value for value in (state.payload_json, state.result_json, state.error) if key_id_of(value)]
    if not sealed:
        return state
    payload = open_json(state.payload_json, keys, "payload", state.id, state.queue, state.handler)
    result = open_json(state.result_json, keys, "result", state.id, state.queue, state.handler)
    return dataclasses.replace(
        state, payload_json=payload if isinstance(payload, bytes) else state.payload_json,
        result_json=result if isinstance(result, bytes) or result is None else state.result_json,
        error=open_error_text(state.error, state.id, keys))


@dataclass(frozen=True)
class Parent:
    """A job that another was enqueued after, as that job's handler sees it (``ctx.parents``): its
    id, how it ended and, when done, what its handler returned (``result``, decoded)."""

    id: int
    status: str
    result_json: bytes | None

    @property
    def result(self) -> Any:
        return None if self.result_json is None else loads_strict(plain(self.result_json, "result"))


def plain(stored: bytes, what: str) -> bytes:
    """``stored`` when it is not encrypted (a reader with the keys was given it opened already);
    else EncryptedValue naming the key it needs."""
    key_id = key_id_of(stored)
    if key_id is not None:
        raise EncryptedValue(missing_key(what, key_id), key_id)
    return stored


class ClaimedJob(NamedTuple):
    """A job as a worker holds it after a claim. A named tuple: a claimed row becomes one in C
    (:func:`claimed_jobs`), a hundred of them per claim."""

    id: int
    queue: str
    handler: str
    payload: bytes
    attempt: int
    max_attempts: int
    time_limit: float | None
    concurrency_key: str | None = None  # see mysqlq.worker.intake.concurrency_admission
    snoozes: int = 0  # how often its handler snoozed it so far (mysqlq.Snooze)
    tags: str | None = None  # as stored: a JSON array (None: no tags)
    trace_context: str | None = None  # the span it was enqueued in (mysqlq.core.tracing; None: none)
    after_others: int = 0  # 1: enqueued after other jobs (a workflow's callback or step)
    keeps_key: int = 0  # 1: its dedupe key is kept "forever", so done it stays live (mysqlq.store.claims)
    keyed: int = 0  # 1: it has a fairness key (mysqlq.worker.intake.fair_turns)


_as_claimed = partial(tuple.__new__, ClaimedJob)


def claimed_jobs(rows: Iterable[Sequence[Any]]) -> list[ClaimedJob]:
    """Claimed rows, their columns in the order of ClaimedJob's fields, as ClaimedJobs."""
    return list(map(_as_claimed, rows))
