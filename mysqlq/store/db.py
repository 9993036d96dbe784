"""Connections: opening them with the session settings mysqlq relies on, and retrying transient errors."""

from __future__ import annotations

import contextlib
import random
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from functools import partial
from typing import Any, TypeVar

import MySQLdb
import MySQLdb.connections
import MySQLdb.cursors

from mysqlq.core import logs, tls
from mysqlq.core.config import Dsn, Isolation
from mysqlq.core.errors import ConfigError, DatabaseUnavailable
from mysqlq.core.tls import SslMode
from mysqlq.store.sql import query

T = TypeVar("T")
Connection = MySQLdb.connections.Connection
Cursor = MySQLdb.cursors.Cursor

log = logs.get_logger("mysqlq.db")

# Errors after which the same work may simply be tried again: deadlock, lock wait timeout and a
# lost certification (rolled back; retried on the same connection), a write refused by a read-only
# server (the writer moved: retried on a new connection, through the DSN's host list), and every
# flavour of "the server went away or is restarting".
DEADLOCK, LOCK_WAIT_TIMEOUT, GR_ROLLBACK = 1213, 1205, 3101
TRANSIENT_CODES = frozenset(
    {
        DEADLOCK,
        LOCK_WAIT_TIMEOUT,
        1040,  # too many connections
        1047,  # WSREP has not yet prepared node for application use (Galera: not in the primary component)
        1290,  # the server runs with --read-only / --super-read-only (a replica or Group Replication secondary)
        1836,  # running in read-only mode (MariaDB)
        GR_ROLLBACK,  # Group Replication (multi-primary): the transaction failed certification at commit
        1053,  # server shutdown in progress
        1927,  # connection was killed (MariaDB)
        2002,  # can't connect through socket
        2003,  # can't connect to server
        2006,  # server has gone away
        2013,  # lost connection during query
        2026,  # TLS error: on an open connection, the server went away (reset, unexpected EOF) under TLS
        2055,  # lost connection (system error)
        4031,  # disconnected by server: client inactive too long
    }
)
ACCESS_DENIED, UNKNOWN_DATABASE = 1045, 1049
TLS_FAILED = 2026  # the client's "SSL connection error": no TLS offered, a certificate refused
SECURE_TRANSPORT_REQUIRED = 3159  # MySQL: require_secure_transport=ON refused a connection without TLS

# mysqlclient built on MariaDB Connector/C (numbered 3.x; Debian's libmariadb, most Linux builds)
# emulates the ssl_mode argument, and its VERIFY_CA checks the host name too. On MySQL's own client
# library (8.x and later) the argument goes through as the MySQL clients understand it.
CONNECTOR_C = str(MySQLdb.get_client_info()).startswith("3.")
# mysqlclient before 2.2 refuses the ssl_mode argument on Connector/C (its issue #439): there TLS can
# be asked for only by giving TLS files, and a mode that must encrypt cannot be carried out.
OLD_MYSQLCLIENT = CONNECTOR_C and tuple(MySQLdb.version_info[:2]) < (2, 2)
_warned_old = False


def tls_arguments(dsn: Dsn) -> dict[str, Any]:
    """mysqlclient's connect() arguments for the DSN's ``ssl_mode`` and TLS files (docs/security.md
    has the table).

    On Connector/C, mysqlclient's ``ssl_mode="REQUIRED"`` asks for TLS whenever the server offers it
    and goes on in plain text when it offers none; with a CA file the server's certificate chain is
    verified against it, its host name is not. Its ``VERIFY_IDENTITY`` also checks the host name. So:
    PREFERRED is the library's REQUIRED; REQUIRED is the same, checked after connecting (mysqlq refuses
    a connection without a cipher); VERIFY_CA is the library's REQUIRED with the CA file, checked the
    same way; VERIFY_IDENTITY is the library's own. Over a unix socket, PREFERRED without a client
    certificate sends no TLS: the socket never leaves the host, and both servers count it as secure.
    """
    files = {key: path for key, path in (("ca", dsn.ssl_ca), ("cert", dsn.ssl_cert), ("key", dsn.ssl_key)) if path}
    mode = dsn.ssl_mode
    local = dsn.unix_socket or (dsn.host == "localhost" and not dsn.failover)  # the clients' localhost: a socket
    if mode == SslMode.PREFERRED and local and not files:
        mode = SslMode.DISABLED
    if OLD_MYSQLCLIENT:
        return _old_mysqlclient_arguments(mode, files)
    return {"ssl_mode": tls.library_mode(mode, CONNECTOR_C), **({"ssl": files} if files else {})}


def error_code(exc: BaseException) -> int | None:
    """The server or client error number of a MySQLdb exception, if it has one."""
    args = getattr(exc, "args", ())
    return args[0] if args and isinstance(args[0], int) else None


def is_transient(exc: BaseException) -> bool:
    """True for errors that a retry on a fresh connection can cure."""
    if isinstance(exc, MySQLdb.InterfaceError):
        return True  # the connection object is closed or unusable
    return isinstance(exc, MySQLdb.OperationalError) and error_code(exc) in TRANSIENT_CODES


FAILOVER_CONNECT_TIMEOUT = 3  # seconds per host when a DSN names several: a dead node costs little


@contextlib.contextmanager
def transaction(conn: Connection) -> Iterator[Connection]:
    """BEGIN, then COMMIT when the block ends, or ROLLBACK when it raises (the error goes on). The one
    way mysqlq opens a transaction on a connection that is otherwise in autocommit.

    Refused inside another on the same connection: the server would take the second BEGIN as a
    COMMIT of the first, and what should have committed together would not."""
    if getattr(conn, _IN_TRANSACTION, False):
        raise RuntimeError("a transaction was opened inside another on the same connection, "
                           "whose BEGIN would have committed the first")
    conn.begin()
    setattr(conn, _IN_TRANSACTION, True)
    try:
        yield conn
    except BaseException:
        with contextlib.suppress(MySQLdb.Error):  # a lost connection rolls back by itself
            conn.rollback()
        raise
    else:
        conn.commit()
    finally:
        setattr(conn, _IN_TRANSACTION, False)


_IN_TRANSACTION = "_mysqlq_in_transaction"  # set on a connection while transaction() holds it open


def connect(dsn: Dsn, *, isolation: str | None = None, connect_timeout: int = 10,
            use_database: bool = True, multi_statements: bool = False, worker_name: str | None = None) -> Connection:
    """Open an autocommit connection in UTC, translating refusals into one-line errors
    (``use_database=False``: to the server only, e.g. to create the DSN's database).

    The connection takes one statement per query (the driver's default would take several, so that
    a ``;`` smuggled into an application's SQL could run a second statement), except with
    ``multi_statements``: the worker's own connection, which sends only mysqlq's statements and
    claims a batch, reads it back and completes the one before in one query, and a producer's group
    commit (mysqlq.producer.group_commit), which sends a group's INSERT, its ids' read and COMMIT so.

    ``worker_name``: the connection is a worker's, and the statements that end an attempt write
    that name beside the job (a claim writes only the worker's id: see session_worker).

    With several hosts, the first that accepts and takes writes is used: a server with ``read_only``
    or ``super_read_only`` ON (a replica, a Group Replication secondary or a member not ONLINE) and a
    Galera node not ready for queries are passed over. The error names the last failure when none does.
    """
    addresses = dsn.addresses
    failure: DatabaseUnavailable | None = None
    for host, port in addresses:
        timeout = connect_timeout if len(addresses) == 1 else min(connect_timeout, FAILOVER_CONNECT_TIMEOUT)
        try:
            conn = _connect_one(dsn, host, port, timeout, use_database, multi_statements)
        except DatabaseUnavailable as exc:
            if not exc.transient:
                raise
            failure = exc
            continue
        refusal = _refuses_writes(conn) if len(addresses) > 1 else None
        if refusal:
            failure = DatabaseUnavailable(f"the server at {host}:{port} {refusal}", transient=True)
            with contextlib.suppress(MySQLdb.Error):
                conn.close()
            continue
        if isolation:
            _set_isolation(conn, Isolation(isolation))
        if worker_name is not None:
            with conn.cursor() as cur:
                cur.execute(query("session_worker"), {"name": worker_name})
        return conn
    assert failure is not None
    if len(addresses) > 1:
        raise DatabaseUnavailable(f"none of the {len(addresses)} hosts of the DSN answers (last: {failure})",
                                  transient=True)
    raise failure


def _set_isolation(conn: Connection, isolation: Isolation) -> None:
    """The session's transaction isolation level: a keyword, which cannot be a parameter, so only a
    member of Isolation is put into the statement."""
    with conn.cursor() as cur:
        cur.execute(query("session_isolation").replace("{isolation}", isolation.value))


def _connect_one(dsn: Dsn, host: str, port: int, connect_timeout: int, use_database: bool,
                 multi_statements: bool = False) -> Connection:
    kwargs: dict[str, Any] = {
        "user": dsn.user,
        "passwd": dsn.password,
        "charset": "utf8mb4",
        # The tables' collation. With utf8mb4_general_ci literals, MariaDB 10.11 sorts the claim's
        # rows (filesort over every ready row) instead of walking the claim index in order.
        "collation": "utf8mb4_bin",
        "autocommit": True,
        "connect_timeout": connect_timeout,
        "init_command": query("session_time_zone"),
        "multi_statements": multi_statements,
    }
    if use_database:
        kwargs["database"] = dsn.database
    if dsn.unix_socket:
        kwargs["unix_socket"] = dsn.unix_socket
    else:
        kwargs.update(host=host, port=port)
    kwargs.update(tls_arguments(dsn))
    where = dsn.unix_socket or f"{host}:{port}"
    try:
        conn = MySQLdb.connect(**kwargs)
    except MySQLdb.OperationalError as exc:
        code = error_code(exc)
        message = exc.args[1] if len(exc.args) > 1 else str(exc)
        if code == ACCESS_DENIED:
            hint = (", or whether the server requires TLS, which ssl_mode=DISABLED does not send"
                    if dsn.ssl_mode == SslMode.DISABLED else "")
            raise DatabaseUnavailable(
                f"access denied for user {dsn.user!r} at {where}: check the DSN's user and password{hint}",
                transient=False,
            ) from None
        if code == UNKNOWN_DATABASE:
            raise DatabaseUnavailable(f"database {dsn.database!r} does not exist on {where}: create it with "
                                      "`mysqlq migrate --create-database`", transient=False) from None
        if code == SECURE_TRANSPORT_REQUIRED:
            raise DatabaseUnavailable(f"the server at {where} accepts only encrypted connections "
                                      f"(require_secure_transport=ON) and ssl_mode is {dsn.ssl_mode}: set "
                                      "ssl_mode=REQUIRED or stronger in the DSN", transient=False) from None
        if code == TLS_FAILED:
            # Transient like an unreachable server: a worker keeps retrying (the certificate may be
            # renewed, the server reconfigured) and a DSN's next host is tried.
            raise DatabaseUnavailable(f"cannot connect to the database at {where} over TLS (ssl_mode="
                                      f"{dsn.ssl_mode}): {_tls_reason(message, dsn, host)}", transient=True) from None
        raise DatabaseUnavailable(f"cannot connect to the database at {where}: {message}", transient=True) from None
    if dsn.ssl_mode in tls.ENCRYPTING:
        _check_encrypted(conn, dsn, where)
    return conn


def _old_mysqlclient_arguments(mode: str, files: dict[str, str]) -> dict[str, Any]:
    """What mysqlclient 2.1 on Connector/C can do: the TLS files only (TLS when the server offers it)."""
    global _warned_old
    if mode in tls.ENCRYPTING:
        raise ConfigError(f"ssl_mode={mode} needs mysqlclient 2.2 or later when it is built on MariaDB "
                          f"Connector/C (installed: {'.'.join(map(str, MySQLdb.version_info[:3]))}): "
                          "pip install -U mysqlclient")
    if mode == SslMode.PREFERRED and not files and not _warned_old:
        _warned_old = True
        log.warning("db.tls_unavailable", reason="mysqlclient before 2.2 on MariaDB Connector/C cannot ask for "
                    "TLS: connections are not encrypted; pip install -U mysqlclient")
    return {"ssl": files} if files else {}


def _tls_reason(message: str, dsn: Dsn, host: str) -> str:
    """Why the client library refused TLS, in words that say what to look at (never a key's content)."""
    reason = str(message)
    for prefix in ("TLS/SSL error: ", "SSL connection error: "):
        reason = reason.removeprefix(prefix)
    if "does not support it" in reason:
        return "the server offers no TLS"
    if reason.startswith("Validation of SSL server certificate failed"):
        return f"the server's certificate is not made out to {host!r} (VERIFY_IDENTITY checks the host name)"
    if dsn.ssl_ca and "certificate" in reason.lower():
        return f"the server's certificate is not trusted by ssl_ca {dsn.ssl_ca} ({reason})"
    return reason


def _check_encrypted(conn: Connection, dsn: Dsn, where: str) -> None:
    """Close ``conn`` and refuse it when it is not encrypted (the library may have gone on in plain text)."""
    try:
        with conn.cursor() as cur:
            cur.execute(query("tls_cipher"))
            row = cur.fetchone()
    except MySQLdb.Error as exc:
        with contextlib.suppress(MySQLdb.Error):
            conn.close()
        raise DatabaseUnavailable(f"cannot connect to the database at {where}: {exc}", transient=True) from None
    if row is None or not row[1]:
        with contextlib.suppress(MySQLdb.Error):
            conn.close()
        raise DatabaseUnavailable(f"cannot connect to the database at {where} over TLS (ssl_mode={dsn.ssl_mode}): "
                                  "the server offers no TLS", transient=True)


def _refuses_writes(conn: Connection) -> str | None:
    """Why a server of a multi-host DSN cannot take mysqlq's writes, or None when it can.

    ``read_only`` is honoured even though SUPER (or READ_ONLY ADMIN) users could write past it: it
    marks a replica, and the writer is elsewhere in the list.
    """
    try:
        with conn.cursor() as cur:
            cur.execute(query("server_role"))
            flags = {str(name).lower(): str(value).upper() == "ON" for name, value in cur.fetchall()}
            for name in ("super_read_only", "read_only"):
                if flags.get(name):
                    return f"is read-only ({name}=ON)"
            if flags.get("wsrep_on"):
                cur.execute(query("wsrep_ready"))
                row = cur.fetchone()
                if row is None or str(row[1]).upper() != "ON":
                    return "is not ready for queries (wsrep_ready=OFF)"
    except MySQLdb.Error as exc:
        return f"failed its first query ({exc})"
    return None


@dataclass(frozen=True)
class RetryPolicy:
    """How long to keep retrying transient errors: ``attempts=None`` means forever."""

    attempts: int | None = 5
    first_delay: float = 0.05
    max_delay: float = 5.0

    def delay(self, attempt: int) -> float:
        base = min(self.max_delay, self.first_delay * 2 ** (attempt - 1))
        return float(base * random.uniform(0.5, 1.0))


CLI_RETRY = RetryPolicy(attempts=5)
FOREVER = RetryPolicy(attempts=None)
STOP_GRACE = 1.0  # seconds a retry loop keeps trying after a stop request (a deadlock still gets its retries)


def _with_cursor(conn: Connection, unit: Callable[[Cursor], T]) -> T:
    with conn.cursor() as cur:
        return unit(cur)


class StopRequested(Exception):
    """Raised by :meth:`Database.run` instead of retrying further once the process was asked to stop."""


class Database:
    """One connection that reopens itself after transient errors and retries the failed unit of work.

    Units passed to :meth:`run` must be safe to repeat: mysqlq's are single autocommit statements
    or statements fenced by a claim token.
    """

    def __init__(
        self,
        dsn: Dsn,
        *,
        isolation: str | None = None,
        retry: RetryPolicy = CLI_RETRY,
        on_connect: Callable[[Connection], None] | None = None,
        on_pause: Callable[[], None] | None = None,
        stop_requested: Callable[[], float | None] | None = None,
        multi_statements: bool = False,
        worker_name: str | None = None,
    ) -> None:
        self.dsn = dsn
        self.worker_name = worker_name  # see connect()
        self.isolation = isolation
        self.multi_statements = multi_statements  # see connect()
        self.retry = retry
        self.on_connect = on_connect
        self.on_pause = on_pause  # called while waiting to retry (a worker keeps its watchdog fed)
        # The monotonic time a stop was requested, or None: a worker's retries end soon after it.
        self.stop_requested = stop_requested
        self._conn: Connection | None = None
        # Units of work retried after a failure, ever: a caller that sees it grow knows that a
        # statement of its own may have taken effect without an answer.
        self.retried = 0

    @property
    def conn(self) -> Connection:
        """The open connection, connecting (once, no retry) if there is none."""
        if self._conn is None:
            self._conn = connect(self.dsn, isolation=self.isolation, multi_statements=self.multi_statements,
                                 worker_name=self.worker_name)
            if self.on_connect is not None:
                self.on_connect(self._conn)
        return self._conn

    def close(self) -> None:
        if self._conn is not None:
            with contextlib.suppress(MySQLdb.Error):
                self._conn.close()
            self._conn = None

    def run(self, unit: Callable[[Cursor], T]) -> T:
        """Run ``unit`` with a cursor, reconnecting and retrying on transient errors."""
        return self.run_on(partial(_with_cursor, unit=unit))

    def run_on(self, unit: Callable[[Connection], T]) -> T:
        """Run ``unit`` with the connection itself, as :meth:`run` does with a cursor: for a statement
        sent without one (a single enqueue, where the cursor's bookkeeping is a quarter of the client's CPU)."""
        attempt = 0
        failing_since = 0.0
        while True:
            attempt += 1
            try:
                return unit(self.conn)
            except DatabaseUnavailable as exc:
                # A CLI that cannot connect at all says so at once; a worker waits for the server.
                if not exc.transient or self._exhausted(attempt) or (attempt == 1 and self.retry.attempts):
                    raise
                failing_since = failing_since or time.monotonic()
                self._pause(exc, attempt, failing_since)
            except MySQLdb.Error as exc:
                if not is_transient(exc) or self._exhausted(attempt):
                    raise
                if error_code(exc) not in (DEADLOCK, LOCK_WAIT_TIMEOUT, GR_ROLLBACK):
                    self.close()
                failing_since = failing_since or time.monotonic()
                self._pause(exc, attempt, failing_since)

    def _exhausted(self, attempt: int) -> bool:
        return self.retry.attempts is not None and attempt >= self.retry.attempts

    def _pause(self, exc: BaseException, attempt: int, failing_since: float) -> None:
        self.retried += 1
        delay = self.retry.delay(attempt)
        log.warning("db.retry", error=str(exc), attempt=attempt, delay=round(delay, 3))
        if self.on_pause is not None:
            self.on_pause()
        if self.stop_requested is None:
            time.sleep(delay)
            return
        # In slices, so that a stop request (a signal handler sets it) ends the wait soon. Each
        # unit of work still gets STOP_GRACE of retries after the stop (a deadlock in the last
        # outcome write of a clean shutdown is retried as always).
        until = time.monotonic() + delay
        while True:
            stopped_at = self.stop_requested()
            now = time.monotonic()
            if stopped_at is not None and now - max(stopped_at, failing_since) >= STOP_GRACE:
                raise StopRequested(f"stopped while the database was unavailable: {exc}")
            if now >= until:
                return
            time.sleep(min(0.1, until - now))
