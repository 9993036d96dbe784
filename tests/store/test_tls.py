"""Encrypted connections against a real server of each lane, with certificates the test makes itself
(openssl): a private server with a CA and a certificate for 127.0.0.1 and localhost, and
``require_secure_transport=ON``, so that a TCP connection without TLS cannot exist. Each ssl_mode does
what the MySQL clients' does; a refusal is one line naming the host and the reason; workers, the
producer's pool, the async producer, the CLI and migrations all connect over TLS; an option file can
hold the user, password and host."""

from __future__ import annotations

import asyncio
import contextlib
import pathlib
import shutil
import subprocess
import urllib.parse
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from typing import Any

import pytest
from mysqlq_harness.jobs import EVERY_JOB
from mysqlq_harness.mariadb import PrivateMariaDB, ServerTls

from mysqlq import DatabaseUnavailable, Dsn, Producer, Settings
from mysqlq.store.db import Database, connect
from mysqlq.store.schema import migrate

from ..conftest import ON_MYSQL, MariaDBServer, QueueDB, query_once, throwaway_mariadb, unavailable
from ..ops_fixtures import assert_one_line_error

DATABASE = "tlsq"
APP, APP_PASSWORD = "tls_app", "app pw#1"  # a space and a '#': quoted in the option file
WORKER, WORKER_PASSWORD = "tls_worker", "worker-pw"
CERT_USER, CERT_PASSWORD = "tls_cert", "cert-pw"  # created REQUIRE X509


@dataclass(frozen=True)
class Certificates:
    """PEM files made with openssl: a CA and what it signed, and a CA that signed nothing of ours."""

    ca: pathlib.Path
    server: tuple[pathlib.Path, pathlib.Path]  # certificate and key for 127.0.0.1 and localhost
    elsewhere: tuple[pathlib.Path, pathlib.Path]  # for db.elsewhere.example only
    client: tuple[pathlib.Path, pathlib.Path]  # a client certificate (users REQUIRE X509)
    other_ca: pathlib.Path


def openssl(directory: pathlib.Path, *args: str) -> None:
    result = subprocess.run(["openssl", *args], cwd=directory, capture_output=True, text=True, check=False)
    if result.returncode != 0:
        raise AssertionError(f"openssl {' '.join(args)} failed: {result.stderr}")


def make_certificates(directory: pathlib.Path) -> Certificates:
    if shutil.which("openssl") is None:
        unavailable("openssl is not installed")
    directory.mkdir(parents=True, exist_ok=True)

    def ca(name: str, subject: str) -> pathlib.Path:
        openssl(directory, "req", "-x509", "-newkey", "rsa:2048", "-nodes", "-days", "2", "-subj", subject,
                "-keyout", f"{name}.key", "-out", f"{name}.pem")
        return directory / f"{name}.pem"

    def signed(name: str, subject: str, extension: str) -> tuple[pathlib.Path, pathlib.Path]:
        (directory / f"{name}.ext").write_text(extension + "\n")
        openssl(directory, "req", "-newkey", "rsa:2048", "-nodes", "-subj", subject, "-keyout", f"{name}.key",
                "-out", f"{name}.csr")
        openssl(directory, "x509", "-req", "-in", f"{name}.csr", "-CA", "ca.pem", "-CAkey", "ca.key",
                "-CAcreateserial", "-days", "2", "-extfile", f"{name}.ext", "-out", f"{name}.pem")
        return directory / f"{name}.pem", directory / f"{name}.key"

    authority = ca("ca", "/CN=mysqlq test CA")
    return Certificates(
        ca=authority,
        server=signed("server", "/CN=localhost", "subjectAltName=IP:127.0.0.1,DNS:localhost"),
        elsewhere=signed("elsewhere", "/CN=db.elsewhere.example", "subjectAltName=DNS:db.elsewhere.example"),
        client=signed("client", "/CN=mysqlq test client", "extendedKeyUsage=clientAuth"),
        other_ca=ca("other-ca", "/CN=another CA"),
    )


@dataclass
class TlsServer:
    """The private server, its certificates, and the files it serves (swapped by :meth:`serving`)."""

    server: PrivateMariaDB
    certs: Certificates
    served: tuple[pathlib.Path, pathlib.Path]

    def dsn(self, query: str = "", user: str = APP, password: str = APP_PASSWORD, database: str = DATABASE) -> str:
        auth = f"{user}:{urllib.parse.quote(password, safe='')}"
        return f"mysql://{auth}@127.0.0.1:{self.server.port}/{database}" + (f"?{query}" if query else "")

    def verified(self, mode: str = "VERIFY_IDENTITY", ca: pathlib.Path | None = None, **others: str) -> str:
        query = f"ssl_mode={mode}&ssl_ca={ca or self.certs.ca}"
        return self.dsn(query, **others)

    def admin(self, sql: str, params: Any = None) -> list[tuple[Any, ...]]:
        """As root over the unix socket (local: no TLS needed, none sent)."""
        return query_once(connect(Dsn.parse(self.server.dsn), use_database=False), sql, params)

    def ciphers_of(self, user: str) -> list[str]:
        """The TLS cipher of every connection ``user`` has open now ('' for one in plain text), from
        performance_schema: every connection, whoever opened it."""
        rows = self.admin(
            "SELECT COALESCE(s.VARIABLE_VALUE, '') FROM performance_schema.threads t "
            "LEFT JOIN performance_schema.status_by_thread s ON s.THREAD_ID = t.THREAD_ID "
            "AND s.VARIABLE_NAME = 'Ssl_cipher' WHERE t.PROCESSLIST_USER = %s", (user,))
        return [str(row[0]) for row in rows]

    @contextlib.contextmanager
    def serving(self, pair: tuple[pathlib.Path, pathlib.Path]) -> Iterator[None]:
        """The server presents ``pair`` (certificate, key) to new connections until the block ends."""
        self._serve(pair)
        try:
            yield
        finally:
            self._serve(self.certs.server)

    def _serve(self, pair: tuple[pathlib.Path, pathlib.Path]) -> None:
        for source, target in zip(pair, self.served, strict=True):
            shutil.copyfile(source, target)
        self.admin("ALTER INSTANCE RELOAD TLS" if ON_MYSQL else "FLUSH SSL")


def cipher(conn: Any) -> str:
    try:
        with conn.cursor() as cur:
            cur.execute("SHOW SESSION STATUS LIKE 'Ssl_cipher'")
            return str(cur.fetchone()[1])
    finally:
        conn.close()


def current_user(dsn: str) -> str:
    return str(query_once(connect(Dsn.parse(dsn)), "SELECT CURRENT_USER()")[0][0]).split("@")[0]


@pytest.fixture(scope="module")
def tls(tmp_path_factory: pytest.TempPathFactory, mariadb: MariaDBServer) -> Iterator[TlsServer]:
    if mariadb.tcp_dsn is None:
        unavailable("needs private servers (MYSQLQ_TEST_DSN is set)")
    base = tmp_path_factory.mktemp("tls")
    certs = make_certificates(base / "certs")
    served = (base / "certs" / "served.pem", base / "certs" / "served.key")
    for source, target in zip(certs.server, served, strict=True):
        shutil.copyfile(source, target)
    with throwaway_mariadb(base / "server", "a private mariadbd with TLS",
                           tls=ServerTls(certs.ca, *served), require_secure_transport=True,
                           options=["--performance-schema=ON"]) as server:
        found = TlsServer(server, certs, served)
        found.admin(f"CREATE DATABASE {DATABASE}")
        for user, password, require in ((APP, APP_PASSWORD, ""), (WORKER, WORKER_PASSWORD, ""),
                                        (CERT_USER, CERT_PASSWORD, " REQUIRE X509")):
            found.admin(f"CREATE USER '{user}'@'127.0.0.1' IDENTIFIED BY %s{require}", (password,))
            found.admin(f"GRANT ALL PRIVILEGES ON *.* TO '{user}'@'127.0.0.1'")
        conn = connect(Dsn.parse(urllib.parse.urlunsplit(
            urllib.parse.urlsplit(server.dsn)._replace(path="/" + DATABASE))))
        try:
            with conn.cursor() as cur:
                migrate(cur, DATABASE)
                cur.execute("CREATE TABLE test_effects (job_id BIGINT NOT NULL, attempt INT NOT NULL, KEY (job_id))")
        finally:
            conn.close()
        yield found


@pytest.fixture
def tdb(tls: TlsServer, mariadb: MariaDBServer, tmp_path: pathlib.Path) -> Iterator[QueueDB]:
    """The TLS server's queue database, emptied, seen through the app user's VERIFY_IDENTITY DSN."""
    (tmp_path / "hints").mkdir()
    db = QueueDB(dsn=tls.verified(), name=DATABASE, server=mariadb, tmp=tmp_path)
    db.query("DELETE FROM mysqlq_jobs")
    db.query("DELETE FROM mysqlq_jobs_history")
    try:
        yield db
    finally:
        db.stop_workers()


def refusal(dsn: str) -> DatabaseUnavailable:
    with pytest.raises(DatabaseUnavailable) as caught:
        connect(Dsn.parse(dsn))
    return caught.value


# --------------------------------------------------------------------------- what each mode does


def test_without_tls_the_server_refuses_with_a_clear_line(tls: TlsServer, tdb: QueueDB) -> None:
    result = tdb.cli("stats", env=tdb.env(MYSQLQ_DSN=tls.dsn("ssl_mode=DISABLED")))
    assert_one_line_error(result, f"at 127.0.0.1:{tls.server.port}")
    # MySQL says require_secure_transport; MariaDB only "access denied", so mysqlq adds what to check.
    assert ("require_secure_transport=ON" if ON_MYSQL else "whether the server requires TLS") in result.stderr
    assert "ssl_mode" in result.stderr and APP_PASSWORD not in result.stderr


def test_required_and_the_default_encrypt(tls: TlsServer) -> None:
    assert cipher(connect(Dsn.parse(tls.dsn("ssl_mode=required"))))
    assert cipher(connect(Dsn.parse(tls.dsn())))  # PREFERRED: TLS since the server offers it


def test_verify_ca_accepts_the_ca_and_refuses_another(tls: TlsServer) -> None:
    assert cipher(connect(Dsn.parse(tls.verified("VERIFY_CA"))))
    refused = refusal(tls.verified("VERIFY_CA", ca=tls.certs.other_ca))
    assert str(refused).startswith(f"cannot connect to the database at 127.0.0.1:{tls.server.port} over TLS "
                                   "(ssl_mode=VERIFY_CA): the server's certificate is not trusted by ssl_ca "
                                   f"{tls.certs.other_ca}")
    assert refused.transient  # a worker retries, as for a server it cannot reach


def test_verify_identity_refuses_a_certificate_for_another_name_which_verify_ca_accepts(tls: TlsServer) -> None:
    assert cipher(connect(Dsn.parse(tls.verified("VERIFY_IDENTITY"))))
    with tls.serving(tls.certs.elsewhere):
        refused = refusal(tls.verified("VERIFY_IDENTITY"))
        assert str(refused) == (f"cannot connect to the database at 127.0.0.1:{tls.server.port} over TLS "
                                "(ssl_mode=VERIFY_IDENTITY): the server's certificate is not made out to "
                                "'127.0.0.1' (VERIFY_IDENTITY checks the host name)")
        assert refused.transient
        # VERIFY_CA, as the MySQL clients mean it: the chain is checked, the name is not.
        assert cipher(connect(Dsn.parse(tls.verified("VERIFY_CA"))))


def test_a_user_required_to_show_a_certificate_connects_only_with_one(tls: TlsServer) -> None:
    without = refusal(tls.dsn("ssl_mode=REQUIRED", user=CERT_USER, password=CERT_PASSWORD))
    assert f"access denied for user '{CERT_USER}'" in str(without) and not without.transient
    cert, key = tls.certs.client
    for mode in ("ssl_mode=REQUIRED", f"ssl_mode=VERIFY_IDENTITY&ssl_ca={tls.certs.ca}"):
        dsn = tls.dsn(f"{mode}&ssl_cert={cert}&ssl_key={key}", user=CERT_USER, password=CERT_PASSWORD)
        assert current_user(dsn) == CERT_USER


@pytest.mark.mariadb_only
def test_preferred_connects_to_a_server_without_tls_which_required_refuses(mariadb: MariaDBServer) -> None:
    """The MariaDB lane's session server offers no TLS (MySQL's makes its own certificates)."""
    assert mariadb.tcp_dsn is not None
    offered = query_once(connect(Dsn.parse(mariadb.dsn)), "SHOW GLOBAL VARIABLES LIKE 'have_ssl'")
    assert offered[0][1] != "YES", "the session's server was expected to have no TLS"
    assert cipher(connect(Dsn.parse(mariadb.tcp_dsn))) == ""
    port = urllib.parse.urlsplit(mariadb.tcp_dsn).port
    for mode in ("REQUIRED", "VERIFY_CA", "VERIFY_IDENTITY"):
        query = f"ssl_mode={mode}" + (f"&ssl_ca={pathlib.Path(__file__)}" if mode.startswith("VERIFY") else "")
        refused = refusal(f"{mariadb.tcp_dsn}?{query}")
        assert str(refused) == (f"cannot connect to the database at 127.0.0.1:{port} over TLS (ssl_mode={mode}): "
                                "the server offers no TLS")


# --------------------------------------------------------------------------- every connection mysqlq opens


def test_migrate_and_the_cli_work_over_tls(tls: TlsServer, tdb: QueueDB) -> None:
    env = tdb.env(MYSQLQ_DSN=tls.verified(database="tlsq_fresh"))
    try:
        assert "schema migrated" in tdb.cli("migrate", "--create-database", env=env, check=True).stdout
        job_id = int(tdb.cli("enqueue", "test.record", "{}", env=env, check=True).stdout)
        assert "ready" in tdb.cli("jobs", "show", str(job_id), env=env, check=True).stdout
    finally:
        tls.admin("DROP DATABASE IF EXISTS tlsq_fresh")


def test_a_worker_drains_jobs_over_tls_on_every_connection(tls: TlsServer, tdb: QueueDB) -> None:
    with tdb.producer() as producer:
        quick = [producer.enqueue("test.record", {"tag": str(n)}) for n in range(20)]
        quick += [producer.enqueue("test.effect") for _ in range(5)]  # on a slot's own connection
        holder = producer.enqueue("test.cooperative", {"seconds": 600}, priority=10)  # runs last, until cancelled
    worker_dsn = tls.verified(user=WORKER, password=WORKER_PASSWORD)
    worker = tdb.worker("--burst", env=tdb.env(MYSQLQ_DSN=worker_dsn))

    def settled() -> list[str] | None:
        done = tdb.scalar(f"SELECT COUNT(*) FROM {EVERY_JOB} WHERE status = 'done'") == len(quick)
        running = tdb.scalar("SELECT status FROM mysqlq_jobs WHERE id = %s", (holder,)) == "running"
        ciphers = tls.ciphers_of(WORKER)
        return ciphers if done and running and len(ciphers) >= 2 else None

    ciphers = tdb.wait_for(settled, what="the worker to run every job but the last")
    assert all(ciphers), ciphers  # the worker's own connection, its heartbeat's, its slots': all encrypted
    tdb.cli("cancel", str(holder), check=True)
    assert worker.wait(timeout=60) == 0, tdb.logs()
    assert tdb.statuses() == {"done": len(quick), "cancelled": 1}
    assert tdb.scalar("SELECT COUNT(*) FROM test_effects") == 5
    assert WORKER_PASSWORD not in tdb.logs()


def test_a_worker_that_cannot_verify_the_server_keeps_retrying(tls: TlsServer, tdb: QueueDB) -> None:
    worker = tdb.worker(env=tdb.env(MYSQLQ_DSN=tls.verified("VERIFY_CA", ca=tls.certs.other_ca, user=WORKER,
                                                            password=WORKER_PASSWORD)))
    line = "the server's certificate is not trusted by ssl_ca"
    tdb.wait_for(lambda: tdb.logs().count(line) >= 2, what="the worker to retry")
    assert worker.poll() is None, tdb.logs()  # still running, waiting for a server it can trust
    assert WORKER_PASSWORD not in tdb.logs()


def test_the_pool_and_the_async_producer_enqueue_over_tls(tls: TlsServer, tdb: QueueDB) -> None:
    settings = Settings(dsn=Dsn.parse(tls.verified()), hint_dir=str(tdb.tmp / "hints"))

    async def from_async_code(producer: Producer) -> str:
        await asyncio.gather(*(producer.aenqueue("test.record") for _ in range(10)))
        async with producer.atransaction() as tx:
            await tx.aenqueue("test.record")
            return str(await tx.run(lambda cur: (cur.execute("SHOW SESSION STATUS LIKE 'Ssl_cipher'"),
                                                 cur.fetchone()[1])[1]))

    with Producer(settings, pool_size=3) as producer, ThreadPoolExecutor(3) as threads:
        list(threads.map(lambda n: producer.enqueue("test.record", {"tag": str(n)}), range(30)))
        assert asyncio.run(from_async_code(producer))
        ciphers = tls.ciphers_of(APP)  # the pool's connections, still open
        assert ciphers and all(ciphers), ciphers
    assert tdb.statuses() == {"ready": 41}


def test_an_option_file_holds_the_user_password_and_host(tls: TlsServer, tdb: QueueDB) -> None:
    cnf = tdb.tmp / "mysqlq.cnf"
    cnf.write_text(f"""[client]
user = {APP}
password = "{APP_PASSWORD}"
host = 127.0.0.1
port = {tls.server.port}
ssl-mode = VERIFY_IDENTITY
ssl-ca = {tls.certs.ca}

[mysqlq-worker]
user = {WORKER}
password = {WORKER_PASSWORD}
""")
    cnf.chmod(0o600)
    dsn = f"mysql:///{DATABASE}?read_default_file={cnf}"
    assert current_user(dsn) == APP
    assert cipher(connect(Dsn.parse(dsn)))
    assert current_user(f"{dsn}&read_default_group=mysqlq-worker") == WORKER
    result = tdb.cli("stats", env=tdb.env(MYSQLQ_DSN=dsn), check=True)
    assert APP_PASSWORD not in result.stdout + result.stderr


def test_a_connection_lost_under_tls_is_retried_like_any_other(tls: TlsServer) -> None:
    """A server that goes away under TLS surfaces as a TLS error (2026) rather than 2013: still transient."""
    database = Database(Dsn.parse(tls.dsn("ssl_mode=REQUIRED")))
    try:
        first = database.run(lambda cur: (cur.execute("SELECT CONNECTION_ID()"), cur.fetchone()[0])[1])
        tls.admin(f"KILL {int(first)}")
        second = database.run(lambda cur: (cur.execute("SELECT CONNECTION_ID()"), cur.fetchone()[0])[1])
    finally:
        database.close()
    assert second != first and database.retried == 1
