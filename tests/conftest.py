"""Shared pytest fixtures.

Server part: every test that needs a database uses the session fixture
``mariadb``.  With ``MYSQLQ_TEST_DSN`` set, that server is used as is (and
cannot be killed or restarted).  Otherwise a private ``mariadbd`` is started
in a temp dir for the session (mysqlq_harness.mariadb) and stopped at the
end; with ``MYSQLQ_TEST_SERVER=mysql`` (``make test-mysql``) a private MySQL
``mysqld`` instead (mysqlq_harness.mysql).  When no server can be had, tests
are skipped, or fail when ``CI`` is set.

This part must stay importable without the mysqlq package or any DB driver.
"""

from __future__ import annotations

import contextlib
import os
import pathlib
import subprocess
import sys
import urllib.parse
from collections.abc import Iterator
from typing import Any, NoReturn, Protocol, TypeVar

import pytest
from mysqlq_harness.jobs import every_job
from mysqlq_harness.lifecycle import child_env
from mysqlq_harness.mariadb import MariaDBError, PrivateMariaDB, server_greets
from mysqlq_harness.mysql import PrivateMySQL
from mysqlq_harness.systemd import PrivateSystemd, missing_prerequisites
from mysqlq_harness.waiting import stop_processes, wait_done, wait_for

ON_MYSQL = os.environ.get("MYSQLQ_TEST_SERVER", "mariadb") == "mysql"  # the private server is MySQL's mysqld


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    """Each lane runs the tests of its server's own features: Galera's in the MariaDB lane, Group
    Replication's in the MySQL lane (deselected in the other, where they cannot apply)."""
    other = "mariadb_only" if ON_MYSQL else "mysql_only"
    kept = [item for item in items if item.get_closest_marker(other) is None]
    if len(kept) != len(items):
        config.hook.pytest_deselected(items=[item for item in items if item not in kept])
        items[:] = kept


def unavailable(reason: str) -> NoReturn:
    """Fail under CI (the server is required there), skip elsewhere."""
    if os.environ.get("CI"):
        pytest.fail(reason, pytrace=False)
    pytest.skip(reason)


class MariaDBServer:
    """What tests see of the database server.

    ``dsn`` is always set.  ``kill()`` (SIGKILL, a crash) and ``start()``
    (restart on the same data dir, same socket and port, so ``dsn`` stays
    valid) work only when ``restartable`` is true, i.e. for the private server.
    """

    def __init__(self, dsn: str, private: PrivateMariaDB | None = None) -> None:
        self.dsn = dsn
        self.private = private

    @property
    def restartable(self) -> bool:
        return self.private is not None

    @property
    def tcp_dsn(self) -> str | None:
        """DSN over TCP 127.0.0.1 for the private server (None for an external one)."""
        return self.private.tcp_dsn if self.private is not None else None

    @property
    def running(self) -> bool:
        return self.private.running if self.private is not None else True

    def _require_private(self) -> PrivateMariaDB:
        if self.private is None:
            raise RuntimeError("the server from MYSQLQ_TEST_DSN cannot be restarted")
        return self.private

    def kill(self) -> None:
        self._require_private().kill()

    def start(self, timeout: float = 60) -> None:
        self._require_private().start(timeout=timeout)

    def stop(self, timeout: float = 30) -> None:
        self._require_private().stop(timeout=timeout)

    def __repr__(self) -> str:
        return f"MariaDBServer({self.dsn!r}, restartable={self.restartable})"


def _dsn_address(dsn: str) -> str | tuple[str, int]:
    """The unix socket path or (host, port) a mysql:// DSN points at."""
    url = urllib.parse.urlsplit(dsn)
    query = urllib.parse.parse_qs(url.query)
    if "unix_socket" in query:
        return query["unix_socket"][0]
    return (url.hostname or "localhost", url.port or 3306)


class Server(Protocol):
    """A private server of the harness (PrivateMariaDB, PrivateGalera)."""

    def start(self) -> None: ...
    def stop(self) -> None: ...
    def kill(self) -> None: ...


S = TypeVar("S", bound=Server)


@contextlib.contextmanager
def throwaway(server: S, what: str) -> Iterator[S]:
    """``server`` started, then stopped (or killed) afterwards; unavailable() if it cannot start."""
    try:
        server.start()
    except (MariaDBError, OSError, subprocess.SubprocessError) as e:
        server.kill()
        unavailable(f"cannot start {what}: {e}")
    try:
        yield server
    finally:
        try:
            server.stop()
        except MariaDBError:
            server.kill()


def throwaway_mariadb(directory: pathlib.Path, what: str = "a private mariadbd",
                      **options: Any) -> contextlib.AbstractContextManager[PrivateMariaDB]:
    """A throwaway mariadbd in ``directory`` (PrivateMariaDB ``options``), as :func:`throwaway`."""
    if ON_MYSQL:
        return throwaway(PrivateMySQL(directory, die_with_parent=True, **options), what.replace("mariadbd", "mysqld"))
    return throwaway(PrivateMariaDB(directory, die_with_parent=True, **options), what)


@pytest.fixture(scope="session")
def mariadb(tmp_path_factory: pytest.TempPathFactory) -> Iterator[MariaDBServer]:
    """The database server for the session (see module docstring)."""
    external = os.environ.get("MYSQLQ_TEST_DSN")
    if external:
        address = _dsn_address(external)
        if not server_greets(address, timeout=5):
            unavailable(f"MYSQLQ_TEST_DSN server not reachable at {address!r}")
        yield MariaDBServer(external)
        return

    with throwaway_mariadb(tmp_path_factory.mktemp("mariadb")) as server:
        yield MariaDBServer(server.dsn, server)


@pytest.fixture
def restartable_mariadb(mariadb: MariaDBServer) -> Iterator[MariaDBServer]:
    """``mariadb`` for tests that kill/restart it; restarted afterwards if left down."""
    if not mariadb.restartable:
        unavailable("needs a private, restartable server (MYSQLQ_TEST_DSN is set)")
    yield mariadb
    if not mariadb.running:
        mariadb.start()


# --- package fixtures ---

import secrets  # noqa: E402
from collections.abc import Callable  # noqa: E402
from dataclasses import dataclass, field  # noqa: E402

REPO = pathlib.Path(__file__).resolve().parent.parent
MYSQLQ = str(pathlib.Path(sys.executable).parent / "mysqlq")


def with_database(dsn: str, database: str) -> str:
    """The same server DSN naming another database."""
    url = urllib.parse.urlsplit(dsn)
    return urllib.parse.urlunsplit(url._replace(path="/" + database))


def numbers(count: int) -> str:
    """A derived table of the integers 1…count in a column ``seq``, for INSERT … SELECT, on MariaDB and
    MySQL alike (MariaDB's seq_1_to_N tables do not exist on MySQL, and MySQL stops a recursive CTE at
    1,000 rows): cross products of the ten digits."""
    digits = "(SELECT 0 AS d UNION ALL SELECT 1 UNION ALL SELECT 2 UNION ALL SELECT 3 UNION ALL SELECT 4 " \
             "UNION ALL SELECT 5 UNION ALL SELECT 6 UNION ALL SELECT 7 UNION ALL SELECT 8 UNION ALL SELECT 9)"
    places = max(1, len(str(count)))
    terms = " + ".join(f"d{n}.d * {10 ** n}" for n in range(places))
    joined = ", ".join(f"{digits} AS d{n}" for n in range(places))
    return f"(SELECT {terms} + 1 AS seq FROM {joined} HAVING seq <= {count}) AS numbers"


def query_once(conn: Any, sql: str, params: Any = None) -> list[tuple[Any, ...]]:
    """Run one statement on ``conn``, return its rows, and close the connection."""
    try:
        with conn.cursor() as cur:
            cur.execute(sql, params)
            return list(cur.fetchall())
    finally:
        conn.close()


@dataclass
class QueueDB:
    """A fresh, migrated database for one test, with helpers to look inside it."""

    dsn: str
    name: str
    server: MariaDBServer
    tmp: pathlib.Path
    procs: list[subprocess.Popen[bytes]] = field(default_factory=list)

    def connect(self) -> Any:
        from mysqlq.core.config import Dsn
        from mysqlq.store.db import connect

        return connect(Dsn.parse(self.dsn))

    def query(self, sql: str, params: Any = None) -> list[tuple[Any, ...]]:
        return query_once(self.connect(), sql, params)

    def scalar(self, sql: str, params: Any = None) -> Any:
        rows = self.query(sql, params)
        return rows[0][0] if rows else None

    def statuses(self) -> dict[str, int]:
        return {status: int(count) for status, count in self.query(
            f"SELECT status, COUNT(*) FROM {every_job('status')} GROUP BY status")}

    def settings(self, **changes: Any) -> Any:
        from mysqlq import Dsn, Settings

        return Settings(dsn=Dsn.parse(self.dsn), hint_dir=str(self.tmp / "hints"), **changes)

    def producer(self, pool_size: int | None = None, **changes: Any) -> Any:
        from mysqlq import Producer

        if pool_size is None:
            return Producer(self.settings(**changes))
        return Producer(self.settings(**changes), pool_size=pool_size)

    def env(self, **extra: str) -> dict[str, str]:
        return child_env({"MYSQLQ_DSN": self.dsn, "MYSQLQ_HINT_DIR": str(self.tmp / "hints"),
                          "MYSQLQ_TEST_RECORD": str(self.record_path), "MYSQLQ_LOG_FORMAT": "console", **extra})

    @property
    def record_path(self) -> pathlib.Path:
        return self.tmp / "record.txt"

    def records(self) -> list[list[str]]:
        """Lines the test handlers wrote, split in words (job_id attempt queue/word ...)."""
        if not self.record_path.exists():
            return []
        return [line.split() for line in self.record_path.read_text().splitlines() if line.strip()]

    def cli(self, *args: str, env: dict[str, str] | None = None, check: bool = False,
            timeout: float = 60, stdin: str = "") -> subprocess.CompletedProcess[str]:
        """Run `mysqlq ARGS` against this database and capture its output."""
        result = subprocess.run([MYSQLQ, *args], env=env or self.env(), capture_output=True, text=True,
                                timeout=timeout, input=stdin)
        if check and result.returncode != 0:
            raise AssertionError(f"mysqlq {' '.join(args)} failed ({result.returncode}): {result.stderr}")
        return result

    def worker_command(self) -> list[str]:
        return [MYSQLQ, "worker", "--retry-base", "0.05", "--poll-interval", "0.2"]

    def worker(self, *args: str, env: dict[str, str] | None = None,
               log: pathlib.Path | None = None) -> subprocess.Popen[bytes]:
        """Start `mysqlq worker ARGS` in the background (stopped at the end of the test)."""
        out = open(log or (self.tmp / f"worker-{len(self.procs)}.log"), "ab")  # noqa: SIM115
        proc = subprocess.Popen([*self.worker_command(), *args],
                                env=env or self.env(), stdout=out, stderr=subprocess.STDOUT)
        out.close()
        self.procs.append(proc)
        return proc

    def wait_for(self, condition: Callable[[], Any], timeout: float = 60, what: str = "condition") -> Any:
        """Poll until condition() is truthy; fail with ``what`` after ``timeout`` seconds."""
        return wait_for(condition, what, timeout)

    def wait_done(self, count: int, timeout: float = 60) -> None:
        """Until ``count`` jobs are done (mysqlq_harness.waiting.wait_done)."""
        conn = self.connect()
        try:
            with conn.cursor() as cur:
                wait_done(cur, count, timeout=timeout)
        finally:
            conn.close()

    def logs(self) -> str:
        return "\n".join(p.read_text(errors="replace") for p in sorted(self.tmp.glob("worker-*.log")))

    def stop_workers(self) -> None:
        stop_processes(self.procs)


@contextlib.contextmanager
def fresh_database(server_dsn: str, prefix: str = "mysqlq_t_", migrated: bool = True) -> Iterator[str]:
    """A new database (``prefix`` and a random suffix) on the server of ``server_dsn``, migrated to the
    current schema when ``migrated``; yields its name and drops it afterwards."""
    from mysqlq.core.config import Dsn
    from mysqlq.store.db import connect
    from mysqlq.store.schema import migrate

    name = prefix + secrets.token_hex(4)
    query_once(connect(Dsn.parse(server_dsn)), f"CREATE DATABASE {name}")
    try:
        if migrated:
            conn = connect(Dsn.parse(with_database(server_dsn, name)))
            try:
                with conn.cursor() as cur:
                    migrate(cur, name)
            finally:
                conn.close()
        yield name
    finally:
        query_once(connect(Dsn.parse(server_dsn)), f"DROP DATABASE IF EXISTS {name}")


@pytest.fixture
def qdb(mariadb: MariaDBServer, tmp_path: pathlib.Path) -> Iterator[QueueDB]:
    """A fresh database on the test server, migrated to the current schema."""
    with fresh_database(mariadb.dsn) as name:
        (tmp_path / "hints").mkdir()
        db = QueueDB(dsn=with_database(mariadb.dsn, name), name=name, server=mariadb, tmp=tmp_path)
        try:
            yield db
        finally:
            db.stop_workers()
            if not mariadb.running:
                mariadb.start()


def private_systemd(mariadb: MariaDBServer, directory: pathlib.Path) -> PrivateSystemd:
    """A private systemd (mysqlq_harness.systemd, not started yet) whose units reach the session's
    server over TCP; unavailable() when it cannot run here."""
    reason = missing_prerequisites()
    if reason:
        unavailable(f"private systemd: {reason}")
    if mariadb.tcp_dsn is None:
        unavailable("units under a private systemd need the private server's TCP DSN")
    return PrivateSystemd(directory, traversable_root=True)


@pytest.fixture
def journald(tmp_path: pathlib.Path) -> Iterator[Any]:
    """A private journald in namespaces of its own (mysqlq_harness.journald)."""
    from mysqlq_harness.journald import PrivateJournald, missing_prerequisites

    reason = missing_prerequisites()
    if reason:
        unavailable(f"private journald: {reason}")
    with PrivateJournald(tmp_path / "journald") as server:
        yield server
