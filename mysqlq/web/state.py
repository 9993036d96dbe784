"""What every view shares: how `mysqlq web` was started, its access checks, its database and its metrics."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import TypeVar

from flask import current_app
from prometheus_client import CollectorRegistry

from mysqlq.core.config import Settings
from mysqlq.store.db import Cursor
from mysqlq.web import metrics
from mysqlq.web.access import Access
from mysqlq.web.database import Databases

T = TypeVar("T")
PAGE_SIZE = 50
EXTENSION = "mysqlq"  # the Dashboard's key in app.extensions


@dataclass(frozen=True)
class WebSettings:
    """What `mysqlq web` was started with: the database settings, the token and the mode."""

    settings: Settings
    token: str | None = None
    read_only: bool = False
    page_size: int = PAGE_SIZE


@dataclass(frozen=True)
class Dashboard:
    """One application's shared parts, made once by create_app and found by the views through current()."""

    web: WebSettings
    access: Access
    databases: Databases
    scrape: CollectorRegistry  # /metrics reads the database itself and reports a failure as mysqlq_up 0

    @classmethod
    def start(cls, web: WebSettings) -> Dashboard:
        databases = Databases(web.settings)
        return cls(web, Access(web.token), databases, metrics.registry(databases.run))

    def run(self, unit: Callable[[Cursor], T]) -> T:
        """For pages and actions: the database being down is a 503 page, the details only in the log."""
        return self.databases.run_or_503(unit)


def current() -> Dashboard:
    """The Dashboard of the application serving this request."""
    dashboard: Dashboard = current_app.extensions[EXTENSION]
    return dashboard
