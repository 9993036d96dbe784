"""Logging: configured once, by the CLI, as console lines, JSON or journal entries; and, when mysqlq
is imported as a library, records of the standard ``logging`` module under ``mysqlq``.

Every part of mysqlq gets its logger from :func:`get_logger`. Until the CLI calls :func:`configure`,
those loggers hand their events to ``logging.getLogger("mysqlq.…")``, where the application's own
logging configuration decides what is shown (nothing, by default: the ``mysqlq`` logger has a
``NullHandler``). Once it has, they write their lines themselves (:class:`Lines`), and a handler's
``ctx.log`` is a structlog logger writing the same lines (:func:`for_handler`); structlog is
imported only then, at a handler's first use of it. mysqlq never configures structlog behind an
application's back.
"""

from __future__ import annotations

import atexit
import json
import logging
import os
import sys
import time
import traceback
from collections.abc import Callable, Iterable, MutableMapping, Sequence
from datetime import UTC, datetime
from itertools import chain
from typing import Any, Protocol, TextIO

from mysqlq.core import systemdbinding
from mysqlq.core.logvalues import FLOAT

FORMATS = ("auto", "console", "json", "journal")
# LogRecord's own attributes: a field of the same name is passed on with a trailing underscore.
_RECORD_KEYS = frozenset(vars(logging.LogRecord("", 0, "", 0, "", None, None))) | {"message", "asctime"}

logging.getLogger("mysqlq").addHandler(logging.NullHandler())

_generation = 0  # bumped by configure(): loggers made before it resolve again
_configured = False


def _to_record(event_dict: MutableMapping[str, Any]) -> dict[str, Any]:
    """A library event as a record's parts: ``event key=value …`` as the message, the fields as the
    record's attributes (``record.job_id``), the traceback as ``exc_info``."""
    event = str(event_dict.pop("event", ""))
    exc_info = event_dict.pop("exc_info", None)
    fields = " ".join(f"{key}={_value(value)}" for key, value in event_dict.items())
    extra = {f"{key}_" if key in _RECORD_KEYS else key: value for key, value in event_dict.items()}
    return {"msg": f"{event} {fields}".rstrip(), "extra": extra, "exc_info": exc_info}


def _structlog() -> Any:
    """structlog, imported when a handler first uses ``ctx.log`` under the CLI: mysqlq's own events
    never need it, and its import (with asyncio's) is a third of a worker's start-up."""
    import structlog

    return structlog


class Log(Protocol):
    """What mysqlq's code asks of a logger: the level methods and ``bind`` (a :class:`Logger`, the
    :class:`Lines` it binds to once the CLI configured logging, or a test's recorder)."""

    def debug(self, event: str, **fields: object) -> object: ...
    def info(self, event: str, **fields: object) -> object: ...
    def warning(self, event: str, **fields: object) -> object: ...
    def error(self, event: str, **fields: object) -> object: ...
    def exception(self, event: str, **fields: object) -> object: ...
    def bind(self, **fields: object) -> Log: ...


class _Levels:
    """The level methods of mysqlq's loggers, each one call of ``_log`` (``exception`` adds the
    traceback being handled)."""

    __slots__ = ()

    def _log(self, level: str, number: int, event: str, fields: dict[str, Any]) -> None:
        raise NotImplementedError

    def debug(self, event: str, **fields: object) -> None:
        self._log("debug", logging.DEBUG, event, fields)

    def info(self, event: str, **fields: object) -> None:
        self._log("info", logging.INFO, event, fields)

    def warning(self, event: str, **fields: object) -> None:
        self._log("warning", logging.WARNING, event, fields)

    def error(self, event: str, **fields: object) -> None:
        self._log("error", logging.ERROR, event, fields)

    def exception(self, event: str, **fields: object) -> None:
        fields.setdefault("exc_info", True)
        self._log("error", logging.ERROR, event, fields)


class _Records(_Levels):
    """A library logger's events as records of the standard ``logging`` module (see :func:`_to_record`),
    until the CLI configures logging."""

    __slots__ = ("_context", "_logger")

    def __init__(self, name: str, context: dict[str, Any]) -> None:
        self._logger = logging.getLogger(name)
        self._context = context

    def _log(self, level: str, number: int, event: str, fields: dict[str, Any]) -> None:
        if self._logger.isEnabledFor(number):
            record = _to_record({"event": event, **self._context, **fields})
            # stacklevel: the record names the line of mysqlq that logged (through Logger's method).
            self._logger.log(number, record["msg"], extra=record["extra"], exc_info=record["exc_info"], stacklevel=4)


class Logger:
    """A logger that settles, at first use, on the CLI's lines (:class:`Lines`) once it configured
    logging, or on the standard ``logging`` module (see the module's docstring); ``bind`` adds fields
    as structlog's does."""

    __slots__ = ("_context", "_generation", "_logger", "_name")

    def __init__(self, name: str, context: dict[str, Any] | None = None) -> None:
        self._name = name
        self._context = context or {}
        self._logger: _Levels | None = None
        self._generation = -1

    def _resolve(self) -> _Levels:
        if self._generation != _generation or self._logger is None:
            self._logger = (Lines if _configured else _Records)(self._name, self._context)
            self._generation = _generation
        return self._logger

    def bind(self, **fields: object) -> Lines | Logger:
        """A logger with these fields too: once the CLI has configured logging, a :class:`Lines` (the
        worker binds one per batch and logs every job through it, so no proxy stands in the way)."""
        context = {**self._context, **fields}
        if _configured:
            return Lines(self._name, context)
        return Logger(self._name, context)

    def debug(self, event: str, **fields: object) -> None:
        self._resolve().debug(event, **fields)

    def info(self, event: str, **fields: object) -> None:
        self._resolve().info(event, **fields)

    def warning(self, event: str, **fields: object) -> None:
        self._resolve().warning(event, **fields)

    def error(self, event: str, **fields: object) -> None:
        self._resolve().error(event, **fields)

    def exception(self, event: str, **fields: object) -> None:
        self._resolve().exception(event, **fields)


class Lines(_Levels):
    """A logger bound to fields, once the CLI has configured logging: each event at or above the
    configured level becomes one line (or journal entry) written by :func:`_emit`. The fields come
    first, then the event's own, as structlog orders them."""

    __slots__ = ("_context", "_name")

    def __init__(self, name: str, context: dict[str, Any]) -> None:
        self._name = name
        self._context = context

    @property
    def context(self) -> dict[str, Any]:
        return self._context

    def bind(self, **fields: object) -> Lines:
        return Lines(self._name, {**self._context, **fields})

    def _log(self, level: str, number: int, event: str, fields: dict[str, Any]) -> None:
        if number >= _threshold:
            event_dict = {**self._context, **fields}
            event_dict["event"] = event
            _emit(level, event_dict)


def get_logger(name: str) -> Logger:
    """mysqlq's logger called ``name`` (``mysqlq.worker``, ``mysqlq.db``, …)."""
    return Logger(name)


def stderr_is_journal() -> bool:
    """True when systemd connected stderr to the journal (JOURNAL_STREAM names stderr's device:inode).

    Comparing, rather than only testing that the variable is set, keeps a child process whose
    stderr was redirected (inherited environment, different stream) on console output.
    """
    stream = os.environ.get("JOURNAL_STREAM", "")
    if not stream:
        return False
    try:
        stat = os.fstat(sys.stderr.fileno())
    except (AttributeError, OSError, ValueError):
        return False
    return stream == f"{stat.st_dev}:{stat.st_ino}"


class ConsoleLine:
    """Renders ``2026-11-21 00:44:38 info    job.done job_id=42 queue=default ...``.

    Written for every job, so it is kept cheap: the timestamp is formatted once per second and
    values are written as they are (quoted only when they hold spaces).
    """

    def __init__(self) -> None:
        self._second = -1
        self._stamp = ""

    def stamp(self) -> str:
        second = int(time.time())
        if second != self._second:
            self._second, self._stamp = second, time.strftime("%Y-%m-%d %H:%M:%S", time.localtime(second))
        return self._stamp

    def line(self, level: str, event_dict: dict[str, Any]) -> str:
        """One event's line (``event_dict``: its fields, then ``event`` and ``exception``)."""
        self.stamp()
        event = event_dict.pop("event", "")
        trace = event_dict.pop("exception", None)
        fields = " ".join(f"{key}={_value(value)}" for key, value in event_dict.items())
        line = f"{self._stamp} {level:<7} {event} {fields}".rstrip()
        return f"{line}\n{trace}" if trace else line


    def many(self, level: str, event: str, context: dict[str, Any], keys: Sequence[str],
             rows: Iterable[tuple[Any, ...]]) -> str:
        """The lines of one event per row, as :meth:`line` renders each (context first), joined."""
        head = " ".join([f"{self.stamp()} {level:<7} {event}", *(f"{key}={_value(value)}"
                                                                 for key, value in context.items())])
        rows = list(rows)
        # A column whose values all show as they are (ints, words) or all are floats is formatted
        # directly; another goes through _value (quoting) value by value. Queues and handlers
        # repeat: few distinct values.
        try:
            specs = [_column_spec(column) for column in zip(*rows, strict=True)]
        except TypeError:  # a value that cannot be hashed (a list, a dict) is not a plain one anyway
            specs = [None] * len(keys)
        if None in specs:
            rows = [tuple(value if spec else _value(value) for value, spec in zip(row, specs, strict=True))
                    for row in rows]
        template = " ".join([head.replace("%", "%%"), *(key.replace("%", "%%") + "=" + (spec or "%s")
                                                        for key, spec in zip(keys, specs, strict=True))]) + "\n"
        return (template * len(rows)) % tuple(chain.from_iterable(rows))  # one formatting call, in C


def _column_spec(column: tuple[Any, ...]) -> str | None:
    """How ``many`` formats the values of ``column`` as _value shows each (their types are looked at
    in C): ``%s`` for ints and for words none of which needs quotes, FLOAT for floats, None otherwise."""
    kinds = set(map(type, column))
    if kinds <= _INT:
        return "%s"
    if kinds <= _FLOAT:
        return FLOAT
    if kinds <= _STR and all(_plain(value) for value in set(column)):
        return "%s"
    return None


_INT, _FLOAT, _STR = frozenset([int]), frozenset([float]), frozenset([str])


def _plain(value: str) -> bool:
    """Whether _value shows the string ``value`` as it is."""
    return value != "" and " " not in value and "\n" not in value


def _value(value: object) -> str:
    if type(value) is int:  # ids, attempts: never quoted
        return str(value)
    if type(value) is float:  # durations
        return FLOAT % value
    text = str(value)
    return repr(text) if not text or " " in text or "\n" in text else text


def _exc_info(value: object) -> Any:
    """An event's ``exc_info`` as a (type, exception, traceback) tuple, or None: True means the
    exception being handled, an exception means itself."""
    if isinstance(value, BaseException):
        return type(value), value, value.__traceback__
    if isinstance(value, tuple) and len(value) == 3 and isinstance(value[1], BaseException):
        return value
    if value:
        current = sys.exc_info()
        return current if current[1] is not None else None
    return None


def _format_exc(event_dict: dict[str, Any]) -> None:
    """Replace an event's ``exc_info`` by its traceback as text, under ``exception``."""
    info = _exc_info(event_dict.pop("exc_info", None))
    if info is not None:
        event_dict["exception"] = "".join(traceback.format_exception(*info)).rstrip("\n")


def _json_value(value: object) -> str:
    """What JSON output shows for a value json cannot encode: its repr."""
    return repr(value)


def _emit_nothing(level: str, event_dict: dict[str, Any]) -> None:
    """Before :func:`configure`: a :class:`Lines` made by hand writes nothing."""


_buffer: TextIO | None = None
# How a configured event is written: (level, event_dict) with the fields first, then "event".
_emit: Callable[[str, dict[str, Any]], None] = _emit_nothing
# What log_many() writes through when the CLI configured console or journal output; None otherwise.
_many: Callable[[str, str, dict[str, Any], Sequence[str], Iterable[tuple[Any, ...]]], None] | None = None
_threshold = 0  # the configured level, as a number: events below it are not written
LEVELS = logging.getLevelNamesMapping()


def log_many(log: Log, level: str, event: str, keys: Sequence[str], rows: Iterable[tuple[Any, ...]]) -> None:
    """Log ``event`` once per row, the row's values named by ``keys``, through ``log`` (a logger of
    :func:`get_logger`, or one it bound): the same entries, in order, as calling ``log.<level>(event,
    key=value, ...)`` for each row, rendered for the whole batch at once. For the worker's one line
    per job."""
    many = _many
    if many is None or not isinstance(log, Lines):  # the library's records, or JSON: event by event
        method = getattr(log, level)
        for row in rows:
            method(event, **dict(zip(keys, row, strict=True)))
        return
    if LEVELS[level.upper()] >= _threshold:
        many(level, event, log.context, keys, rows)


def flush() -> None:
    """Write out buffered log lines (cheap when there are none)."""
    if _buffer is not None:
        _buffer.flush()


def _buffered_stderr() -> TextIO:
    global _buffer
    if _buffer is None:
        raw = open(sys.stderr.fileno(), "w", buffering=1 << 16, encoding="utf-8",  # noqa: SIM115
                   errors="replace", closefd=False)
        _buffer = raw
        atexit.register(flush)
    return _buffer


def fatal(line: str, fmt: str | None = None, **fields: str | None) -> None:
    """Report the one line a command fails with, at error priority wherever it goes.

    Under systemd stderr is a journal stream that journald files at info, so ``journalctl -p err``
    would miss why a worker cannot start. With journal output the line becomes an entry of its own
    with PRIORITY=3 (and goes to stderr too when stderr is a terminal or a file); console or JSON
    output into a journal stream gets the ``<3>`` prefix that journald reads as the priority.
    """
    flush()
    journal_stream = stderr_is_journal()
    if fmt == "journal" or (fmt in (None, "auto") and journal_stream):
        try:
            if systemdbinding.available():  # else stderr is all there is
                from mysqlq.core import journal

                extra = [f"{key.upper()}={value}" for key, value in fields.items() if value is not None]
                journal.sendv(f"MESSAGE={line}", "PRIORITY=3", "SYSLOG_IDENTIFIER=mysqlq",
                              "MYSQLQ_EVENT=command.failed", *extra)
                if journal_stream:
                    return
        except OSError:
            pass  # no journald to talk to: stderr is all there is
    prefix = "<3>" if journal_stream else ""
    sys.stderr.write(f"{prefix}{line}\n")
    sys.stderr.flush()


def configure(fmt: str = "auto", level: str = "info") -> str:
    """Configure logging for the whole process (the CLI owns it); returns the format chosen for ``auto``."""
    if fmt == "auto":  # without systemd's binding: console lines, into the journal stream (a worker under
        # systemd then stops with the line saying what to install)
        fmt = "journal" if stderr_is_journal() and systemdbinding.available() else "console"
    elif fmt == "journal":
        systemdbinding.require()
    global _emit, _many, _threshold, _configured, _generation, _handler_config
    numeric = LEVELS[level.upper()]
    if fmt == "journal":
        from mysqlq.core import journal

        def emit(level: str, event_dict: dict[str, Any]) -> None:
            _format_exc(event_dict)
            journal.send(level, event_dict)

        many: Callable[[str, str, dict[str, Any], Sequence[str], Iterable[tuple[Any, ...]]], None] | None = (
            journal.send_many)
    else:
        write = _buffered_stderr().write
        if fmt == "json":
            def emit(level: str, event_dict: dict[str, Any]) -> None:
                event_dict["level"] = level
                event_dict["timestamp"] = datetime.now(UTC).isoformat().replace("+00:00", "Z")
                _format_exc(event_dict)
                write(json.dumps(event_dict, default=_json_value) + "\n")

            many = None
        else:
            console = ConsoleLine()

            def emit(level: str, event_dict: dict[str, Any]) -> None:
                _format_exc(event_dict)
                write(console.line(level, event_dict) + "\n")

            def many(level: str, event: str, context: dict[str, Any], keys: Sequence[str],
                     rows: Iterable[tuple[Any, ...]]) -> None:
                write(console.many(level, event, context, keys, rows))

    _emit, _many, _threshold = emit, many, numeric
    _configured, _generation, _handler_config = True, _generation + 1, -1
    return fmt


_handler_config = -1  # the generation structlog was last configured for (handlers' loggers)


def _drop_into_emit(logger: Any, name: str, event_dict: MutableMapping[str, Any]) -> Any:
    """structlog's last processor for handlers' loggers: the event goes out as mysqlq's own do."""
    level = event_dict.pop("level", name)
    _emit(level, dict(event_dict))
    raise _structlog().DropEvent


def for_handler(log: Log, **fields: object) -> Any:
    """A handler's ``ctx.log``: under the CLI, a structlog logger bound to ``log``'s fields and these,
    writing what mysqlq's own loggers write (structlog is imported and configured for it at the first
    call); as a library, ``log.bind(**fields)``."""
    if not isinstance(log, Lines):
        return log.bind(**fields)
    _configure_structlog()
    return _structlog().get_logger(log._name).bind(**log.context, **fields)


def adopt_structlog() -> None:
    """Under the CLI, once structlog is imported (a handler's module that logs with it directly):
    its loggers write mysqlq's lines too, as ``ctx.log`` does. Without it, nothing is imported."""
    if _configured and _handler_config != _generation and "structlog" in sys.modules:
        _configure_structlog()


def _configure_structlog() -> None:
    """structlog configured for this process to write through :func:`_emit` (the CLI owns it)."""
    structlog = _structlog()
    global _handler_config
    if _handler_config != _generation:
        structlog.configure(
            processors=[structlog.processors.add_log_level, _drop_into_emit],
            wrapper_class=structlog.make_filtering_bound_logger(_threshold),
            logger_factory=structlog.ReturnLoggerFactory(),
            cache_logger_on_first_use=True,
        )
        _handler_config = _generation
