"""Handlers come only from entry points (group ``mysqlq.handlers``): listed without importing,
loaded by name on first use, cached. A database row can never make a worker import a module."""

from __future__ import annotations

import threading
from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Protocol, TypeVar

from mysqlq.core.errors import ConfigError, HandlerLoadError, HandlerNotFound
from mysqlq.core.rates import RateLimit, parse_rate

if TYPE_CHECKING:
    from importlib.metadata import EntryPoint

GROUP = "mysqlq.handlers"
MAX_CONCURRENCY_LIMIT = 10_000  # the schema keeps a waiting job's limit in a SMALLINT UNSIGNED
F = TypeVar("F", bound=Callable[..., Any])


class Handler(Protocol):
    """What a handler is: called with the decoded payload and the job's context."""

    def __call__(self, payload: Any, ctx: Any, /) -> Any: ...  # ctx: a mysqlq.JobContext


@dataclass(frozen=True)
class HandlerInfo:
    """An installed handler, as its entry point declares it (nothing imported)."""

    name: str
    target: str
    distribution: str


def _entry_points() -> dict[str, EntryPoint]:
    # Imported here: importlib.metadata costs an application that only enqueues 10-15 ms at import.
    from importlib.metadata import entry_points

    return {ep.name: ep for ep in entry_points(group=GROUP)}


def installed() -> list[HandlerInfo]:
    """Every installed handler, sorted by name, without importing any of them."""
    return [
        HandlerInfo(ep.name, ep.value, ep.dist.name if ep.dist else "?")
        for ep in sorted(_entry_points().values(), key=lambda ep: ep.name)
    ]


def handler(*, transactional: bool = False, time_limit: float | None = None,
            concurrency_limit: int | None = None, rate_limit: str | RateLimit | None = None,
            rate_key: Callable[[Any], Any] | None = None) -> Callable[[F], F]:
    """Mark a handler: ``transactional`` gives it ``ctx.conn`` inside the transaction that also
    completes the job; ``time_limit`` (seconds) overrides the worker's default for its jobs;
    ``concurrency_limit`` is how many of its jobs with the same concurrency key may run at once
    (1 when not given; jobs without a key are not limited); ``rate_limit`` (``"100/m"``, ``"5/s"``)
    is how many of its jobs may start in any window of the period, counted per ``rate_key(payload)``
    when given (e.g. ``lambda p: p["customer"]``: 5/s per customer), else for all its jobs at once.
    A bad value raises ConfigError."""
    if concurrency_limit is not None:
        check_concurrency_limit(concurrency_limit)
    rate = parse_rate(rate_limit) if rate_limit is not None else None
    if rate_key is not None and (rate is None or not callable(rate_key)):
        raise ConfigError("rate_key must be a function of the payload, given with a rate_limit")

    def mark(func: F) -> F:
        func.mysqlq_transactional = transactional  # type: ignore[attr-defined]
        func.mysqlq_time_limit = time_limit  # type: ignore[attr-defined]
        func.mysqlq_concurrency_limit = concurrency_limit  # type: ignore[attr-defined]
        func.mysqlq_rate_limit = rate  # type: ignore[attr-defined]
        func.mysqlq_rate_key = rate_key  # type: ignore[attr-defined]
        return func

    return mark


def is_transactional(func: Handler) -> bool:
    return bool(getattr(func, "mysqlq_transactional", False))


def declared_time_limit(func: Handler) -> float | None:
    value = getattr(func, "mysqlq_time_limit", None)
    return float(value) if value else None


def check_concurrency_limit(value: object) -> int:
    """A concurrency limit is a whole number of jobs from 1 to MAX_CONCURRENCY_LIMIT."""
    if isinstance(value, bool) or not isinstance(value, int) or not 1 <= value <= MAX_CONCURRENCY_LIMIT:
        raise ConfigError(f"concurrency_limit must be an integer from 1 to {MAX_CONCURRENCY_LIMIT}, got {value!r}")
    return value


def declared_rate_limit(func: Handler) -> tuple[RateLimit | None, Callable[[Any], Any] | None]:
    """The handler's rate limit and the function that picks a job's rate key (None, None: none)."""
    return getattr(func, "mysqlq_rate_limit", None), getattr(func, "mysqlq_rate_key", None)


def declared_concurrency_limit(func: Handler) -> int:
    """How many jobs of one concurrency key this handler runs at once (1 unless it declares more)."""
    value = getattr(func, "mysqlq_concurrency_limit", None)
    return 1 if value is None else int(value)


class Registry:
    """Loads handlers by name on first use and keeps them; misses are looked up again each time,
    so a handler installed during a rolling deploy is found without a restart."""

    def __init__(self) -> None:
        self._loaded: dict[str, Handler] = {}
        self._points: dict[str, EntryPoint] | None = None  # the installed entry points, as last read
        self._lock = threading.Lock()

    def preload(self) -> None:
        """Read the installed entry points now (a worker, as it starts), not at the first job: reading
        them costs tens of milliseconds. Nothing is imported."""
        with self._lock:
            if self._points is None:
                self._points = _entry_points()

    def resolve(self, name: str) -> Handler:
        found = self._loaded.get(name)
        if found is not None:
            return found
        with self._lock:
            points = self._points
            if points is None or name not in points:  # read again: a deploy may have installed it since
                points = self._points = _entry_points()
            point = points.get(name)
            if point is None:
                raise HandlerNotFound(name)
            try:
                loaded = point.load()
            except Exception as exc:
                dist = point.dist.name if point.dist else "an unknown distribution"
                raise HandlerLoadError(
                    f"handler {name!r} ({point.value}, from {dist}) failed to import: {type(exc).__name__}: {exc}"
                ) from exc
            if not callable(loaded):
                raise HandlerLoadError(f"handler {name!r} ({point.value}) is not callable")
            self._loaded[name] = loaded
            return loaded  # type: ignore[no-any-return]
