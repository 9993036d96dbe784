"""The optional Django app (``"mysqlq.contrib.django"`` in ``INSTALLED_APPS``): a database check that
the queue's schema is migrated, and ``manage.py mysqlq_worker``."""

from __future__ import annotations

from collections.abc import Iterable, Sequence

from django.apps import AppConfig
from django.core import checks


class MysqlqConfig(AppConfig):  # type: ignore[misc]
    name = "mysqlq.contrib.django"
    label = "mysqlq"
    verbose_name = "mysqlq"

    def ready(self) -> None:
        checks.register(check_queue_schema, checks.Tags.database)


def check_queue_schema(app_configs: Sequence[AppConfig] | None = None, databases: Sequence[str] | None = None,
                       **kwargs: object) -> Iterable[checks.CheckMessage]:
    """For each mysqlq task backend whose database is checked (``manage.py check --database``,
    ``migrate``): its queue's schema is the one this mysqlq needs."""
    from mysqlq.contrib.django import compat
    from mysqlq.contrib.django.backend import MysqlqBackend
    from mysqlq.core.errors import MysqlqError
    from mysqlq.store.db import CLI_RETRY, Database
    from mysqlq.store.schema import check_schema

    found: list[checks.CheckMessage] = []
    for backend in compat.task_backends().all():
        if not isinstance(backend, MysqlqBackend) or not databases or backend.database not in databases:
            continue
        try:
            db = Database(backend.settings().dsn, retry=CLI_RETRY)
            try:
                db.run(check_schema)
            finally:
                db.close()
        except MysqlqError as exc:
            # A warning, not an error: `manage.py migrate` runs database checks, and must not be
            # blocked on a fresh database before `mysqlq migrate` has run.
            found.append(checks.Warning(f"TASKS[{backend.alias!r}]: {exc}", hint="run `mysqlq migrate`",
                                        id="mysqlq.W001"))
    return found
