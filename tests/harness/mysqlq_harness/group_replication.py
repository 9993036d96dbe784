"""Run a throwaway 3-member MySQL Group Replication group (single-primary) on loopback, for tests.

Each member is a private MySQL ``mysqld`` (mysqlq_harness.mysql) with its own data dir, socket,
client port and group-communication port under one base directory, all on 127.0.0.1, with GTIDs,
a binary log and the group_replication plugin of the private root. Member 1 bootstraps the group;
the others join it and catch up by distributed recovery from a donor's binary log (a replication
user of their own, its password sent in the clear over loopback: the server's public key is
fetched, no TLS). A member killed with ``kill -9`` and started again rejoins the same way.

Library use::

    group = PrivateGroup(pathlib.Path("/tmp/gr"))
    group.start()                 # bootstrap member 1, join 2 and 3, wait until all are ONLINE
    group.dsn                     # mysql://root@127.0.0.1:P1,127.0.0.1:P2,127.0.0.1:P3/test
    group.primary()               # the index of the member that takes writes
    group.member(2).kill(); group.rejoin(2)
    group.switch_primary(3)
    group.stop()
"""

from __future__ import annotations

import contextlib
import pathlib
import time
import uuid
from typing import Any

from mysqlq_harness.mariadb import MariaDBError
from mysqlq_harness.mysql import PrivateMySQL
from mysqlq_harness.net import free_port

__all__ = ["GroupMember", "PrivateGroup"]

SIZE = 3
REPLICATION_USER = "mysqlq_repl"
REPLICATION_PASSWORD = "mysqlq-repl-loopback-only"


def _query(port: int, sql: str, params: Any = None) -> list[tuple[Any, ...]]:
    """Run one statement as root on the member listening on ``port``; its rows."""
    import MySQLdb

    with contextlib.closing(MySQLdb.connect(host="127.0.0.1", port=port, user="root", connect_timeout=5,
                                            autocommit=True)) as conn, conn.cursor() as cur:
        cur.execute(sql, params)
        return list(cur.fetchall())


class GroupMember(PrivateMySQL):
    """One member: a private mysqld with the options Group Replication needs."""

    def __init__(self, basedir: pathlib.Path, index: int, group: PrivateGroup, **options: Any) -> None:
        super().__init__(basedir, **options)
        self.index = index
        self.group = group

    @property
    def group_port(self) -> int:
        path = self.basedir / "group-port"
        if not path.exists():
            path.write_text(f"{free_port()}\n")
        return int(path.read_text())

    def _layout_args(self) -> list[str]:
        return [arg for arg in super()._layout_args() if arg != "--skip-log-bin"]

    def _server_args(self) -> list[str]:
        seeds = ",".join(f"127.0.0.1:{member.group_port}" for member in self.group.members)
        return [
            *super()._server_args(),
            f"--server-id={self.index}",
            "--gtid-mode=ON",
            "--enforce-gtid-consistency=ON",
            f"--log-bin={self.datadir / 'binlog'}",
            "--disabled-storage-engines=MyISAM,BLACKHOLE,FEDERATED,ARCHIVE,MEMORY",
            "--report-host=127.0.0.1",
            f"--report-port={self.port}",
            "--plugin-load-add=group_replication.so",
            f"--loose-group-replication-group-name={self.group.name}",
            f"--loose-group-replication-local-address=127.0.0.1:{self.group_port}",
            f"--loose-group-replication-group-seeds={seeds}",
            "--loose-group-replication-start-on-boot=OFF",
            "--loose-group-replication-bootstrap-group=OFF",
            "--loose-group-replication-recovery-get-public-key=ON",
            "--loose-group-replication-ip-allowlist=127.0.0.1",
            "--innodb-buffer-pool-size=128M",
            # A member restarted after it was in the group starts read-only until it has joined
            # again (the plugin lifts it on the primary): meanwhile clients that reconnect to it
            # (a worker whose DSN lists it first) are refused instead of writing transactions the
            # group does not have, which would make it refuse the member.
            *(["--super-read-only=ON"] if self.joined_once.exists() else []),
        ]

    @property
    def joined_once(self) -> pathlib.Path:
        return self.basedir / "joined-once"

    def query(self, sql: str, params: Any = None) -> list[tuple[Any, ...]]:
        return _query(self.port, sql, params)

    def state(self) -> str:
        """This member's state as it sees itself (ONLINE, RECOVERING, OFFLINE, ERROR...)."""
        try:
            rows = self.query("SELECT MEMBER_STATE FROM performance_schema.replication_group_members "
                              "WHERE MEMBER_ID = @@server_uuid")
        except Exception:  # down, or starting
            return "DOWN"
        return str(rows[0][0]) if rows else "OFFLINE"

    def join(self, bootstrap: bool) -> None:
        """Forget the transactions of this server's own setup, set up recovery, and start the plugin.
        A member that was in the group before kept its recovery user and channel: it only starts the
        plugin (it is read-only until then, see _server_args)."""
        statements = [
            "SET SQL_LOG_BIN = 0",
            f"CREATE USER IF NOT EXISTS '{REPLICATION_USER}'@'127.0.0.1' IDENTIFIED BY '{REPLICATION_PASSWORD}'",
            f"GRANT REPLICATION SLAVE, CONNECTION_ADMIN, BACKUP_ADMIN, GROUP_REPLICATION_STREAM ON *.* "
            f"TO '{REPLICATION_USER}'@'127.0.0.1'",
            "SET SQL_LOG_BIN = 1",
            f"CHANGE REPLICATION SOURCE TO SOURCE_USER = '{REPLICATION_USER}', "
            f"SOURCE_PASSWORD = '{REPLICATION_PASSWORD}' FOR CHANNEL 'group_replication_recovery'",
        ]
        if self.joined_once.exists():
            statements = []
        if bootstrap:
            statements += ["SET GLOBAL group_replication_bootstrap_group = ON", "START GROUP_REPLICATION",
                           "SET GLOBAL group_replication_bootstrap_group = OFF"]
        else:
            statements += ["START GROUP_REPLICATION"]
        import MySQLdb

        conn = MySQLdb.connect(host="127.0.0.1", port=self.port, user="root", connect_timeout=5, autocommit=True)
        try:
            with conn.cursor() as cur:
                if not self.joined_once.exists():
                    cur.execute("RESET BINARY LOGS AND GTIDS")  # the setup's own transactions are not the group's
                for statement in statements:
                    cur.execute(statement)
        finally:
            conn.close()
        self.joined_once.write_text("1\n")


class PrivateGroup:
    """Three GroupMember servers under ``basedir/member1..3`` forming one single-primary group."""

    def __init__(self, basedir: pathlib.Path, *, die_with_parent: bool = False) -> None:
        self.basedir = pathlib.Path(basedir).resolve()
        self.basedir.mkdir(parents=True, exist_ok=True)
        name_file = self.basedir / "group-name"
        if not name_file.exists():
            name_file.write_text(f"{uuid.uuid4()}\n")
        self.name = name_file.read_text().strip()
        self.members = [GroupMember(self.basedir / f"member{index}", index, self, die_with_parent=die_with_parent)
                        for index in range(1, SIZE + 1)]
        for member in self.members:  # every member's ports exist before any names its peers
            member.basedir.mkdir(parents=True, exist_ok=True)
            if not (member.basedir / "port").exists():
                (member.basedir / "port").write_text(f"{free_port()}\n")
            _ = member.group_port

    def member(self, index: int) -> GroupMember:
        if not 1 <= index <= SIZE:
            raise MariaDBError(f"there is no member {index}: members are 1 to {SIZE}")
        return self.members[index - 1]

    @property
    def dsn(self) -> str:
        hosts = ",".join(f"127.0.0.1:{member.port}" for member in self.members)
        return f"mysql://root@{hosts}/test"

    def start(self, timeout: float = 300) -> None:
        deadline = time.monotonic() + timeout
        for member in self.members:
            member.start(timeout=max(1.0, deadline - time.monotonic()))
        first = self.members[0]
        first.join(bootstrap=True)
        self._wait_online(first, deadline)
        first.query("CREATE DATABASE IF NOT EXISTS test")
        for member in self.members[1:]:
            member.join(bootstrap=False)
            self._wait_online(member, deadline)

    def primary(self) -> int:
        """The index of the member the group takes writes on."""
        for member in self.members:
            if member.running and member.state() == "ONLINE":
                rows = member.query("SELECT MEMBER_PORT FROM performance_schema.replication_group_members "
                                    "WHERE MEMBER_ROLE = 'PRIMARY'")
                if rows:
                    return next(m.index for m in self.members if m.port == int(rows[0][0]))
        raise MariaDBError("no member of the group is ONLINE with a primary")

    def switch_primary(self, index: int) -> None:
        """Make member ``index`` the primary (the old one stays a secondary)."""
        target = self.member(index)
        uuid_rows = target.query("SELECT @@server_uuid")
        self.member(self.primary()).query("SELECT group_replication_set_as_primary(%s)", (uuid_rows[0][0],))

    def rejoin(self, index: int, timeout: float = 180) -> None:
        """Start a stopped or killed member again and wait until it is ONLINE."""
        member = self.member(index)
        deadline = time.monotonic() + timeout
        member.start(timeout=max(1.0, deadline - time.monotonic()))
        member.join(bootstrap=False)
        self._wait_online(member, deadline)

    def _wait_online(self, member: GroupMember, deadline: float) -> None:
        while (state := member.state()) != "ONLINE":
            if state == "ERROR" or not member.running:
                raise MariaDBError(f"group member {member.index} is {state} (log {member.error_log})")
            if time.monotonic() >= deadline:
                raise MariaDBError(f"group member {member.index} not ONLINE in time: {state} "
                                   f"(log {member.error_log})")
            time.sleep(0.2)

    def stop(self, timeout: float = 60) -> None:
        for member in reversed(self.members):
            member.stop(timeout=timeout)

    def kill(self) -> None:
        for member in self.members:
            member.kill()
