"""The web server's connections: one per server thread, and a failure shown as a 503 page."""

from __future__ import annotations

import threading
from collections.abc import Callable
from typing import TypeVar

import MySQLdb
from werkzeug.exceptions import HTTPException

from mysqlq.core import logs
from mysqlq.core.config import Settings
from mysqlq.core.errors import MysqlqError
from mysqlq.core.errors import NotFound as JobNotFound
from mysqlq.store.db import CLI_RETRY, Cursor, Database
from mysqlq.web.actions import ActionRefused

T = TypeVar("T")
log = logs.get_logger("mysqlq.web")


class DatabaseDown(HTTPException):
    code = 503
    description = "the database cannot be reached just now; the details are in the server's log"


class Databases:
    """One retrying connection per server thread (the WSGI server runs a few threads)."""

    def __init__(self, settings: Settings) -> None:
        self.settings = settings
        self._local = threading.local()

    def run(self, unit: Callable[[Cursor], T]) -> T:
        db: Database | None = getattr(self._local, "db", None)
        if db is None:
            db = self._local.db = Database(self.settings.dsn, retry=CLI_RETRY)
        return db.run(unit)

    def run_or_503(self, unit: Callable[[Cursor], T]) -> T:
        """run(), with a database error logged (its first line) and raised as DatabaseDown; a missing
        job or a refused action passes through for the view to show."""
        try:
            return self.run(unit)
        except (MySQLdb.Error, MysqlqError) as exc:
            if isinstance(exc, JobNotFound | ActionRefused):
                raise
            log.error("web.database_error", error=str(exc).split("\n", 1)[0])
            raise DatabaseDown() from None
