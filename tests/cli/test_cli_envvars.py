"""Every option of every command has a MYSQLQ_* variable shown in its help (as the README says), and
those of `jobs`, `retry`, `purge` and `install-systemd` work."""

from __future__ import annotations

import json
from pathlib import Path

import click
import pytest
from click.testing import CliRunner

from mysqlq.cli.reference import main

from ..conftest import QueueDB
from ..ops_fixtures import assert_one_line_error, plant
from .test_cli_options import every_command

COMMANDS = every_command(main, groups=False)


def command(path: tuple[str, ...]) -> click.Command:
    found: click.Command = main
    for name in path:
        assert isinstance(found, click.Group)
        found = found.commands[name]
    return found


@pytest.mark.parametrize("path", COMMANDS, ids=" ".join)
def test_every_option_has_a_variable_shown_in_the_help(path: tuple[str, ...]) -> None:
    options = [p for p in command(path).params if isinstance(p, click.Option) and p.name != "help"]
    without = [p.opts[0] for p in options if not (isinstance(p.envvar, str) and p.envvar.startswith("MYSQLQ_"))]
    assert without == []
    shown = " ".join(CliRunner().invoke(main, [*path, "--help"], terminal_width=300).output.split())  # unwrapped
    for option in options:
        assert f"env var: {option.envvar}" in shown


def test_jobs_list_takes_its_filters_from_the_environment(qdb: QueueDB) -> None:
    with qdb.producer() as producer:
        wanted = producer.enqueue("test.record", queue="mail")
        producer.enqueue("test.record", queue="other")
        producer.enqueue("test.record", queue="mail", delay=3600)
    env = qdb.env(MYSQLQ_JOBS_QUEUE="mail", MYSQLQ_JOBS_STATUS="ready", MYSQLQ_JOBS_JSON="true")
    rows = json.loads(qdb.cli("jobs", "list", env=env, check=True).stdout)
    assert [row["id"] for row in rows] == [wanted]
    shown = json.loads(qdb.cli("jobs", "show", str(wanted), env=env, check=True).stdout)
    assert shown["queue"] == "mail"


def test_a_bad_value_from_the_environment_is_refused_in_one_line(qdb: QueueDB) -> None:
    assert_one_line_error(qdb.cli("jobs", "list", env=qdb.env(MYSQLQ_JOBS_LIMIT="lots")), "--limit must be")


def test_purge_dry_run_from_the_environment_deletes_nothing(qdb: QueueDB) -> None:
    plant(qdb, "done", 2, ended_ago=86400)
    plant(qdb, "done", 1, ended_ago=60)
    env = qdb.env(MYSQLQ_PURGE_DONE_OLDER_THAN="1h", MYSQLQ_PURGE_DRY_RUN="1")
    result = qdb.cli("purge", env=env, check=True)
    assert "would delete 2 done" in result.stdout
    assert qdb.statuses() == {"done": 3}
    assert "deleted 2 done" in qdb.cli("purge", env=qdb.env(MYSQLQ_PURGE_DONE_OLDER_THAN="1h"), check=True).stdout


def test_retry_every_dead_job_of_a_queue_from_the_environment(qdb: QueueDB) -> None:
    plant(qdb, "dead", queue="mail", ended_ago=60)
    plant(qdb, "dead", queue="other", ended_ago=60)
    qdb.cli("retry", env=qdb.env(MYSQLQ_RETRY_DEAD="yes", MYSQLQ_RETRY_QUEUE="mail"), check=True)
    assert dict(qdb.query("SELECT queue, status FROM mysqlq_jobs")) == {"mail": "ready", "other": "dead"}


def test_install_systemd_from_the_environment(qdb: QueueDB, tmp_path: Path) -> None:
    env = qdb.env(MYSQLQ_INSTALL_ROOT=str(tmp_path), MYSQLQ_INSTALL_NAME="envworker", MYSQLQ_INSTALL_RELOAD="false")
    qdb.cli("install-systemd", env=env, check=True)
    assert (tmp_path / "etc/systemd/system/envworker@.service").is_file()
