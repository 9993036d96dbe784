"""Logging: structlog configured once, by the CLI, as console lines, JSON or journal entries."""

from __future__ import annotations

import logging
import os
import sys
from typing import Any

import structlog

FORMATS = ("auto", "console", "json", "journal")


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


def configure(fmt: str = "auto", level: str = "info") -> str:
    """Configure structlog for the whole process; returns the format chosen for ``auto``."""
    if fmt == "auto":
        fmt = "journal" if stderr_is_journal() else "console"
    numeric = logging.getLevelNamesMapping()[level.upper()]
    processors: list[Any] = [
        structlog.contextvars.merge_contextvars,
        structlog.processors.add_log_level,
    ]
    if fmt == "journal":
        from . import journal

        processors += [structlog.processors.format_exc_info, journal.JournalRenderer()]
        factory: Any = journal.logger_factory
    elif fmt == "json":
        processors += [structlog.processors.TimeStamper(fmt="iso", utc=True), structlog.processors.format_exc_info,
                       structlog.processors.JSONRenderer()]
        factory = structlog.PrintLoggerFactory(sys.stderr)
    else:
        processors += [
            structlog.processors.TimeStamper(fmt="%Y-%m-%d %H:%M:%S", utc=False),
            structlog.dev.ConsoleRenderer(colors=sys.stderr.isatty()),
        ]
        factory = structlog.PrintLoggerFactory(sys.stderr)
    structlog.configure(
        processors=processors,
        wrapper_class=structlog.make_filtering_bound_logger(numeric),
        logger_factory=factory,
        cache_logger_on_first_use=True,
    )
    return fmt
