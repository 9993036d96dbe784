"""Tests for mysqlq_harness.mariadb (the private server), using only the ``mariadb`` client binary."""

from __future__ import annotations

import os
import pathlib
import shutil
import socket
import subprocess
import sys
from collections.abc import Iterator

import pytest
from mysqlq_harness.mariadb import MariaDBError, PrivateMariaDB

from ..conftest import unavailable


@pytest.fixture(autouse=True)
def _binaries() -> None:
    for name in ("mariadb", "mariadb-install-db"):
        if shutil.which(name) is None:
            unavailable(f"{name} not installed")
    if not (shutil.which("mariadbd") or os.access("/usr/sbin/mariadbd", os.X_OK)):
        unavailable("mariadbd not installed")


@pytest.fixture
def server(tmp_path: pathlib.Path) -> Iterator[PrivateMariaDB]:
    db = PrivateMariaDB(tmp_path / "db", die_with_parent=True)
    yield db
    db.kill()


def sql(db: PrivateMariaDB, statement: str, *, tcp: bool = False) -> str:
    where = ["-h", "127.0.0.1", "-P", str(db.port)] if tcp else ["-S", str(db.socket)]
    result = subprocess.run(
        ["mariadb", "--no-defaults", *where, "-u", "root", "-N", "-B", "-e", statement],
        capture_output=True,
        text=True,
        timeout=30,
        check=False,
    )
    assert result.returncode == 0, result.stderr
    return result.stdout.strip()


def process_exists(pid: int) -> bool:
    try:
        stat = pathlib.Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return False
    return stat.rsplit(")", 1)[-1].split()[0] not in ("Z", "X")


def test_start_kill_restart_stop(server: PrivateMariaDB) -> None:
    server.start()
    assert server.running
    pid = server.pid
    assert pid is not None
    assert server.dsn == f"mysql://root@localhost/test?unix_socket={server.socket}"
    assert sql(server, "select 1") == "1"
    assert sql(server, "select current_user()", tcp=True) == "root@127.0.0.1"
    assert sql(server, "select @@log_bin, @@max_connections, @@bind_address") == (
        "0\t500\t127.0.0.1"
    )
    sql(server, "create table test.t (id int primary key) engine=innodb")
    sql(server, "insert into test.t values (1), (2)")
    port = server.port

    server.kill()
    assert not server.running
    assert server.pid is None
    assert not process_exists(pid)

    server.start()
    assert server.port == port
    assert server.pid not in (None, pid)
    assert sql(server, "select count(*) from test.t") == "2"
    assert sql(server, "select 1", tcp=True) == "1"

    pid = server.pid
    assert pid is not None
    server.stop()
    assert not server.running
    assert not process_exists(pid)
    server.stop()  # stopping a stopped server is a no-op


def test_long_basedir_gets_short_socket(tmp_path: pathlib.Path) -> None:
    basedir = tmp_path / ("x" * 60) / ("y" * 60)
    db = PrivateMariaDB(basedir, die_with_parent=True)
    assert len(os.fsencode(db.socket)) <= 100
    assert not db.socket.is_relative_to(basedir.resolve())
    assert PrivateMariaDB(basedir).socket == db.socket  # stable across instances
    try:
        db.start()
        assert sql(db, "select database()") == "NULL"
        db.stop()
        assert not db.socket.parent.exists()
    finally:
        db.kill()


def test_start_failure_reports_error_log(server: PrivateMariaDB) -> None:
    with socket.socket() as blocker:
        blocker.bind(("127.0.0.1", 0))
        blocker.listen()
        server.basedir.mkdir(parents=True)
        (server.basedir / "port").write_text(f"{blocker.getsockname()[1]}\n")
        with pytest.raises(
            MariaDBError, match=r"(?s)exited.*error log tail.*Bind on TCP/IP"
        ):
            server.start(timeout=30)
    assert not server.running


def cli(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "mysqlq_harness.mariadb", *args],
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )


def test_cli_round_trip(tmp_path: pathlib.Path) -> None:
    d = str(tmp_path / "cli")
    try:
        started = cli("start", d)
        assert started.returncode == 0, started.stderr
        dsn = started.stdout.strip()
        assert dsn.startswith("mysql://root@localhost/test?unix_socket=/")

        status = cli("status", d)
        assert status.returncode == 0
        assert status.stdout.startswith("running pid=")
        pid = int(status.stdout.split("pid=")[1].split()[0])

        again = cli("start", d)  # reuses the running server
        assert again.returncode == 0, again.stderr
        assert again.stdout.strip() == dsn
        assert cli("status", d).stdout == status.stdout

        assert cli("dsn", d).stdout.strip() == dsn
        db = PrivateMariaDB(pathlib.Path(d))
        assert cli("dsn", "--tcp", d).stdout.strip() == db.tcp_dsn
        assert sql(db, "select 1") == "1"

        stopped = cli("stop", d)
        assert stopped.returncode == 0, stopped.stderr
        assert not process_exists(pid)
        gone = cli("status", d)
        assert (gone.returncode, gone.stdout.strip()) == (3, "stopped")
    finally:
        cli("stop", d)


def test_cli_errors_are_one_line(tmp_path: pathlib.Path) -> None:
    result = cli("dsn", str(tmp_path / "nothing"))
    assert result.returncode == 1
    assert result.stderr.count("\n") == 1
    assert result.stderr.startswith("mysqlq_harness.mariadb: error: no data dir")
    assert "Traceback" not in result.stderr
