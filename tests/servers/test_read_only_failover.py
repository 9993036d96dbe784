"""A multi-host DSN over a primary and a read-only replica (MySQL Group Replication's single-primary
shape): producers and workers write to the server that takes writes, and move when the roles swap."""

from __future__ import annotations

import dataclasses
import urllib.parse
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

import pytest
from mysqlq_harness.jobs import every_job
from mysqlq_harness.mariadb import PrivateMariaDB

from mysqlq import DatabaseUnavailable, Dsn, Producer, Settings
from mysqlq.store.db import Database, connect
from mysqlq.store.schema import migrate

from ..conftest import MariaDBServer, QueueDB, query_once, throwaway_mariadb, unavailable

WRITER, PASSWORD = "mysqlq_writer", "writer-pw"


@pytest.fixture(scope="module")
def second_server(tmp_path_factory: pytest.TempPathFactory, mariadb: MariaDBServer) -> Iterator[PrivateMariaDB]:
    """A second private mariadbd beside the session's server."""
    if mariadb.tcp_dsn is None:
        unavailable("needs private servers (MYSQLQ_TEST_DSN is set)")
    with throwaway_mariadb(tmp_path_factory.mktemp("second-mariadb"), "a second private mariadbd") as server:
        yield server


@dataclass
class Pair:
    """The same migrated database on two servers, a user without SUPER on both, and the DSN
    listing them (first, second)."""

    database: str
    admins: tuple[str, str]  # root DSNs of the two servers
    dsn: str  # the writer user's DSN naming both servers

    def admin(self, index: int, sql: str, params: Any = None) -> list[tuple[Any, ...]]:
        return query_once(connect(Dsn.parse(self.admins[index]), use_database=False), sql, params)

    def read_only(self, index: int, on: bool) -> None:
        self.admin(index, f"SET GLOBAL read_only = {'ON' if on else 'OFF'}")

    def jobs(self, index: int) -> dict[int, str]:
        rows = self.admin(index, f"SELECT id, status FROM {every_job(database=self.database)}")
        return {int(job_id): str(status) for job_id, status in rows}


def address(tcp_dsn: str) -> str:
    url = urllib.parse.urlsplit(tcp_dsn)
    return f"{url.hostname}:{url.port}"


@pytest.fixture
def pair(qdb: QueueDB, second_server: PrivateMariaDB) -> Iterator[Pair]:
    assert qdb.server.tcp_dsn is not None
    admins = (qdb.server.dsn, second_server.dsn)
    hosts = ",".join(address(tcp) for tcp in (qdb.server.tcp_dsn, second_server.tcp_dsn))
    found = Pair(qdb.name, admins, f"mysql://{WRITER}:{PASSWORD}@{hosts}/{qdb.name}")
    found.admin(1, f"CREATE DATABASE {qdb.name}")
    conn = connect(dataclasses.replace(Dsn.parse(second_server.dsn), database=qdb.name))
    with conn.cursor() as cur:
        migrate(cur, qdb.name)
    conn.close()
    for index in (0, 1):  # READ_ONLY ADMIN is not in a database-level grant: read_only binds this user
        found.admin(index, f"CREATE USER IF NOT EXISTS '{WRITER}'@'%' IDENTIFIED BY '{PASSWORD}'")
        found.admin(index, f"GRANT ALL ON {qdb.name}.* TO '{WRITER}'@'%'")
        found.admin(index, f"GRANT PROCESS ON *.* TO '{WRITER}'@'%'")
    try:
        yield found
    finally:
        qdb.stop_workers()
        for index in (0, 1):
            found.read_only(index, False)
        found.admin(1, f"DROP DATABASE IF EXISTS {qdb.name}")


def test_a_read_only_first_server_is_passed_over(pair: Pair, qdb: QueueDB) -> None:
    pair.read_only(0, True)
    conn = connect(Dsn.parse(pair.dsn))
    with conn.cursor() as cur:
        cur.execute("SELECT @@port")
        assert cur.fetchone() == pair.admin(1, "SELECT @@port")[0]
    conn.close()
    with Producer(Settings(dsn=Dsn.parse(pair.dsn), hint_dir=str(qdb.tmp / "hints"))) as producer:
        job_id = producer.enqueue("test.record")
    assert pair.jobs(0) == {}
    assert pair.jobs(1) == {job_id: "ready"}
    assert qdb.worker("--burst", env=qdb.env(MYSQLQ_DSN=pair.dsn)).wait(timeout=60) == 0
    assert pair.jobs(1) == {job_id: "done"}


def test_when_every_server_is_read_only_the_error_says_so_in_one_line(pair: Pair) -> None:
    pair.read_only(0, True)
    pair.read_only(1, True)
    with pytest.raises(DatabaseUnavailable, match=r"none of the 2 hosts .*read-only \(read_only=ON\)") as caught:
        connect(Dsn.parse(pair.dsn))
    assert "\n" not in str(caught.value)


def test_a_write_refused_as_read_only_moves_the_connection_to_the_writer(pair: Pair) -> None:
    """The server a connection is on turns read-only (error 1290 on the next write): the unit of work
    is retried on the server that took over."""
    pair.read_only(0, True)
    db = Database(Dsn.parse(pair.dsn))
    assert db.run(lambda cur: cur.execute("SELECT @@port") and cur.fetchone()[0]) == int(
        pair.admin(1, "SELECT @@port")[0][0])
    pair.read_only(0, False)
    pair.read_only(1, True)
    db.run(lambda cur: cur.execute(f"DELETE FROM {pair.database}.mysqlq_jobs WHERE id = 0"))
    assert db.run(lambda cur: cur.execute("SELECT @@port") and cur.fetchone()[0]) == int(
        pair.admin(0, "SELECT @@port")[0][0])
    db.close()


def test_a_running_worker_and_a_producer_follow_the_writer(pair: Pair, qdb: QueueDB) -> None:
    pair.read_only(0, True)
    settings = Settings(dsn=Dsn.parse(pair.dsn), hint_dir=str(qdb.tmp / "hints"))
    worker = qdb.worker("--name", "follower", env=qdb.env(MYSQLQ_DSN=pair.dsn))
    with Producer(settings) as producer:
        before = producer.enqueue("test.record")
        qdb.wait_for(lambda: pair.jobs(1).get(before) == "done", timeout=30, what="the job on the second server")
        pair.read_only(0, False)
        pair.read_only(1, True)
        after = producer.enqueue("test.record")
    assert after in pair.jobs(0)  # ids are per server: the second still holds only the first job
    assert pair.jobs(1) == {before: "done"}
    qdb.wait_for(lambda: pair.jobs(0).get(after) == "done", timeout=30, what="the job on the first server")
    assert worker.poll() is None
    qdb.stop_workers()
    assert worker.returncode == 0
    assert pair.jobs(1) == {before: "done"}
