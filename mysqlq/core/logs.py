"""Logging: structlog configured once, by the CLI, as console lines, JSON or journal entries; and,
when mysqlq is imported as a library, records of the standard ``logging`` module under ``mysqlq``.

Every part of mysqlq gets its logger from :func:`get_logger`. Until the CLI calls :func:`configure`,
those loggers hand their events to ``logging.getLogger("mysqlq.…")``, where the application's own
logging configuration decides what is shown (nothing, by default: the ``mysqlq`` logger has a
``NullHandler``). mysqlq never configures structlog behind an application's back.
"""

from __future__ import annotations

import atexit
import logging
import os
import sys
import time
from collections.abc import Callable, Iterable, MutableMapping, Sequence
from itertools import chain
from typing import Any, TextIO

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
    """structlog, imported once the CLI configures logging: an application that imports mysqlq as a
    library never needs it (its events become ``logging`` records without it), and the import is
    about half of ``import mysqlq``'s time."""
    import structlog

    return structlog


class _Records:
    """A library logger's events as records of the standard ``logging`` module (see :func:`_to_record`),
    until the CLI configures logging."""

    __slots__ = ("_context", "_logger")

    def __init__(self, name: str, context: dict[str, Any]) -> None:
        self._logger = logging.getLogger(name)
        self._context = context

    def _emit(self, level: int, event: str, fields: dict[str, Any], exc_info: bool = False) -> None:
        if self._logger.isEnabledFor(level):
            record = _to_record({"event": event, **self._context, **fields})
            # stacklevel: the record names the line of mysqlq that logged (through Logger's method).
            self._logger.log(level, record["msg"], extra=record["extra"], exc_info=record["exc_info"] or exc_info,
                             stacklevel=4)

    def debug(self, event: str, **fields: Any) -> None:
        self._emit(logging.DEBUG, event, fields)

    def info(self, event: str, **fields: Any) -> None:
        self._emit(logging.INFO, event, fields)

    def warning(self, event: str, **fields: Any) -> None:
        self._emit(logging.WARNING, event, fields)

    def error(self, event: str, **fields: Any) -> None:
        self._emit(logging.ERROR, event, fields)

    def exception(self, event: str, **fields: Any) -> None:
        self._emit(logging.ERROR, event, fields, exc_info=True)


class Logger:
    """A logger that settles, at first use, on structlog as the CLI configured it or on the standard
    ``logging`` module (see the module's docstring); ``bind`` adds fields as structlog's does."""

    __slots__ = ("_context", "_generation", "_logger", "_name")

    def __init__(self, name: str, context: dict[str, Any] | None = None) -> None:
        self._name = name
        self._context = context or {}
        self._logger: Any = None
        self._generation = -1

    def _resolve(self) -> Any:
        if self._generation != _generation:
            if _configured:
                base = _structlog().get_logger(self._name)
                self._logger = base.bind(**self._context) if self._context else base
            else:
                self._logger = _Records(self._name, self._context)
            self._generation = _generation
        return self._logger

    def bind(self, **fields: Any) -> Any:
        """A logger with these fields too: once the CLI has configured logging, structlog's own (the
        worker binds one per batch and logs every job through it, so no proxy stands in the way)."""
        context = {**self._context, **fields}
        if _configured:
            return _structlog().get_logger(self._name).bind(**context)
        return Logger(self._name, context)

    def debug(self, event: str, **fields: Any) -> Any:
        return self._resolve().debug(event, **fields)

    def info(self, event: str, **fields: Any) -> Any:
        return self._resolve().info(event, **fields)

    def warning(self, event: str, **fields: Any) -> Any:
        return self._resolve().warning(event, **fields)

    def error(self, event: str, **fields: Any) -> Any:
        return self._resolve().error(event, **fields)

    def exception(self, event: str, **fields: Any) -> Any:
        return self._resolve().exception(event, **fields)


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

    def __call__(self, logger: Any, name: str, event_dict: MutableMapping[str, Any]) -> str:
        self.stamp()
        level = event_dict.pop("level", name)
        event = event_dict.pop("event", "")
        trace = event_dict.pop("exception", None)
        fields = " ".join(f"{key}={_value(value)}" for key, value in event_dict.items())
        line = f"{self._stamp} {level:<7} {event} {fields}".rstrip()
        return f"{line}\n{trace}" if trace else line


    def many(self, level: str, event: str, context: dict[str, Any], keys: Sequence[str],
             rows: Iterable[tuple[Any, ...]]) -> str:
        """The lines of one event per row, as :meth:`__call__` renders each (context first), joined."""
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


FLOAT = "%.6g"  # floats (durations, delays) to six significant digits: 0.000459, 12.5, 3600.12
_INT, _FLOAT, _STR = frozenset([int]), frozenset([float]), frozenset([str])


def _plain(value: Any) -> bool:
    """Whether _value shows the string ``value`` as it is."""
    return value != "" and " " not in value and "\n" not in value


def _value(value: Any) -> str:
    if type(value) is int:  # ids, attempts: never quoted
        return str(value)
    if type(value) is float:  # durations
        return FLOAT % value
    text = str(value)
    return repr(text) if not text or " " in text or "\n" in text else text


class BufferedLogger:
    """Writes rendered lines to stderr through a buffer that the worker flushes after each batch
    and before it waits (see :func:`flush`), instead of one system call per line."""

    def __init__(self, stream: TextIO) -> None:
        self._write = stream.write

    def msg(self, message: str) -> None:
        self._write(message + "\n")

    debug = info = warning = warn = error = critical = exception = fatal = log = msg


_buffer: TextIO | None = None
# What log_many() writes through when the CLI configured console or journal output; None otherwise.
_many: Callable[[str, str, dict[str, Any], Sequence[str], Iterable[tuple[Any, ...]]], None] | None = None
_threshold = 0  # the configured level, as a number: events below it are not written
LEVELS = logging.getLevelNamesMapping()


def log_many(log: Any, level: str, event: str, keys: Sequence[str], rows: Iterable[tuple[Any, ...]]) -> None:
    """Log ``event`` once per row, the row's values named by ``keys``, through ``log`` (a logger of
    :func:`get_logger`, or one it bound): the same entries, in order, as calling ``log.<level>(event,
    key=value, ...)`` for each row, without structlog's per-event chain of processors. For the
    worker's one line per job, written a batch at a time."""
    many = _many
    if many is None or isinstance(log, Logger):  # the library's records, or JSON: event by event
        method = getattr(log, level)
        for row in rows:
            method(event, **dict(zip(keys, row, strict=True)))
        return
    if LEVELS[level.upper()] >= _threshold:
        many(level, event, _structlog().get_context(log), keys, rows)


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
            from systemd import journal

            extra = {key.upper(): value for key, value in fields.items() if value is not None}
            journal.send(line, PRIORITY="3", SYSLOG_IDENTIFIER="mysqlq", MYSQLQ_EVENT="command.failed", **extra)
            if journal_stream:
                return
        except OSError:
            pass  # no journald to talk to: stderr is all there is
    prefix = "<3>" if journal_stream else ""
    sys.stderr.write(f"{prefix}{line}\n")
    sys.stderr.flush()


def configure(fmt: str = "auto", level: str = "info") -> str:
    """Configure structlog for the whole process (the CLI owns it); returns the format chosen for ``auto``."""
    if fmt == "auto":
        fmt = "journal" if stderr_is_journal() else "console"
    structlog = _structlog()
    numeric = LEVELS[level.upper()]
    processors: list[Any] = [structlog.processors.add_log_level]
    global _many, _threshold
    _many, _threshold = None, numeric
    if fmt == "journal":
        from mysqlq.core import journal

        processors += [structlog.processors.format_exc_info, journal.JournalRenderer()]
        factory: Any = journal.logger_factory
        _many = journal.send_many
    else:
        stream = _buffered_stderr()
        if fmt == "json":
            processors += [structlog.processors.TimeStamper(fmt="iso", utc=True),
                           structlog.processors.format_exc_info, structlog.processors.JSONRenderer()]
        else:
            console = ConsoleLine()
            processors += [structlog.processors.format_exc_info, console]

            def write_many(level: str, event: str, context: dict[str, Any], keys: Sequence[str],
                           rows: Iterable[tuple[Any, ...]]) -> None:
                stream.write(console.many(level, event, context, keys, rows))

            _many = write_many
        factory = lambda *args: BufferedLogger(stream)  # noqa: E731
    structlog.configure(
        processors=processors,
        wrapper_class=structlog.make_filtering_bound_logger(numeric),
        logger_factory=factory,
        cache_logger_on_first_use=True,
    )
    global _configured, _generation
    _configured, _generation = True, _generation + 1
    return fmt
