"""Global options (--dsn, --log-level, --log-format, --env-file) work before and after the command."""

from __future__ import annotations

from pathlib import Path

import click
import pytest
from click.testing import CliRunner
from mysqlq_harness.net import free_port

from mysqlq.cli.reference import main

from ..conftest import QueueDB
from ..ops_fixtures import assert_one_line_error

GLOBAL_VARIABLES = ("MYSQLQ_DSN", "MYSQLQ_LOG_LEVEL", "MYSQLQ_LOG_FORMAT", "MYSQLQ_ENV_FILE")


def every_command(group: click.Group, path: tuple[str, ...] = (), groups: bool = True) -> list[tuple[str, ...]]:
    """The path of every command below ``group`` (and of every group, with ``groups``)."""
    found: list[tuple[str, ...]] = []
    for name, command in sorted(group.commands.items()):
        is_group = isinstance(command, click.Group)
        if groups or not is_group:
            found.append((*path, name))
        if is_group:
            found += every_command(command, (*path, name), groups)
    return found


def nowhere() -> str:
    return f"mysql://root@127.0.0.1:{free_port()}/nowhere"


@pytest.mark.parametrize("command", every_command(main), ids=" ".join)
def test_every_commands_help_shows_the_global_options_and_their_variables(command: tuple[str, ...]) -> None:
    result = CliRunner().invoke(main, [*command, "--help"], terminal_width=200)
    assert result.exit_code == 0, result.output
    for option in ("--dsn", "--log-level", "--log-format", "--env-file"):
        assert option in result.output
    for variable in GLOBAL_VARIABLES:
        assert variable in result.output


def test_dsn_after_the_command(qdb: QueueDB) -> None:
    env = qdb.env(MYSQLQ_DSN=nowhere())
    result = qdb.cli("stats", "--dsn", qdb.dsn, env=env, check=True)
    assert "(no jobs)" in result.stdout


def test_dsn_before_the_command_still_works_and_beats_the_environment(qdb: QueueDB) -> None:
    result = qdb.cli("--dsn", qdb.dsn, "stats", env=qdb.env(MYSQLQ_DSN=nowhere()), check=True)
    assert "(no jobs)" in result.stdout


def test_the_option_after_the_command_wins_over_the_one_before(qdb: QueueDB) -> None:
    assert qdb.cli("--dsn", nowhere(), "stats", "--dsn", qdb.dsn, check=True).returncode == 0
    assert_one_line_error(qdb.cli("--dsn", qdb.dsn, "stats", "--dsn", nowhere()), "cannot connect")


def test_dsn_after_a_subgroups_command(qdb: QueueDB) -> None:
    with qdb.producer() as producer:
        job_id = producer.enqueue("test.record", {"n": 1})
    result = qdb.cli("jobs", "show", str(job_id), "--dsn", qdb.dsn, env=qdb.env(MYSQLQ_DSN=nowhere()), check=True)
    assert f"job {job_id}" in result.stdout


@pytest.mark.parametrize("where", ["after", "before"])
def test_log_level_for_the_worker(qdb: QueueDB, where: str) -> None:
    with qdb.producer() as producer:
        producer.enqueue("test.record", {"n": 1})
    args = ["worker", "--burst", "--log-level", "warning"] if where == "after" else [
        "--log-level", "warning", "worker", "--burst"]
    result = qdb.cli(*args, env=qdb.env(MYSQLQ_LOG_LEVEL="debug"), check=True)
    assert qdb.statuses() == {"done": 1}
    assert "job.done" not in result.stderr and "worker.started" not in result.stderr


def test_log_format_after_the_command_decides_the_format(qdb: QueueDB) -> None:
    result = qdb.cli("--log-format", "console", "worker", "--burst", "--log-format", "json", check=True)
    lines = [line for line in result.stderr.splitlines() if line.strip()]
    assert lines and all(line.startswith("{") for line in lines), result.stderr


# ---------------------------------------------------------------------------- --env-file


def env_file(qdb: QueueDB, text: str) -> Path:
    path = qdb.tmp / "mysqlq.env"
    path.write_text(text)
    path.chmod(0o600)
    return path


def without_dsn(qdb: QueueDB, **extra: str) -> dict[str, str]:
    env = qdb.env(**extra)
    env.pop("MYSQLQ_DSN")
    return env


@pytest.mark.parametrize("where", ["before", "after", "variable"])
def test_env_file_gives_every_command_the_units_settings(qdb: QueueDB, where: str) -> None:
    path = env_file(qdb, f"# as the installer writes it\nMYSQLQ_DSN={qdb.dsn}\n\nMYSQLQ_QUEUES=\"from-file\"\n"
                         "PYTHONFAULTHANDLER=1\n")
    with qdb.producer() as producer:
        producer.enqueue("test.record", {"n": 1}, queue="from-file")
    if where == "variable":
        env = without_dsn(qdb, MYSQLQ_ENV_FILE=str(path))
        stats = qdb.cli("stats", env=env, check=True)
        qdb.cli("worker", "--burst", env=env, check=True)
    else:
        env = without_dsn(qdb)
        flag = ["--env-file", str(path)]
        stats = qdb.cli(*flag, "stats", env=env, check=True) if where == "before" else qdb.cli(
            "stats", *flag, env=env, check=True)
        worker = [*flag, "worker", "--burst"] if where == "before" else ["worker", "--burst", *flag]
        qdb.cli(*worker, env=env, check=True)
    assert "from-file" in stats.stdout
    assert qdb.statuses() == {"done": 1}  # the worker served MYSQLQ_QUEUES from the file


def test_env_file_later_files_win_and_the_environment_wins_over_files(qdb: QueueDB) -> None:
    first = env_file(qdb, f"MYSQLQ_DSN={nowhere()}\n")
    second = qdb.tmp / "2.env"
    second.write_text(f"MYSQLQ_DSN={qdb.dsn}\n")
    env = without_dsn(qdb)
    assert qdb.cli("--env-file", str(first), "--env-file", str(second), "stats", env=env, check=True).returncode == 0
    assert qdb.cli("--env-file", str(first), "stats", "--env-file", str(second), env=env, check=True).returncode == 0
    assert_one_line_error(qdb.cli("--env-file", str(second), "stats", env=qdb.env(MYSQLQ_DSN=nowhere())),
                          "cannot connect")


@pytest.mark.parametrize(("text", "fragment"), [
    (None, "cannot read"),
    ("MYSQLQ_DSN=x\nnot a setting\n", "line 2: expected VAR=value"),
])
def test_a_bad_env_file_is_one_line(qdb: QueueDB, text: str | None, fragment: str) -> None:
    path = qdb.tmp / "missing.env" if text is None else env_file(qdb, text)
    for args in (["--env-file", str(path), "stats"], ["stats", "--env-file", str(path)]):
        result = qdb.cli(*args)
        assert_one_line_error(result, fragment)
        assert result.returncode == 1
