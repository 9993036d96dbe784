"""mysqlq: a durable job queue on the MySQL or MariaDB you already run."""

from __future__ import annotations

from mysqlq.core.config import Dsn, Settings
from mysqlq.core.errors import (
    ConfigError,
    DatabaseUnavailable,
    HandlerNotFound,
    InvalidJob,
    JobCancelled,
    MysqlqError,
    NotFound,
    ResultNotStored,
    SchemaError,
    Snooze,
)
from mysqlq.core.handlers import handler
from mysqlq.core.jobs import Job, JobState, Parent
from mysqlq.hint import notify
from mysqlq.producer.enqueue import Producer
from mysqlq.producer.outbox import Transaction, enqueue_on
from mysqlq.producer.workflows import Group
from mysqlq.worker.running.context import JobContext

__all__ = [
    "ConfigError",
    "DatabaseUnavailable",
    "Dsn",
    "Group",
    "HandlerNotFound",
    "InvalidJob",
    "Job",
    "JobCancelled",
    "JobContext",
    "JobState",
    "MysqlqError",
    "NotFound",
    "Parent",
    "Producer",
    "ResultNotStored",
    "SchemaError",
    "Settings",
    "Snooze",
    "Transaction",
    "enqueue_on",
    "handler",
    "notify",
]
