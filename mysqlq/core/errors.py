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


class JobCancelled(Exception):
    """Raised by ``ctx.stop_if_cancelled()`` in a handler whose job was cancelled while it ran; the
    job stays cancelled and is not retried. (Not a MysqlqError: it belongs to the handler's flow.)"""
