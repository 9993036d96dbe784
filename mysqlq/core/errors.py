"""Exceptions mysqlq raises; every user-facing one carries a one-line message."""

from __future__ import annotations


class MysqlqError(Exception):
    """Base class: a problem the user can act on, reported as one line without a traceback."""


class ConfigError(MysqlqError):
    """A setting or DSN that cannot be used."""


class InvalidJob(MysqlqError):
    """A job that cannot be enqueued as given (bad payload, name, delay...)."""


class DatabaseUnavailable(MysqlqError):
    """The server cannot be reached or refuses the credentials."""

    def __init__(self, message: str, *, transient: bool) -> None:
        super().__init__(message)
        self.transient = transient  # True when waiting may cure it (server down or restarting)


class SchemaError(MysqlqError):
    """The schema is missing, older or newer than this version of mysqlq expects."""


class NotFound(MysqlqError):
    """A job, queue or handler named by the user does not exist."""


class HandlerNotFound(MysqlqError):
    """No installed entry point provides the handler a job names."""

    def __init__(self, name: str) -> None:
        super().__init__(
            f"no installed entry point provides handler {name!r} "
            "(group 'mysqlq.handlers'; see `mysqlq handlers`)"
        )
        self.name = name


class HandlerLoadError(MysqlqError):
    """An entry point exists but importing its target failed."""


class ResultNotStored(MysqlqError):
    """A handler returned what cannot be stored as its job's result (not JSON, or over the size limit):
    the job fails with this error, like a handler that raised it."""


class JobTimeout(BaseException):
    """Raised inside a handler that ran past its time limit.

    A BaseException so that a handler's ``except Exception`` cannot swallow it.
    """


MAX_SNOOZE = 366 * 86400.0  # seconds a job may be snoozed for at once (a year)


class Snooze(Exception):
    """Raised by a handler (``raise mysqlq.Snooze(30)``, or ``ctx.snooze(30)``) to end this run without
    failing: the job runs again ``seconds`` from now, its attempt not spent, e.g. after HTTP 429 with
    ``Retry-After: 30``. A transactional handler's writes roll back. A job snoozed more often than the
    worker's ``--max-snoozes`` ends dead. (Not a MysqlqError: it belongs to the handler's flow.)"""

    def __init__(self, seconds: float) -> None:
        if isinstance(seconds, bool) or not isinstance(seconds, int | float) or not 0 <= seconds <= MAX_SNOOZE:
            raise ValueError(f"Snooze takes a number of seconds from 0 to {MAX_SNOOZE:g}, got {seconds!r}")
        super().__init__(f"snoozed for {seconds:g} s")
        self.seconds = float(seconds)


class JobCancelled(Exception):
    """Raised by ``ctx.stop_if_cancelled()`` in a handler whose job was cancelled while it ran; the
    job stays cancelled and is not retried. (Not a MysqlqError: it belongs to the handler's flow.)"""
