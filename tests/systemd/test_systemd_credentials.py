"""Under a real (private) systemd: workers whose unit loads the DSN as a credential, as `mysqlq
install-systemd` sets them up and the deployment guide says, drain jobs, and the password is in
neither `systemctl show` nor the worker's environment (/proc/PID/environ) nor the journal. The
three ways: the whole DSN as a plain credential, only the password (the rest of the DSN in the env
file), and the DSN encrypted with `systemd-creds encrypt`; and the dashboard's unit with its token as a
credential too."""

from __future__ import annotations

import secrets
import urllib.parse
from collections.abc import Iterator
from pathlib import Path

import pytest
from mysqlq_harness.jobs import EVERY_JOB
from mysqlq_harness.net import free_port, get
from mysqlq_harness.systemd import PrivateSystemd
from mysqlq_harness.waiting import wait_for

from ..conftest import MYSQLQ, MariaDBServer, QueueDB, private_systemd, with_database
from ..db_users import AWKWARD, DatabaseUser, database_user

pytestmark = pytest.mark.slow

ENV = "/etc/mysqlq/mysqlq.env"
PLAIN = "/etc/credstore/mysqlq.dsn"
PASSWORD = "/etc/credstore/mysqlq.password"
ENCRYPTED = "/etc/credstore.encrypted/mysqlq.dsn"
TOKEN = "/etc/credstore/mysqlq.web-token"


@pytest.fixture
def user(qdb: QueueDB) -> Iterator[DatabaseUser]:
    with database_user(qdb, "GRANT ALL ON {db}.* TO {user}", prefix="mq_cred", password=AWKWARD) as found:
        yield found


@pytest.fixture
def systemd(mariadb: MariaDBServer, tmp_path: Path) -> Iterator[PrivateSystemd]:
    with private_systemd(mariadb, tmp_path / "systemd") as server:
        yield server
    assert server.leftovers() == []


def drain(systemd: PrivateSystemd, qdb: QueueDB, user: DatabaseUser, count: int = 5) -> None:
    """Start worker@1, see it run ``count`` jobs as ``user``, then check what holds the password."""
    systemd.systemctl("restart", "worker@1")  # returns once it connected (READY=1)
    with qdb.producer(hint=False) as producer:  # the workers' hint sockets are in the namespace: they poll
        ids = [producer.enqueue("test.record", {"tag": str(n)}, queue="cred") for n in range(count)]
    marks = ",".join(["%s"] * len(ids))
    qdb.wait_for(lambda: qdb.query(f"SELECT DISTINCT status, worker FROM {EVERY_JOB} WHERE id IN ({marks})",
                                   tuple(ids)) == [("done", "1")], timeout=30, what="worker@1 to run the jobs")
    connected = qdb.scalar("SELECT COUNT(*) FROM information_schema.PROCESSLIST WHERE USER = %s", (user.name,))
    assert connected >= 1  # the worker's connections are the credential's user's

    pid = systemd.main_pid("worker@1")
    assert pid > 1
    environ = systemd.run("cat", f"/proc/{pid}/environ").stdout.split("\0")
    assert any(entry.startswith("CREDENTIALS_DIRECTORY=/run/credentials/worker@1.service") for entry in environ)
    shown = systemd.systemctl("show", "worker@1").stdout
    journal = systemd.run("journalctl", "--no-pager", "-o", "verbose", "-u", "worker@1").stdout
    for where in (" ".join(environ), shown, journal):
        assert user.password not in where and urllib.parse.quote(user.password, safe="") not in where


def dashboard(systemd: PrivateSystemd, user: DatabaseUser) -> None:
    """mysqlq-web.service with the DSN and its token as credentials: it serves /metrics behind the
    token, and its environment holds neither secret."""
    token = secrets.token_hex(24)
    port = free_port()
    systemd.run("sh", "-c", f"umask 077 && cat > {TOKEN}", input=token + "\n")
    systemd.write("/etc/mysqlq/web.env", f"MYSQLQ_WEB_BIND=127.0.0.1:{port}\n")
    systemd.systemctl("start", "mysqlq-web.service")
    url = f"http://127.0.0.1:{port}/metrics"

    def answers() -> bool:
        try:
            return get(url)[0] == 401
        except OSError:
            return False

    wait_for(answers, "mysqlq-web.service to listen and ask for the token", 30)
    assert get(url, {"Authorization": f"Bearer {token}"})[0] == 200
    pid = systemd.main_pid("mysqlq-web.service")
    assert pid > 1
    environ = systemd.run("cat", f"/proc/{pid}/environ").stdout
    assert token not in environ and user.password not in environ
    systemd.systemctl("stop", "mysqlq-web.service")


def test_workers_read_the_dsn_from_a_credential_and_nowhere_holds_the_password(
        qdb: QueueDB, mariadb: MariaDBServer, user: DatabaseUser, systemd: PrivateSystemd) -> None:
    assert mariadb.tcp_dsn
    dsn = user.dsn(with_database(mariadb.tcp_dsn, qdb.name))
    installed = systemd.run(MYSQLQ, "install-systemd", "--name", "worker", "--web")
    assert f"next: write the DSN into {PLAIN}" in installed.stdout
    assert systemd.run("stat", "-c", "%a %U", "/etc/credstore").stdout.split() == ["700", "root"]
    # The env file keeps the settings that are not secret; the DSN goes in the credential.
    systemd.write(ENV, "MYSQLQ_QUEUES=cred\nMYSQLQ_POLL_INTERVAL=0.3\n")
    systemd.run("sh", "-c", f"umask 077 && cat > {PLAIN}", input=dsn + "\n")
    # The guide's command for the CLI, with the units' settings and DSN.
    migrated = systemd.run(MYSQLQ, "--env-file", ENV, "--dsn-file", PLAIN, "migrate")
    assert migrated.stdout.startswith("schema is up to date") and user.password not in migrated.stdout
    drain(systemd, qdb, user)
    dashboard(systemd, user)

    # Only the password as a credential, unencoded, and the rest of the DSN in the env file.
    systemd.run("rm", PLAIN)
    systemd.run("sh", "-c", f"umask 077 && cat > {PASSWORD}", input=user.password + "\n")
    systemd.write(ENV, f"MYSQLQ_DSN={user.dsn(with_database(mariadb.tcp_dsn, qdb.name), password=False)}\n"
                  "MYSQLQ_QUEUES=cred\nMYSQLQ_POLL_INTERVAL=0.3\n")
    drain(systemd, qdb, user)

    # Encrypted with systemd-creds, with the host key (kept in the test's directory, not the machine's).
    systemd.run("rm", PASSWORD)
    systemd.write(ENV, "MYSQLQ_QUEUES=cred\nMYSQLQ_POLL_INTERVAL=0.3\n")
    systemd.run("mkdir", "-p", "/etc/mysqlq-test-keys")
    systemd.run("mount", "--bind", "/etc/mysqlq-test-keys", "/var/lib/systemd")
    installed = systemd.run(MYSQLQ, "install-systemd", "--name", "worker", "--credentials", "encrypted")
    assert f"next: write the DSN into {ENCRYPTED} with `systemd-creds encrypt --name=mysqlq.dsn - {ENCRYPTED}`" \
        in installed.stdout
    systemd.run("systemd-creds", "encrypt", "--name=mysqlq.dsn", "-", ENCRYPTED, input=dsn + "\n")
    assert user.password.encode() not in Path(systemd.base / "etc/upper" / ENCRYPTED[5:]).read_bytes()
    migrated = systemd.run("sh", "-c", f"systemd-creds decrypt {ENCRYPTED} - | {MYSQLQ} --env-file {ENV} "
                           "--dsn-file /dev/stdin migrate")
    assert migrated.stdout.startswith("schema is up to date"), migrated.stdout
    drain(systemd, qdb, user)
    systemd.systemctl("stop", "worker@1")
