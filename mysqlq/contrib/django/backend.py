"""A Django Tasks backend: ``TASKS = {"default": {"BACKEND": "mysqlq.contrib.django.MysqlqBackend"}}``.

A task is enqueued as a mysqlq job of handler ``django.task`` whose payload names the task (its
module path) and carries its arguments; workers run it through :mod:`mysqlq.contrib.django.runner`.
A task's result id is its job's id when the job is written at once; an enqueue deferred to
``on_commit`` returns a random key instead (``c`` and 32 hex digits), stored as the job's dedupe key,
so that the id is known before the job exists and finds it afterwards.

Where the job is written:

* When the configured database (``OPTIONS["DATABASE"]``, by default ``"default"``) is MySQL or
  MariaDB and holds mysqlq's tables, on the request's own connection, in its current transaction:
  inside ``transaction.atomic()`` the job is rolled back with the block. Workers are hinted once
  the transaction commits.
* Otherwise (a PostgreSQL or SQLite database, or a queue database of its own named by
  ``OPTIONS["DSN"]``), through mysqlq's own connection when the transaction commits
  (``transaction.on_commit``), at once outside a transaction.

TLS: on the request's own connection, the database's ``OPTIONS`` decide (Django hands them to
mysqlclient). mysqlq's own connections (results, deferred enqueues) take the DSN's ``ssl_mode`` and
files, or without a DSN the same ``OPTIONS`` read by :func:`dsn_of_database`.
"""

from __future__ import annotations

import datetime as dt
import secrets
import threading
from collections.abc import Iterable
from typing import Any

from django.core import checks
from django.db import connections, transaction

from mysqlq import hint
from mysqlq.contrib.django import compat, fairness
from mysqlq.contrib.django.results import task_result
from mysqlq.core import tls
from mysqlq.core.config import Dsn, Settings
from mysqlq.core.errors import ConfigError, InvalidJob
from mysqlq.core.jobs import Job, JobState, Status
from mysqlq.producer.enqueue import Producer
from mysqlq.producer.outbox import enqueue_on
from mysqlq.store import jobs as jobs_store

HANDLER = "django.task"  # the entry point every Django task runs through
KEY_PREFIX = "django-task:"  # dedupe keys of Django tasks: the prefix, then the result id


def priority_of(django_priority: int) -> int:
    """Django's priority (−100…100, higher first) as mysqlq's (lower first): order kept."""
    return -int(django_priority)


def result_key(result_id: str) -> str:
    return KEY_PREFIX + result_id


def dsn_of_database(db: dict[str, Any]) -> Dsn:
    """mysqlq's DSN for a Django MySQL database: its HOST, PORT, USER, PASSWORD and NAME, and from its
    OPTIONS (which Django hands to mysqlclient) ``unix_socket``, ``ssl_mode``, ``ssl`` (``ca``, ``cert``,
    ``key``) and ``read_default_file`` / ``read_default_group`` (read by mysqlq, see
    mysqlq.core.optionfile). A ``ca`` without ``ssl_mode`` means VERIFY_CA, what mysqlclient does with
    it (the chain is verified, the host name is not). What the settings leave empty comes from the
    option file, then from mysqlq's defaults."""
    options = db.get("OPTIONS") or {}
    ssl, mode = tls.mode_of_driver_options(options.get("ssl") or {})
    host, port = db.get("HOST") or None, db.get("PORT") or None
    socket = options.get("unix_socket")
    if host and host.startswith("/"):  # Django's way to name a unix socket
        host, socket = None, socket or host
    return Dsn.assemble(
        addresses=[(host or "localhost", int(port or 3306))] if host or port else None,
        user=db.get("USER") or None,
        password=db.get("PASSWORD") or None,
        database=db.get("NAME") or None,
        unix_socket=socket,
        ssl_mode=options.get("ssl_mode") or mode,
        ssl_ca=ssl.get("ca"),
        ssl_cert=ssl.get("cert"),
        ssl_key=ssl.get("key"),
        read_default_file=options.get("read_default_file"),
        read_default_group=options.get("read_default_group"),
    )


class MysqlqBackend(compat.BaseTaskBackend):  # type: ignore[misc]
    """Runs Django tasks on mysqlq workers. OPTIONS: ``DATABASE`` (the Django database alias whose
    connection holds the queue, default ``"default"``), ``DSN`` (a mysqlq DSN, when the queue is
    elsewhere: then jobs are enqueued on commit), ``MAX_ATTEMPTS`` and ``TIME_LIMIT`` (per job, as
    for ``Producer.enqueue``)."""

    supports_defer = True
    supports_async_task = True
    supports_get_result = True
    supports_priority = True

    def __init__(self, alias: str, params: dict[str, Any]) -> None:
        super().__init__(alias, params)
        options = {str(key).upper(): value for key, value in self.options.items()}
        unknown = set(options) - {"DATABASE", "DSN", "MAX_ATTEMPTS", "TIME_LIMIT"}
        if unknown:
            raise ConfigError(f"TASKS[{alias!r}]['OPTIONS'] has unknown key(s) {', '.join(sorted(unknown))} "
                              "(known: DATABASE, DSN, MAX_ATTEMPTS, TIME_LIMIT)")
        self.database = str(options.get("DATABASE", "default"))
        self.dsn_url: str | None = options.get("DSN")
        self.max_attempts: int | None = options.get("MAX_ATTEMPTS")
        self.time_limit: float | None = options.get("TIME_LIMIT")
        self._producer: Producer | None = None
        self._settings: Settings | None = None
        self._lock = threading.Lock()
        self._holds_queue: dict[str, bool] = {}  # database name → it holds mysqlq's tables
        self._valid_queues: set[str] = set()
        self._hints: hint.Sender | None = None  # the producer's hint sender, once there is one
        self._local = threading.local()  # per thread: the queues its open transaction will hint

    # ------------------------------------------------------------------ settings and connections

    def settings(self) -> Settings:
        """mysqlq's settings (read once): the DSN option, or else the configured Django database's own."""
        if self._settings is None:
            self._settings = self._read_settings()
        return self._settings

    def _read_settings(self) -> Settings:
        if self.dsn_url:
            return Settings(dsn=Dsn.parse(self.dsn_url))
        db = connections.databases[self.database]
        if db.get("ENGINE") != "django.db.backends.mysql":
            raise ConfigError(f"TASKS[{self.alias!r}]: database {self.database!r} is not MySQL or MariaDB; "
                              "give OPTIONS['DSN'] (the queue's database)")
        return Settings(dsn=dsn_of_database(db))

    def producer(self) -> Producer:
        """mysqlq's own producer (opened on first use), for results and deferred enqueues."""
        with self._lock:
            if self._producer is None:
                self._producer = Producer(self.settings(), pool_size=4)
            return self._producer

    def on_request_connection(self, connection: Any) -> bool:
        """True when jobs go on the Django connection itself (MySQL holding mysqlq's tables)."""
        if self.dsn_url:
            return False
        if connection.vendor != "mysql":
            return False
        name = connection.settings_dict["NAME"]
        if name not in self._holds_queue:
            connection.ensure_connection()
            with connection.connection.cursor() as cur:
                self._holds_queue[name] = jobs_store.holds_queue(cur)
        return self._holds_queue[name]

    # ------------------------------------------------------------------ enqueue

    def validate_task(self, task: Any) -> None:
        super().validate_task(task)
        if task.queue_name not in self._valid_queues:
            try:
                Job(HANDLER, None, queue=task.queue_name)
            except InvalidJob as exc:
                raise compat.InvalidTask(f"queue name {task.queue_name!r}: {exc}") from None
            self._valid_queues.add(task.queue_name)

    def job(self, task: Any, args: Any, kwargs: Any, result_id: str | None = None) -> Job:
        """The mysqlq job that runs ``task(*args, **kwargs)``; with ``result_id`` (a deferred enqueue's),
        holding it as its dedupe key; with the fairness key of a ``fairness_key`` block around the call."""
        payload = {"task": task.module_path, "args": list(args), "kwargs": dict(kwargs), "backend": self.alias}
        if result_id is not None:
            payload["result_id"] = result_id
        run_at = None
        if task.run_after is not None:
            when = task.run_after
            run_at = when.astimezone(dt.UTC).replace(tzinfo=None) if when.tzinfo else when
        return Job(HANDLER, payload, queue=task.queue_name, run_at=run_at, priority=priority_of(task.priority),
                   dedupe_key=None if result_id is None else result_key(result_id), max_attempts=self.max_attempts,
                   time_limit=self.time_limit, fairness_key=fairness.current())

    def enqueue(self, task: Any, args: Any, kwargs: Any) -> Any:
        if task.backend != self.alias:  # a Task is validated by its backend when made (using() too)
            self.validate_task(task)
        connection = connections[self.database]
        try:
            if self.on_request_connection(connection):
                result_id = str(self._enqueue_on_request(connection, self.job(task, args, kwargs)))
            else:
                result_id = "c" + secrets.token_hex(16)
                job = self.job(task, args, kwargs, result_id)
                job.row(self.settings())  # checked now (arguments that are not JSON), written on commit
                producer = self.producer()
                transaction.on_commit(lambda: producer.enqueue_many([job]), using=self.database)
        except InvalidJob as exc:
            raise compat.InvalidTask(f"{task.module_path}: {exc}") from None
        now = dt.datetime.now(dt.UTC)
        return task_result(task, result_id, Status.READY, args, kwargs, self.alias, enqueued_at=now)

    def _enqueue_on_request(self, connection: Any, job: Job) -> int:
        connection.ensure_connection()
        job_id = enqueue_on(connection.connection, job, self.settings())  # times UTC whatever the session's zone
        self._hint_after_commit(connection, job.queue)
        return job_id

    def _hint_after_commit(self, connection: Any, queue: str) -> None:
        """Wake workers of ``queue`` once the transaction commits: one hint per transaction, for
        every queue it enqueued on (at once in autocommit)."""
        hints = self._hints or self.producer().hints
        self._hints = hints
        if not connection.in_atomic_block:
            hints.notify((queue,))
            return
        local = self._local
        pending: set[str] | None = getattr(local, "queues", None)
        flush = getattr(local, "flush", None)
        # Our callback is still waiting unless the block rolled back (Django then drops its callbacks).
        if pending is not None and any(entry[1] is flush for entry in connection.run_on_commit):
            pending.add(queue)
            return
        queues = {queue}

        def send() -> None:
            hints.notify(queues)

        local.queues, local.flush = queues, send
        transaction.on_commit(send, using=self.database)

    # ------------------------------------------------------------------ results

    def get_result(self, result_id: str) -> Any:
        wanted = str(result_id)
        if wanted.isdigit():
            state = self.producer().job(int(wanted))
        else:
            state = self.producer().job(dedupe_key=result_key(wanted))
        if state is None or state.handler != HANDLER:
            raise compat.TaskResultDoesNotExist(result_id)
        return task_result_of(state, self.alias)

    def check(self, **kwargs: object) -> Iterable[checks.CheckMessage]:
        try:
            self.settings()
        except ConfigError as exc:
            yield checks.Error(str(exc), id="mysqlq.E001")


def task_result_of(state: JobState, alias: str) -> Any:
    """A Django TaskResult from where a mysqlq job stands."""
    from mysqlq.contrib.django.runner import declared_task

    payload = state.payload
    task = declared_task(payload["task"])
    key = state.dedupe_key or ""
    result_id = key[len(KEY_PREFIX):] if key.startswith(KEY_PREFIX) else str(state.id)
    return task_result(task, result_id, state.status, payload["args"], payload["kwargs"], alias, state=state)
