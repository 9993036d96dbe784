"""The CLI: each command works, and bad input gets one line on stderr, exit 1, no traceback, no write."""

from __future__ import annotations

import json

import pytest
from mysqlq_harness.net import free_port

from ..conftest import QueueDB, with_database
from ..ops_fixtures import assert_one_line_error


def test_migrate_reports_up_to_date(qdb: QueueDB) -> None:
    result = qdb.cli("migrate", check=True)
    assert "up to date" in result.stdout


def test_migrate_creates_the_schema_in_an_empty_database(qdb: QueueDB) -> None:
    tables = [row[0] for row in qdb.query("SELECT table_name FROM information_schema.tables WHERE table_schema = "
                                          "DATABASE()")]
    qdb.query("DROP TABLE " + ", ".join(f"`{table}`" for table in tables))
    assert "schema migrated to version" in qdb.cli("migrate", check=True).stdout
    assert qdb.scalar("SELECT COUNT(*) FROM mysqlq_jobs") == 0


def test_enqueue_prints_the_id_and_stores_the_options(qdb: QueueDB) -> None:
    result = qdb.cli("enqueue", "test.record", '{"to": "a@example.com"}', "--queue", "mail", "--priority", "3",
                     "--max-attempts", "2", "--delay", "30", "--dedupe-key", "k", check=True)
    job_id = int(result.stdout)
    row = qdb.query("SELECT queue, priority, max_attempts, status, dedupe_key, payload FROM mysqlq_jobs "
                    "WHERE id = %s", (job_id,))[0]
    assert row == ("mail", 3, 2, "scheduled", "k", b'{"to":"a@example.com"}')
    again = qdb.cli("enqueue", "test.record", "{}", "--dedupe-key", "k", check=True)
    assert int(again.stdout) == job_id


def test_enqueue_file_loads_every_line(qdb: QueueDB) -> None:
    path = qdb.tmp / "jobs.jsonl"
    lines = [json.dumps({"handler": "test.record", "payload": {"i": i}}) for i in range(1500)]
    lines.append(json.dumps({"handler": "test.record", "queue": "other", "priority": 2, "dedupe_key": "x"}))
    path.write_text("\n".join(lines) + "\n\n")
    result = qdb.cli("enqueue", "--file", str(path), check=True)
    assert "enqueued 1501 jobs" in result.stdout
    assert qdb.statuses() == {"ready": 1501}
    assert qdb.scalar("SELECT priority FROM mysqlq_jobs WHERE queue = 'other'") == 2


@pytest.mark.parametrize(
    ("line", "fragment"),
    [
        ("{not json", "line 3: not valid JSON"),
        ('{"payload": {}}', 'line 3: expected an object with at least "handler"'),
        ('{"handler": "x", "colour": "red"}', "line 3: unknown field(s) colour"),
        ('{"handler": "x", "delay": -5}', "line 3: delay must be"),
        ('{"handler": ""}', "line 3: handler name must not be empty"),
    ],
)
def test_enqueue_file_with_a_bad_line_names_it_and_writes_nothing(qdb: QueueDB, line: str, fragment: str) -> None:
    path = qdb.tmp / "jobs.jsonl"
    good = json.dumps({"handler": "test.record"})
    path.write_text(f"{good}\n{good}\n{line}\n{good}\n")
    assert_one_line_error(qdb.cli("enqueue", "--file", str(path)), fragment)
    assert qdb.statuses() == {}


@pytest.mark.parametrize(
    ("args", "fragment"),
    [
        (["test.record", "{not json"], "payload is not valid JSON"),
        (["", "{}"], "handler name must not be empty"),
        (["h" * 101, "{}"], "handler name is 101 characters long"),
        (["test.record", "{}", "--queue", ""], "queue name must not be empty"),
        (["test.record", "{}", "--queue", "q" * 101], "queue name is 101 characters long"),
        (["test.record", "{}", "--delay", "-1"], "delay must be a number of seconds >= 0"),
        (["test.record", "{}", "--max-attempts", "0"], "max attempts must be"),
    ],
)
def test_enqueue_bad_input(qdb: QueueDB, args: list[str], fragment: str) -> None:
    assert_one_line_error(qdb.cli("enqueue", *args), fragment)
    assert qdb.statuses() == {}


def test_payload_over_the_size_limit(qdb: QueueDB) -> None:
    result = qdb.cli("enqueue", "test.record", "-", stdin=json.dumps({"blob": "x" * 1_100_000}))
    assert_one_line_error(result, "the limit is 1048576")
    assert qdb.statuses() == {}


def test_payload_from_stdin(qdb: QueueDB) -> None:
    job_id = int(qdb.cli("enqueue", "test.record", "-", stdin='{"from": "stdin"}', check=True).stdout)
    assert qdb.scalar("SELECT payload FROM mysqlq_jobs WHERE id = %s", (job_id,)) == b'{"from":"stdin"}'


@pytest.mark.parametrize("command", [["stats"], ["check"], ["enqueue", "test.record"], ["migrate"]])
def test_unreachable_server(qdb: QueueDB, command: list[str]) -> None:
    env = qdb.env(MYSQLQ_DSN=f"mysql://root@127.0.0.1:{free_port()}/test")
    assert_one_line_error(qdb.cli(*command, env=env), "cannot connect to the database at 127.0.0.1")


def test_wrong_credentials_never_echo_the_password(qdb: QueueDB) -> None:
    assert qdb.server.tcp_dsn
    url = qdb.server.tcp_dsn.replace("mysql://root@", "mysql://nobody:hunter2@")
    result = qdb.cli("stats", env=qdb.env(MYSQLQ_DSN=url))
    assert_one_line_error(result, "access denied for user 'nobody'")
    assert "hunter2" not in result.stderr + result.stdout


def test_unknown_database(qdb: QueueDB) -> None:
    env = qdb.env(MYSQLQ_DSN=with_database(qdb.dsn, "mysqlq_no_such_db"))
    assert_one_line_error(qdb.cli("stats", env=env), "database 'mysqlq_no_such_db' does not exist")


def test_bad_dsn(qdb: QueueDB) -> None:
    assert_one_line_error(qdb.cli("stats", env=qdb.env(MYSQLQ_DSN="postgres://x/y")), "must start with mysql://")


@pytest.mark.parametrize("command", [["stats"], ["check"], ["enqueue", "test.record"], ["worker", "--burst"]])
def test_missing_schema(qdb: QueueDB, command: list[str]) -> None:
    qdb.query("DROP TABLE mysqlq_schema_version")
    assert_one_line_error(qdb.cli(*command), "the mysqlq schema is missing: run `mysqlq migrate`")


def test_outdated_and_newer_schemas_are_refused(qdb: QueueDB) -> None:
    qdb.query("DELETE FROM mysqlq_schema_version")
    qdb.query("INSERT INTO mysqlq_schema_version VALUES (0, NOW(6))")
    # Version 0 recorded means nothing applied: same as missing.
    assert_one_line_error(qdb.cli("check"), "run `mysqlq migrate`")
    qdb.query("INSERT INTO mysqlq_schema_version VALUES (999, NOW(6))")
    assert_one_line_error(qdb.cli("check"), "newer than this mysqlq knows")


def test_check_names_the_handler_that_cannot_load(qdb: QueueDB) -> None:
    result = qdb.cli("check")
    assert "database: ok" in result.stdout
    # The test handler package ships one entry point whose module cannot be imported.
    assert_one_line_error(result, "handler 'test.broken_import'")


def test_stats_counts_by_queue_and_status(qdb: QueueDB) -> None:
    with qdb.producer() as producer:
        for _ in range(3):
            producer.enqueue("test.record", queue="a")
        producer.enqueue("test.record", queue="b", delay=60)
    data = json.loads(qdb.cli("stats", "--json", check=True).stdout)
    by_queue = {entry["queue"]: entry for entry in data}
    assert by_queue["a"]["counts"]["ready"] == 3
    assert by_queue["a"]["oldest_ready_age"] >= 0
    assert by_queue["b"]["counts"]["scheduled"] == 1
    assert by_queue["b"]["oldest_ready_age"] is None
    table = qdb.cli("stats", check=True).stdout
    assert table.splitlines()[0].split()[:3] == ["queue", "ready", "scheduled"]


def test_handlers_lists_entry_points_without_importing_them(qdb: QueueDB) -> None:
    result = qdb.cli("handlers", "--json", check=True)
    found = {item["name"]: item for item in json.loads(result.stdout)}
    # Listing works even for the entry point whose import fails: nothing was imported.
    assert found["test.broken_import"]["target"] == "mysqlq_testhandlers.broken:handler"
    assert found["test.record"]["distribution"] == "mysqlq-testhandlers"


def test_every_option_has_an_environment_variable(qdb: QueueDB) -> None:
    help_text = qdb.cli("worker", "--help", check=True).stdout
    for variable in ["MYSQLQ_QUEUES", "MYSQLQ_BATCH_SIZE", "MYSQLQ_POLL_INTERVAL", "MYSQLQ_WORKER_NAME"]:
        assert variable in help_text
    env = qdb.env(MYSQLQ_QUEUE="from-env")
    job_id = int(qdb.cli("enqueue", "test.record", env=env, check=True).stdout)
    assert qdb.scalar("SELECT queue FROM mysqlq_jobs WHERE id = %s", (job_id,)) == "from-env"
