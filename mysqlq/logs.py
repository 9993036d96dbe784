"""Logging: structlog configured once, by the CLI, as console lines, JSON or journal entries."""

from __future__ import annotations

import logging
import os
import sys
from typing import Any

import structlog

FORMATS = ("auto", "console", "json", "journal")


def configure(fmt: str = "auto", level: str = "info") -> str:
    """Configure structlog for the whole process; returns the format chosen for ``auto``."""
    if fmt == "auto":
        fmt = "journal" if os.environ.get("JOURNAL_STREAM") else "console"
    numeric = logging.getLevelNamesMapping()[level.upper()]
    processors: list[Any] = [
        structlog.contextvars.merge_contextvars,
        structlog.processors.add_log_level,
    ]
    if fmt == "journal":
        from .journal import JournalRenderer

        processors.append(JournalRenderer())
        factory: Any = structlog.ReturnLoggerFactory()
    elif fmt == "json":
        processors += [structlog.processors.TimeStamper(fmt="iso", utc=True), structlog.processors.JSONRenderer()]
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
