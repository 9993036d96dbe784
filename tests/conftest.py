"""Shared pytest fixtures.

Server part: every test that needs a database uses the session fixture
``mariadb``.  With ``MYSQLQ_TEST_DSN`` set, that server is used as is (and
cannot be killed or restarted).  Otherwise a private ``mariadbd`` is started
in a temp dir for the session (scripts/private_mariadb.py) and stopped at the
end.  When no server can be had, tests are skipped, or fail when ``CI`` is set.

This part must stay importable without the mysqlq package or any DB driver.
"""

from __future__ import annotations

import os
import pathlib
import sys
import urllib.parse
from collections.abc import Iterator
from typing import NoReturn

import pytest

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parent.parent / "scripts"))

from private_mariadb import MariaDBError, PrivateMariaDB, server_greets


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

    server = PrivateMariaDB(tmp_path_factory.mktemp("mariadb"), die_with_parent=True)
    try:
        server.start()
    except (MariaDBError, OSError) as e:
        server.kill()
        unavailable(f"cannot start a private mariadbd: {e}")
    try:
        yield MariaDBServer(server.dsn, server)
    finally:
        try:
            server.stop()
        except MariaDBError:
            server.kill()


@pytest.fixture
def restartable_mariadb(mariadb: MariaDBServer) -> Iterator[MariaDBServer]:
    """``mariadb`` for tests that kill/restart it; restarted afterwards if left down."""
    if not mariadb.restartable:
        unavailable("needs a private, restartable server (MYSQLQ_TEST_DSN is set)")
    yield mariadb
    if not mariadb.running:
        mariadb.start()


# --- package fixtures ---
