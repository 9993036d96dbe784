"""mysqlq: a durable job queue on the MySQL or MariaDB you already run."""

from __future__ import annotations

from .config import Dsn, Settings
from .context import JobContext
from .errors import (
    ConfigError,
    DatabaseUnavailable,
    HandlerNotFound,
    InvalidJob,
    MysqlqError,
    NotFound,
    SchemaError,
)
from .handlers import handler
from .hint import notify
from .jobs import Job
from .producer import Producer, Transaction, enqueue_on

__all__ = [
    "ConfigError",
    "DatabaseUnavailable",
    "Dsn",
    "HandlerNotFound",
    "InvalidJob",
    "Job",
    "JobContext",
    "MysqlqError",
    "NotFound",
    "Producer",
    "SchemaError",
    "Settings",
    "Transaction",
    "enqueue_on",
    "handler",
    "notify",
]
