"""The README's systemd steps, in a user's order, under a real (private) systemd: a worker started
before `mysqlq migrate` fails with its reason at error priority; the CLI reads the root-only env file
with --env-file; after migrate the workers start."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest
from mysqlq_harness.systemd import PrivateSystemd
from mysqlq_harness.waiting import wait_for

from ..conftest import MYSQLQ, MariaDBServer, QueueDB, fresh_database, private_systemd, with_database

pytestmark = pytest.mark.slow

NOBODY = ("setpriv", "--reuid=65534", "--regid=65534", "--clear-groups", "--")
ENV = "/etc/mysqlq/mysqlq.env"


@pytest.fixture
def empty_database(qdb: QueueDB) -> Iterator[str]:
    with fresh_database(qdb.dsn, "mysqlq_first_", migrated=False) as name:
        yield name


@pytest.fixture
def systemd(mariadb: MariaDBServer, tmp_path: Path) -> Iterator[PrivateSystemd]:
    with private_systemd(mariadb, tmp_path / "systemd") as server:
        yield server
    assert server.leftovers() == []


def test_first_start_in_the_readmes_order(qdb: QueueDB, mariadb: MariaDBServer, empty_database: str,
                                          systemd: PrivateSystemd) -> None:
    assert mariadb.tcp_dsn
    dsn = with_database(mariadb.tcp_dsn, empty_database)
    systemd.run(MYSQLQ, "install-systemd", "--name", "worker")
    systemd.write(ENV, f"MYSQLQ_DSN={dsn}\nMYSQLQ_QUEUES=first\n")
    systemd.run("chmod", "600", ENV)

    # Started before the schema exists: it fails, and says why at error priority.
    systemd.systemctl("start", "worker@1", check=False)
    errors = wait_for(lambda: systemd.journal("-u", "worker@1", "-p", "err", "SYSLOG_IDENTIFIER=mysqlq"),
                      "the worker's error in the journal", 30)
    assert errors[0]["MESSAGE"] == "mysqlq: error: the mysqlq schema is missing: run `mysqlq migrate`"
    assert errors[0]["PRIORITY"] == "3" and errors[0]["COMMAND"] == "worker"
    systemd.systemctl("stop", "worker@1")

    # The CLI with the units' settings: only root can read them.
    denied = systemd.run(*NOBODY, MYSQLQ, "--env-file", ENV, "check", check=False, env={"HOME": "/"})
    assert denied.returncode == 1
    assert denied.stderr.strip() == f"mysqlq: error: cannot read {ENV}: permission denied (it holds the password: " \
                                    "run as root, e.g. with sudo)"
    migrated = systemd.run(MYSQLQ, "--env-file", ENV, "migrate")
    assert "schema migrated to version" in migrated.stdout

    systemd.systemctl("start", "worker@1")
    assert systemd.show("worker@1", "ActiveState")["ActiveState"] == "active"
    stats = systemd.run(MYSQLQ, "stats", "--env-file", ENV)
    assert "(no jobs)" in stats.stdout
    workers = systemd.run(MYSQLQ, "workers", "--env-file", ENV).stdout
    assert workers.startswith("1  ") and "queues=first" in workers
    systemd.systemctl("stop", "worker@1")
