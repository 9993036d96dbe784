"""Database accounts for tests that connect as someone other than root: made on the test server with
the grants a test gives them, and dropped afterwards."""

from __future__ import annotations

import contextlib
import secrets
import urllib.parse
from collections.abc import Iterator
from dataclasses import dataclass

from .conftest import QueueDB

# A connection over the unix socket comes from 'localhost', one over TCP from '127.0.0.1': the
# account exists for both, with the same password and grants.
HOSTS = ("localhost", "127.0.0.1")
# A password that a DSN must URL-encode and a file holds as it is.
AWKWARD = "p@ss:w/rd#1?"


@dataclass(frozen=True)
class DatabaseUser:
    name: str
    password: str

    def dsn(self, server_dsn: str, password: bool = True) -> str:
        """``server_dsn`` (root's) as this user, with the password in it unless told otherwise."""
        url = urllib.parse.urlsplit(server_dsn)
        secret = f":{urllib.parse.quote(self.password, safe='')}" if password else ""
        host = url.netloc.rpartition("@")[2]
        return urllib.parse.urlunsplit(url._replace(netloc=f"{self.name}{secret}@{host}"))


@contextlib.contextmanager
def database_user(qdb: QueueDB, *grants: str, prefix: str = "mq", password: str | None = None,
                  database: str | None = None) -> Iterator[DatabaseUser]:
    """A new account with ``grants`` (``GRANT`` statements with ``{user}`` where the account goes, e.g.
    ``"GRANT SELECT ON {db}.mysqlq_jobs TO {user}"``; ``{db}`` is ``database``, by default the test's)."""
    user = DatabaseUser(f"{prefix}_{secrets.token_hex(4)}", password or secrets.token_urlsafe(12))
    accounts = [f"'{user.name}'@'{host}'" for host in HOSTS]
    try:
        for account in accounts:
            qdb.query(f"CREATE USER {account} IDENTIFIED BY %s", (user.password,))
            for grant in grants:
                qdb.query(grant.format(user=account, db=f"`{database or qdb.name}`"))
        yield user
    finally:
        qdb.query(f"DROP USER IF EXISTS {', '.join(accounts)}")
