"""The DSN's TLS parameters and option files, parsed without a server: the MySQL clients' ssl_mode
names, one-line errors for what cannot work, and what each mode asks of the driver."""

from __future__ import annotations

import os
import pathlib
import re
import subprocess
import sys
import tempfile

import pytest

from mysqlq import ConfigError, Dsn
from mysqlq.contrib.django.backend import dsn_of_database
from mysqlq.store import db


@pytest.fixture
def pem(tmp_path: pathlib.Path) -> dict[str, str]:
    """Three files standing in for a CA, a client certificate and its key (only their paths matter here)."""
    files = {}
    for name in ("ca", "cert", "key"):
        path = tmp_path / f"{name}.pem"
        path.write_text("-----BEGIN NOTHING-----\n")
        files[name] = str(path)
    return files


def test_the_default_is_preferred_and_every_mode_is_known_in_any_case(pem: dict[str, str]) -> None:
    assert Dsn.parse("mysql://app@db/jobs").ssl_mode == "PREFERRED"
    for mode in ("disabled", "Preferred", "REQUIRED"):
        assert Dsn.parse(f"mysql://app@db/jobs?ssl_mode={mode}").ssl_mode == mode.upper()
    for mode in ("verify_ca", "VERIFY_IDENTITY"):
        dsn = Dsn.parse(f"mysql://app@db/jobs?ssl_mode={mode}&ssl_ca={pem['ca']}")
        assert (dsn.ssl_mode, dsn.ssl_ca) == (mode.upper(), pem["ca"])


@pytest.mark.parametrize(
    ("query", "message"),
    [
        ("ssl_mode=STRICT", "ssl_mode must be one of DISABLED, PREFERRED, REQUIRED, VERIFY_CA, VERIFY_IDENTITY"),
        ("ssl_mode=", "DSN parameter ssl_mode is empty"),
        ("sslmode=REQUIRED", "unknown parameter(s): sslmode (known: read_default_file, read_default_group, ssl_ca"),
        ("ssl_mode=VERIFY_CA", "ssl_mode=VERIFY_CA needs ssl_ca"),
        ("ssl_mode=VERIFY_IDENTITY", "ssl_mode=VERIFY_IDENTITY needs ssl_ca"),
        ("ssl_mode=REQUIRED&ssl_ca={ca}", "ssl_ca serves only to verify the server"),
        ("ssl_ca={ca}", "ssl_mode=PREFERRED does not do"),
        ("ssl_mode=DISABLED&ssl_cert={cert}&ssl_key={key}", "ssl_mode=DISABLED makes no use of ssl_cert and ssl_key"),
        ("ssl_mode=REQUIRED&ssl_cert={cert}", "ssl_cert and ssl_key go together"),
        ("ssl_mode=VERIFY_CA&ssl_ca=/nonexistent/ca.pem", "ssl_ca file /nonexistent/ca.pem cannot be read: No such"),
        ("read_default_file=/nonexistent/my.cnf", "cannot read option file /nonexistent/my.cnf"),
    ],
)
def test_bad_tls_settings_are_one_clear_line(pem: dict[str, str], query: str, message: str) -> None:
    with pytest.raises(ConfigError) as caught:
        Dsn.parse("mysql://app:hunter2@db/jobs?" + query.format(**pem))
    text = str(caught.value)
    assert message in text
    assert "\n" not in text and "hunter2" not in text


UNREADABLE = """
import sys
from mysqlq import Dsn
from mysqlq.core.errors import ConfigError
try:
    Dsn(ssl_mode="REQUIRED", ssl_cert=sys.argv[1], ssl_key=sys.argv[2])
except ConfigError as exc:
    print(exc)
"""


def test_an_unreadable_key_is_named_without_its_content(pem: dict[str, str], tmp_path: pathlib.Path) -> None:
    if os.geteuid() != 0:
        os.chmod(pem["key"], 0)
        with pytest.raises(ConfigError, match=r"ssl_key file .* cannot be read: Permission denied"):
            Dsn(ssl_mode="REQUIRED", ssl_cert=pem["cert"], ssl_key=pem["key"])
        return
    # Root reads every file: the check runs as nobody, on copies it may reach but for the key.
    shared = tmp_path / "shared"
    shared.mkdir()
    cert, key = shared / "client.crt", shared / "client.key"
    cert.write_bytes(pathlib.Path(pem["cert"]).read_bytes())
    key.write_bytes(pathlib.Path(pem["key"]).read_bytes())
    for path, mode in ((tmp_path, 0o755), (shared, 0o755), (cert, 0o644), (key, 0)):
        os.chmod(path, mode)
    for parent in tmp_path.parents:  # pytest's own temp folders are root's alone
        if parent.stat().st_mode & 0o001 == 0 and str(parent).startswith(tempfile.gettempdir()):
            os.chmod(parent, parent.stat().st_mode | 0o011)
    result = subprocess.run(["setpriv", "--reuid=65534", "--regid=65534", "--clear-groups", sys.executable,
                             "-c", UNREADABLE, str(cert), str(key)], capture_output=True, text=True, timeout=60)
    assert re.search(r"ssl_key file .* cannot be read: Permission denied", result.stdout), result
    assert "PRIVATE KEY" not in result.stdout + result.stderr


def test_redacted_says_how_but_never_the_password(pem: dict[str, str]) -> None:
    dsn = Dsn.parse(f"mysql://app:hunter2@db:3307/jobs?ssl_mode=verify_identity&ssl_ca={pem['ca']}")
    assert dsn.redacted() == "mysql://app:***@db:3307/jobs?ssl_mode=VERIFY_IDENTITY"
    assert "hunter2" not in repr(dsn)
    assert Dsn.parse("mysql://app@db/jobs").redacted() == "mysql://app@db:3306/jobs"  # the default is not shown


def test_tls_settings_change_neither_identity_nor_hashing(pem: dict[str, str]) -> None:
    plain = Dsn.parse("mysql://app:pw@db:3306/jobs")
    verified = Dsn.parse(f"mysql://app:pw@db:3306/jobs?ssl_mode=VERIFY_IDENTITY&ssl_ca={pem['ca']}")
    assert verified.identity == plain.identity  # producers hint the same workers whatever their TLS
    assert len({plain, verified, Dsn.parse("mysql://app:pw@db:3306/jobs")}) == 2


def test_each_mode_asks_the_driver_for_what_it_means(pem: dict[str, str]) -> None:
    def arguments(query: str, where: str = "db") -> dict[str, object]:
        return db.tls_arguments(Dsn.parse(f"mysql://app@{where}/jobs?{query}".format(**pem)))

    files = {"ca": pem["ca"]}
    if db.CONNECTOR_C:  # mysqlclient on MariaDB Connector/C: its VERIFY_CA would check the host name too
        assert arguments("ssl_mode=PREFERRED") == {"ssl_mode": "REQUIRED"}  # TLS when offered, else plain
        assert arguments("ssl_mode=VERIFY_CA&ssl_ca={ca}") == {"ssl_mode": "REQUIRED", "ssl": files}
    else:
        assert arguments("ssl_mode=PREFERRED") == {"ssl_mode": "PREFERRED"}
        assert arguments("ssl_mode=VERIFY_CA&ssl_ca={ca}") == {"ssl_mode": "VERIFY_CA", "ssl": files}
    assert arguments("ssl_mode=DISABLED") == {"ssl_mode": "DISABLED"}
    assert arguments("ssl_mode=REQUIRED&ssl_cert={cert}&ssl_key={key}") == {
        "ssl_mode": "REQUIRED", "ssl": {"cert": pem["cert"], "key": pem["key"]}}
    assert arguments("ssl_mode=VERIFY_IDENTITY&ssl_ca={ca}") == {"ssl_mode": "VERIFY_IDENTITY", "ssl": files}
    # A unix socket never leaves the host: PREFERRED sends no TLS there.
    assert arguments("unix_socket=/run/mysqld/mysqld.sock", where="localhost") == {"ssl_mode": "DISABLED"}
    assert arguments("ssl_mode=PREFERRED", where="localhost") == {"ssl_mode": "DISABLED"}  # the clients' socket


def test_a_mysqlclient_that_cannot_ask_for_tls_says_so(pem: dict[str, str], monkeypatch: pytest.MonkeyPatch) -> None:
    """mysqlclient 2.1 on Connector/C refuses the ssl_mode argument: a mode that must encrypt is refused
    in one line, and the default goes on without TLS (logged once) rather than failing every connection."""
    monkeypatch.setattr(db, "OLD_MYSQLCLIENT", True)
    with pytest.raises(ConfigError, match=r"ssl_mode=REQUIRED needs mysqlclient 2\.2 or later"):
        db.tls_arguments(Dsn.parse("mysql://app@db/jobs?ssl_mode=REQUIRED"))
    assert db.tls_arguments(Dsn.parse("mysql://app@db/jobs")) == {}
    files = f"ssl_cert={pem['cert']}&ssl_key={pem['key']}"
    assert db.tls_arguments(Dsn.parse(f"mysql://app@db/jobs?{files}")) == {"ssl": {"cert": pem["cert"],
                                                                                    "key": pem["key"]}}


def write(path: pathlib.Path, text: str) -> str:
    path.write_text(text)
    path.chmod(0o600)
    return str(path)


def test_an_option_file_supplies_what_the_dsn_leaves_out(tmp_path: pathlib.Path, pem: dict[str, str]) -> None:
    cnf = write(tmp_path / "app.cnf", f"""
# a DBA's file
[client]
user = app
password = "s3cret #1"   # quoted: the # is part of it
host = db.internal
port = 3307
ssl-mode = verify_identity
ssl-ca = {pem['ca']}

[mysqldump]
user = backup

[mysqlq]
user=worker
password='w\\sp'
""")
    dsn = Dsn.parse(f"mysql:///jobs?read_default_file={cnf}")
    assert (dsn.user, dsn.password, dsn.host, dsn.port) == ("app", "s3cret #1", "db.internal", 3307)
    assert (dsn.ssl_mode, dsn.ssl_ca) == ("VERIFY_IDENTITY", pem["ca"])
    grouped = Dsn.parse(f"mysql:///jobs?read_default_file={cnf}&read_default_group=mysqlq")
    assert (grouped.user, grouped.password, grouped.host) == ("worker", "w p", "db.internal")
    # What the DSN says wins; a mode given in the DSN leaves out the file's CA it makes no use of.
    given = Dsn.parse(f"mysql://other@db2/jobs?read_default_file={cnf}&ssl_mode=REQUIRED")
    assert (given.user, given.password, given.host, given.port) == ("other", "s3cret #1", "db2", 3306)
    assert given.ssl_ca is None
    assert grouped.redacted() == (f"mysql://worker:***@db.internal:3307/jobs?ssl_mode=VERIFY_IDENTITY"
                                  f"&read_default_file={cnf}&read_default_group=mysqlq")
    # The same database reached by the option file or spelled out: the same hints.
    assert dsn.identity == Dsn.parse("mysql://app@db.internal:3307/jobs").identity


def test_an_option_file_may_give_a_socket_a_database_and_includes(tmp_path: pathlib.Path) -> None:
    (tmp_path / "conf.d").mkdir()
    write(tmp_path / "conf.d" / "50-client.cnf", "[client]\nsocket = /run/mysqld/mysqld.sock\n")
    write(tmp_path / "conf.d" / "README", "[client]\nsocket = /not/read\n")  # only *.cnf files are read
    cnf = write(tmp_path / "my.cnf", "[client]\nuser = app\ndatabase = shop\n!includedir conf.d\n")
    dsn = Dsn.parse(f"mysql://?read_default_file={cnf}")
    assert (dsn.unix_socket, dsn.database, dsn.user) == ("/run/mysqld/mysqld.sock", "shop", "app")


@pytest.mark.parametrize(
    ("text", "query", "message"),
    [
        ("[client]\nuser = app\n", "&read_default_group=mysqlq", "has no [mysqlq] group"),
        ("[client]\nssl-capath = /etc/ssl/certs\n", "", "sets ssl-capath, which mysqlq does not apply"),
        ("[client]\nport = 33x\n", "", "has an invalid port"),
        ("[client]\npassword = \"open\n", "", "line 2: a quoted value misses its closing quote"),
        ("[client]\n!include missing.cnf\n", "", "cannot read option file"),
    ],
)
def test_bad_option_files_are_one_clear_line(tmp_path: pathlib.Path, text: str, query: str, message: str) -> None:
    cnf = write(tmp_path / "my.cnf", text)
    with pytest.raises(ConfigError) as caught:
        Dsn.parse(f"mysql:///jobs?read_default_file={cnf}{query}")
    assert message in str(caught.value) and "\n" not in str(caught.value)
    assert "open" not in str(caught.value).replace("option", "")  # a value (maybe a password) never shows


def test_a_world_writable_option_file_is_refused(tmp_path: pathlib.Path) -> None:
    cnf = tmp_path / "my.cnf"
    write(cnf, "[client]\nhost = elsewhere\n")
    cnf.chmod(0o666)
    with pytest.raises(ConfigError, match="is world-writable"):
        Dsn.parse(f"mysql:///jobs?read_default_file={cnf}")


def test_the_django_backend_reads_tls_from_the_database_options(tmp_path: pathlib.Path,
                                                                pem: dict[str, str]) -> None:
    database = {"ENGINE": "django.db.backends.mysql", "NAME": "shop", "USER": "app", "PASSWORD": "pw",
                "HOST": "db", "PORT": "3307", "OPTIONS": {"ssl": {"ca": pem["ca"]}}}
    dsn = dsn_of_database(database)
    assert (dsn.host, dsn.port, dsn.ssl_mode, dsn.ssl_ca) == ("db", 3307, "VERIFY_CA", pem["ca"])
    database["OPTIONS"] = {"ssl_mode": "VERIFY_IDENTITY", "ssl": {"ca": pem["ca"], "cert": pem["cert"],
                                                                  "key": pem["key"]}}
    assert dsn_of_database(database).ssl_mode == "VERIFY_IDENTITY"
    cnf = write(tmp_path / "app.cnf", "[client]\nhost = db.internal\nuser = app\npassword = pw\n")
    from_file = dsn_of_database({"NAME": "shop", "OPTIONS": {"read_default_file": cnf}})
    assert (from_file.host, from_file.user, from_file.password) == ("db.internal", "app", "pw")
    assert dsn_of_database({"NAME": "shop", "HOST": "/run/mysqld/mysqld.sock"}).unix_socket == "/run/mysqld/mysqld.sock"
