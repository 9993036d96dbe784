"""The Django Tasks backend on a real Django project (tests/django_project) and the real server: a
task enqueued inside `atomic()` exists only if the block commits; workers run it with Django set up;
get_result() follows it through READY, RUNNING, SUCCESSFUL or FAILED with errors and tracebacks;
run_after, priorities, async tasks, takes_context, retries, and a worker killed mid-task.

Runs on the Django this interpreter has: the django-tasks backport with Django 5.2 on Python 3.11,
django.tasks itself with Django 6 on Python 3.12 and later."""

from __future__ import annotations

import datetime as dt
import os
import signal
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from mysqlq_harness.jobs import EVERY_JOB
from mysqlq_harness.lifecycle import child_env
from mysqlq_harness.waiting import stop_processes, wait_for

from ..conftest import MYSQLQ, MariaDBServer, fresh_database, unavailable, with_database

PROJECT = Path(__file__).parent.parent / "django_project"

try:
    import django
except ImportError:  # pragma: no cover - the dev extra installs it
    django = None


@pytest.fixture(scope="module")
def shop(mariadb: MariaDBServer, tmp_path_factory: pytest.TempPathFactory) -> Iterator[dict[str, str]]:
    """Django set up once for this module, its default database a fresh mysqlq database; yields the
    environment a worker of the project needs."""
    if django is None:
        unavailable("Django is not installed")
    with fresh_database(mariadb.dsn) as name:
        dsn = with_database(mariadb.dsn, name)
        tmp = tmp_path_factory.mktemp("shop")
        env = {"SHOP_DSN": dsn, "SHOP_SQLITE": str(tmp / "other.sqlite3"), "SHOP_RECORD": str(tmp / "record.txt"),
               "DJANGO_SETTINGS_MODULE": "shop.settings"}
        os.environ.update(env)
        import django as dj  # shop.settings: tests/django_project is on the path (pyproject.toml)

        dj.setup()
        from django.db import connections

        with connections["other"].cursor() as cur:  # a table of the SQLite database, for its transactions
            cur.execute("CREATE TABLE IF NOT EXISTS notes (text TEXT)")
        yield {**env, "MYSQLQ_DSN": dsn, "PYTHONPATH": str(PROJECT), "MYSQLQ_LOG_FORMAT": "console",
               "MYSQLQ_HINT_DIR": str(tmp / "hints")}
        connections.close_all()


def worker(shop: dict[str, str], *args: str, log: str = "worker.log") -> subprocess.Popen[bytes]:
    out = open(Path(shop["SHOP_RECORD"]).with_name(log), "ab")  # noqa: SIM115
    proc = subprocess.Popen([MYSQLQ, "worker", "--queue", "default,mail", "--poll-interval", "0.2",
                             "--retry-base", "0.05", *args], env=child_env(shop), stdout=out, stderr=subprocess.STDOUT)
    out.close()
    return proc


def burst(shop: dict[str, str], *args: str) -> None:
    proc = worker(shop, "--burst", *args)
    assert proc.wait(60) == 0, Path(shop["SHOP_RECORD"]).with_name("worker.log").read_text()


def records(shop: dict[str, str]) -> list[str]:
    path = Path(shop["SHOP_RECORD"])
    return path.read_text().splitlines() if path.exists() else []


def jobs_count() -> int:
    from django.db import connection

    with connection.cursor() as cur:
        cur.execute(f"SELECT COUNT(*) FROM {EVERY_JOB}")
        return int(cur.fetchone()[0])


def test_a_task_enqueued_in_a_rolled_back_block_never_exists_and_a_committed_one_runs(shop: dict[str, str]) -> None:
    from django.db import transaction
    from shop import tasks

    before = jobs_count()

    class Undo(Exception):
        pass

    with pytest.raises(Undo), transaction.atomic():
        rolled_back = tasks.add.enqueue(1, 2)
        assert jobs_count() == before + 1  # written on the request's connection, in its transaction
        raise Undo
    assert jobs_count() == before
    from mysqlq.contrib.django.compat import TaskResultDoesNotExist

    with pytest.raises(TaskResultDoesNotExist):
        tasks.add.get_result(rolled_back.id)

    with transaction.atomic():
        committed = tasks.add.enqueue(2, 3)
    assert committed.status == "READY" and committed.id.isdigit()  # the job's id
    burst(shop)
    result = tasks.add.get_result(committed.id)
    assert (result.status, result.return_value, result.args, result.attempts) == ("SUCCESSFUL", 5, [2, 3], 1)
    assert result.enqueued_at <= result.started_at <= result.finished_at and result.errors == []
    assert result.enqueued_at.tzinfo is not None and result.worker_ids and result.backend == "default"


def test_a_database_that_is_not_mysql_enqueues_through_mysqlqs_connection_on_commit(shop: dict[str, str]) -> None:
    from django.db import connections, transaction
    from shop import tasks

    on_commit = tasks.send.using(backend="on_commit", queue_name="default")
    before = jobs_count()

    class Undo(Exception):
        pass

    with pytest.raises(Undo), transaction.atomic(using="other"):
        with connections["other"].cursor() as cur:
            cur.execute("INSERT INTO notes VALUES ('rolled back')")
        on_commit.enqueue("a@example.com")
        raise Undo
    assert jobs_count() == before
    with transaction.atomic(using="other"):
        result = on_commit.enqueue("b@example.com", subject="yes")
        assert jobs_count() == before  # not before the commit
    assert jobs_count() == before + 1
    burst(shop)
    done = on_commit.get_result(result.id)
    assert (done.status, done.return_value) == ("SUCCESSFUL", {"to": "b@example.com", "subject": "yes"})
    assert result.id.startswith("c") and len(result.id) == 33  # known before the job existed


def test_get_result_follows_a_task_from_ready_through_running_to_the_end(shop: dict[str, str]) -> None:
    from shop import tasks

    slow = tasks.slow.enqueue(1.5)
    failing = tasks.boom.enqueue("bad input")
    assert tasks.slow.get_result(slow.id).status == "READY"
    proc = worker(shop, "--concurrency", "2")
    try:
        wait_for(lambda: tasks.slow.get_result(slow.id).status == "RUNNING", "the slow task to run", 30)
        running = tasks.slow.get_result(slow.id)
        assert running.started_at is not None and running.finished_at is None
        with pytest.raises(ValueError, match="not finished"):
            running.return_value  # noqa: B018
        running.refresh()  # the same object, brought up to date once it ended
        wait_for(lambda: (running.refresh(), running.status)[1] == "SUCCESSFUL", "the slow task to end", 30)
        assert running.return_value == "slept"
        wait_for(lambda: tasks.boom.get_result(failing.id).status == "FAILED", "the failing task to be dead", 30)
    finally:
        stop_processes([proc])
    failed = tasks.boom.get_result(failing.id)
    assert failed.attempts == 3  # MAX_ATTEMPTS of the backend's OPTIONS
    [error] = failed.errors
    assert error.exception_class_path == "builtins.ValueError" and error.exception_class is ValueError
    assert "Traceback (most recent call last)" in error.traceback and "ValueError: bad input" in error.traceback
    with pytest.raises(ValueError, match="failed"):
        failed.return_value  # noqa: B018


def test_run_after_priority_async_and_context(shop: dict[str, str]) -> None:
    from django.utils import timezone
    from shop import tasks

    later = tasks.add.using(run_after=timezone.now() + dt.timedelta(seconds=2)).enqueue(10, 20)
    for n in range(3):
        tasks.order.using(priority=-10).enqueue(f"low{n}")
    for n in range(3):  # enqueued later, run first: Django's higher priority
        tasks.order.using(priority=50).enqueue(f"high{n}")
    asynchronous = tasks.aadd.enqueue(4, 5)
    with_context = tasks.attempt_of.enqueue(2)  # fails on attempt 1, succeeds on attempt 2
    burst(shop, "--concurrency", "1", "--retry-base", "60")
    assert tasks.add.get_result(later.id).status == "READY"  # not due yet: the burst left it
    order = [line.split()[1] for line in records(shop) if line.startswith("order ")]
    assert order == ["high0", "high1", "high2", "low0", "low1", "low2"]
    assert tasks.aadd.get_result(asynchronous.id).return_value == 9
    # Failed once, waiting for its retry: READY again, with the first attempt's error.
    retried = tasks.attempt_of.get_result(with_context.id)
    assert (retried.status, retried.attempts) == ("READY", 1)
    assert "RuntimeError: not yet (attempt 1)" in retried.errors[0].traceback
    from django.db import connection

    with connection.cursor() as cur:  # its backoff over at once (a minute, with --retry-base 60)
        cur.execute("UPDATE mysqlq_jobs SET run_at = NOW(6), scheduled_at = NOW(6) WHERE id = %s",
                    (int(with_context.id),))  # the id of a task enqueued on the request's connection
    wait_for(lambda: dt.datetime.now(dt.UTC) > later.task.run_after + dt.timedelta(milliseconds=300),
             "the delayed task to be due", 10)
    burst(shop)
    assert tasks.add.get_result(later.id).return_value == 30
    done = tasks.attempt_of.get_result(with_context.id)
    assert (done.status, done.return_value) == ("SUCCESSFUL", {"attempt": 2, "id": with_context.id})


def test_tasks_enqueued_in_a_fairness_key_block_take_their_tenants_turn(shop: dict[str, str]) -> None:
    from django.db import connection
    from shop import tasks

    from mysqlq.contrib.django import fairness_key
    from mysqlq.core.errors import InvalidJob
    from mysqlq.store.fairness import UNTURNED

    with fairness_key("tenant-a"):
        first = tasks.add.enqueue(1, 2)
        with fairness_key("tenant-b"):  # the innermost block wins
            inner = tasks.add.enqueue(3, 4)
        second = tasks.add.enqueue(5, 6)
    outside = tasks.add.enqueue(7, 8)
    with pytest.raises(InvalidJob, match="fairness key"), fairness_key(""):
        tasks.add.enqueue(9, 10)  # never reached: the block refuses the key
    with connection.cursor() as cur:
        cur.execute("SELECT id, fairness_key, turn < %s FROM mysqlq_jobs WHERE id IN (%s, %s, %s, %s) ORDER BY id",
                    [UNTURNED, *(int(r.id) for r in (first, inner, second, outside))])
        rows = {str(job_id): (key, bool(turned)) for job_id, key, turned in cur.fetchall()}
    assert rows == {first.id: ("tenant-a", True), inner.id: ("tenant-b", True), second.id: ("tenant-a", True),
                    outside.id: (None, False)}
    burst(shop)
    assert tasks.add.get_result(second.id).return_value == 11


def test_the_backend_validates_tasks_as_djangos_own_do(shop: dict[str, str]) -> None:
    from shop import tasks

    from mysqlq.contrib.django.compat import InvalidTask, Task

    with pytest.raises(InvalidTask, match="Queue 'nosuch' is not valid"):
        tasks.add.using(queue_name="nosuch")
    with pytest.raises(InvalidTask, match="module level"):
        Task(func=lambda: None)
    with pytest.raises(InvalidTask, match="not JSON"):
        tasks.add.enqueue(object(), 1)
    with pytest.raises(InvalidTask, match="priority"):
        tasks.add.using(priority=101)


def test_a_payload_cannot_choose_code_that_is_not_a_task(shop: dict[str, str]) -> None:
    import mysqlq

    settings = mysqlq.Settings(dsn=mysqlq.Dsn.parse(shop["MYSQLQ_DSN"]), hint_dir=shop["MYSQLQ_HINT_DIR"])
    with mysqlq.Producer(settings) as producer:
        ids = [producer.enqueue("django.task", {"task": path, "args": [], "kwargs": {}}, max_attempts=1)
               for path in ("os.getcwd", "shop.tasks.not_a_task", "shop.tasks.count_rows")]
        burst(shop)
        states = [producer.job(job_id) for job_id in ids]
    assert [state.status for state in states if state] == ["dead", "dead", "done"]
    assert "LookupError: 'os.getcwd' is not in a module of an installed Django app" in (states[0].error or "")
    assert "LookupError: 'shop.tasks.not_a_task' is not a task" in (states[1].error or "")
    assert states[2] is not None and isinstance(states[2].result, int)  # its own Django connection worked


@pytest.mark.slow
def test_a_task_whose_worker_is_killed_mid_run_still_completes(shop: dict[str, str]) -> None:
    from shop import tasks

    result = tasks.slow.enqueue(3)
    first = worker(shop, "--lease", "2", "--heartbeat-interval", "0.5", log="killed.log")
    try:
        wait_for(lambda: tasks.slow.get_result(result.id).status == "RUNNING", "the task to start", 30)
        first.send_signal(signal.SIGKILL)
        first.wait()
        second = worker(shop, "--lease", "2", "--heartbeat-interval", "0.5")
        try:
            wait_for(lambda: tasks.slow.get_result(result.id).status == "SUCCESSFUL", "the task to complete", 60)
        finally:
            stop_processes([second])
    finally:
        stop_processes([first])
    done = tasks.slow.get_result(result.id)
    assert done.return_value == "slept" and done.attempts == 2


def test_an_async_view_enqueues_and_reads_without_blocking(shop: dict[str, str]) -> None:
    import asyncio

    from shop import tasks

    async def view() -> Any:
        result = await tasks.add.aenqueue(7, 8)
        return await tasks.add.aget_result(result.id)

    assert asyncio.run(view()).status == "READY"


@pytest.mark.slow
def test_the_systemd_template_runs_a_django_project_through_a_drop_in(
        shop: dict[str, str], mariadb: MariaDBServer, tmp_path: Path) -> None:
    from shop import tasks

    from ..conftest import private_systemd

    systemd = private_systemd(mariadb, tmp_path / "systemd")
    assert mariadb.tcp_dsn is not None
    import mysqlq

    dsn = with_database(mariadb.tcp_dsn, mysqlq.Dsn.parse(shop["MYSQLQ_DSN"]).database)
    with systemd:
        systemd.run(MYSQLQ, "install-systemd", "--name", "worker")
        systemd.write("/etc/mysqlq/mysqlq.env", f"MYSQLQ_DSN={dsn}\nMYSQLQ_QUEUES=default,mail\n"
                      "MYSQLQ_POLL_INTERVAL=0.2\n")
        # The drop-in of docs/django.md: the project's directory and settings.
        systemd.write("/etc/systemd/system/worker@.service.d/django.conf",
                      f"[Service]\nWorkingDirectory={PROJECT}\n"
                      f"Environment=DJANGO_SETTINGS_MODULE=shop.settings PYTHONPATH={PROJECT} SHOP_DSN={dsn}\n")
        systemd.systemctl("daemon-reload")
        started = systemd.systemctl("start", "worker@1", check=False)
        story = systemd.run("journalctl", "--no-pager", "-u", "worker@1", "-o", "cat", check=False).stdout
        assert started.returncode == 0, story
        result = tasks.add.enqueue(20, 22)
        wait_for(lambda: tasks.add.get_result(result.id).status == "SUCCESSFUL", "the task to run under systemd", 60)
        [done] = systemd.journal("-u", "worker@1", "MYSQLQ_EVENT=job.done", f"JOB_ID={result.id}")
        systemd.systemctl("stop", "worker@1")
    assert tasks.add.get_result(result.id).return_value == 42
    assert (done["WORKER"], done["HANDLER"]) == ("1", "django.task")


def test_manage_py_runs_a_worker_and_checks_the_queues_schema(shop: dict[str, str]) -> None:
    from django.core.management import call_command
    from django.core.management.base import SystemCheckError
    from django.db import connection
    from shop import tasks

    result = tasks.add.enqueue(40, 2)
    env = {key: value for key, value in shop.items() if key != "PYTHONPATH"}  # manage.py's directory is enough
    ran = subprocess.run([sys.executable, "manage.py", "mysqlq_worker", "--burst", "--queue", "default,mail"],
                         cwd=PROJECT, env=child_env(env), capture_output=True, text=True, timeout=60)
    assert ran.returncode == 0, ran.stderr
    assert tasks.add.get_result(result.id).return_value == 42

    call_command("check", "--database", "default", "--fail-level", "WARNING")  # the schema is current
    with connection.cursor() as cur:
        cur.execute("SELECT MAX(version) FROM mysqlq_schema_version")
        latest = cur.fetchone()[0]
        cur.execute("DELETE FROM mysqlq_schema_version WHERE version = %s", (latest,))
    try:
        with pytest.raises(SystemCheckError, match=r"mysqlq.W001.*run `mysqlq migrate`"):
            call_command("check", "--database", "default", "--fail-level", "WARNING")
    finally:
        with connection.cursor() as cur:
            cur.execute("INSERT INTO mysqlq_schema_version (version, applied_at) VALUES (%s, NOW(6))", (latest,))


def test_a_session_in_another_time_zone_still_stores_utc_times(shop: dict[str, str]) -> None:
    from django.db import connection, transaction
    from shop import tasks

    with connection.cursor() as cur:
        cur.execute("SET time_zone = '+05:00'")
    try:
        with transaction.atomic():
            result = tasks.add.enqueue(1, 1)
        with connection.cursor() as cur:
            cur.execute("SELECT @@session.time_zone")
            assert cur.fetchone()[0] == "+05:00"  # the application's session is as it was
            cur.execute("SELECT TIMESTAMPDIFF(SECOND, enqueued_at, UTC_TIMESTAMP(6)) FROM mysqlq_jobs "
                        "WHERE id = %s", (int(result.id),))
            assert abs(cur.fetchone()[0]) < 60
    finally:
        with connection.cursor() as cur:
            cur.execute("SET time_zone = '+00:00'")
