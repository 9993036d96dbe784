"""`mysqlq migrate` on a database that does not exist: one line saying so, or --create-database."""

from __future__ import annotations

import secrets
from collections.abc import Iterator

import pytest

from mysqlq.store.schema import latest_version

from ..conftest import QueueDB, with_database
from ..ops_fixtures import assert_one_line_error


@pytest.fixture
def missing_database(qdb: QueueDB) -> Iterator[str]:
    """The name of a database that does not exist yet (dropped afterwards if a test created it)."""
    name = "mysqlq_new_" + secrets.token_hex(4)
    yield name
    qdb.query(f"DROP DATABASE IF EXISTS `{name}`")


def databases(qdb: QueueDB) -> set[str]:
    return {row[0] for row in qdb.query("SELECT schema_name FROM information_schema.schemata")}


def test_migrate_on_a_missing_database_says_how_to_create_it(qdb: QueueDB, missing_database: str) -> None:
    result = qdb.cli("migrate", env=qdb.env(MYSQLQ_DSN=with_database(qdb.dsn, missing_database)))
    assert_one_line_error(result, f"database '{missing_database}' does not exist")
    assert "mysqlq migrate --create-database" in result.stderr
    assert result.returncode == 1
    assert missing_database not in databases(qdb)


def test_create_database_creates_it_and_migrates(qdb: QueueDB, missing_database: str) -> None:
    env = qdb.env(MYSQLQ_DSN=with_database(qdb.dsn, missing_database))
    result = qdb.cli("migrate", "--create-database", env=env, check=True)
    assert f"created database '{missing_database}'" in result.stdout
    assert f"schema migrated to version {latest_version()}" in result.stdout
    assert qdb.scalar("SELECT default_collation_name FROM information_schema.schemata WHERE schema_name = %s",
                      (missing_database,)) == "utf8mb4_bin"
    # The first command a user runs has made a database every other command accepts.
    assert "(no jobs)" in qdb.cli("stats", env=env, check=True).stdout
    again = qdb.cli("migrate", "--create-database", env=env, check=True)
    assert "created" not in again.stdout and "up to date" in again.stdout


def test_create_database_from_the_environment(qdb: QueueDB, missing_database: str) -> None:
    env = qdb.env(MYSQLQ_DSN=with_database(qdb.dsn, missing_database), MYSQLQ_CREATE_DATABASE="1")
    qdb.cli("migrate", env=env, check=True)
    assert missing_database in databases(qdb)


@pytest.mark.parametrize("name", ["bad`name", "a b", "x" * 65, "drop;me"])
def test_create_database_refuses_a_name_it_would_have_to_quote(qdb: QueueDB, name: str) -> None:
    before = databases(qdb)
    result = qdb.cli("migrate", "--create-database", env=qdb.env(MYSQLQ_DSN=with_database(qdb.dsn, name)))
    assert_one_line_error(result, "may use only letters, digits, _ $ and -")
    assert databases(qdb) == before


def test_create_database_leaves_an_existing_database_to_a_user_who_may_not_create(qdb: QueueDB) -> None:
    assert qdb.server.tcp_dsn
    user = "mq_" + secrets.token_hex(4)
    qdb.query(f"CREATE USER '{user}'@'%' IDENTIFIED BY 'pw'")
    try:
        # Privileges on mysqlq's tables only: CREATE DATABASE would be refused, even with IF NOT EXISTS.
        for (table,) in qdb.query("SHOW TABLES"):
            qdb.query(f"GRANT ALL ON `{qdb.name}`.`{table}` TO '{user}'@'%'")
        dsn = with_database(qdb.server.tcp_dsn.replace("mysql://root@", f"mysql://{user}:pw@"), qdb.name)
        result = qdb.cli("migrate", "--create-database", env=qdb.env(MYSQLQ_DSN=dsn), check=True)
        assert "up to date" in result.stdout and "created" not in result.stdout
    finally:
        qdb.query(f"DROP USER '{user}'@'%'")
