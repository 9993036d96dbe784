"""Run a throwaway 3-node MariaDB Galera cluster on loopback, for tests and the benchmark.

Each node is a private ``mariadbd`` (mysqlq_harness.mariadb) with its own data dir, socket,
client port, group-communication port, incremental-transfer port and state-transfer port, all
under one base directory and all on 127.0.0.1. Node 1 bootstraps the cluster; the others join it
by a full state transfer (``mariabackup`` and ``socat``: rsync transfers fail when mariadbd runs as
root, since the joiner's rsync daemon drops to ``nobody``). A node killed with ``kill -9`` and
started again rejoins by an incremental transfer from a donor's write-set cache.

Buffer pools and caches are small, so that three nodes fit a 2-core machine beside the workers.

Library use::

    cluster = PrivateGalera(pathlib.Path("/tmp/g"))
    cluster.start()              # bootstrap node 1, join 2 and 3, wait until all are Synced
    cluster.dsn                  # mysql://root@127.0.0.1:P1,127.0.0.1:P2,127.0.0.1:P3/test
    cluster.nodes[2].kill(); cluster.rejoin(2)
    cluster.stop()

Command line::

    python -m mysqlq_harness.galera start DIR     # prints the multi-host DSN
    python -m mysqlq_harness.galera stop DIR
    python -m mysqlq_harness.galera kill DIR N    # kill -9 node N (1-3)
    python -m mysqlq_harness.galera restart DIR N # start node N again and wait until Synced
"""

from __future__ import annotations

import argparse
import contextlib
import os
import pathlib
import shutil
import subprocess
import sys
import time
from collections.abc import Sequence

from mysqlq_harness.mariadb import MariaDBError, PrivateMariaDB, _mariadbd
from mysqlq_harness.net import free_port

__all__ = ["GaleraNode", "PrivateGalera"]

PROVIDER_CANDIDATES = ("/usr/lib/galera/libgalera_smm.so", "/usr/lib/libgalera_smm.so",
                       "/usr/lib64/galera-4/libgalera_smm.so")
CLUSTER_NAME = "mysqlq_test"
SIZE = 3
REJOIN_ATTEMPTS = 2  # starts of a rejoining node (see PrivateGalera.rejoin)
BOOTSTRAP_AFTER = 5.0  # seconds survivors stay together without a primary component before it is bootstrapped


def provider() -> str:
    """The Galera library (Debian's galera-4)."""
    for path in PROVIDER_CANDIDATES:
        if os.path.exists(path):
            return path
    raise MariaDBError("the Galera library is not installed (Debian: apt-get install galera-4)")


def _ports(path: pathlib.Path) -> dict[str, int]:
    """Ports chosen at a node's first start and kept (group communication, IST, SST)."""
    if path.exists():
        return {key: int(value) for key, value in
                (line.split("=", 1) for line in path.read_text().split() if "=" in line)}
    ports = {"gcomm": free_port(), "ist": free_port(), "sst": free_port()}
    path.write_text("".join(f"{key}={value}\n" for key, value in ports.items()))
    return ports


class GaleraNode(PrivateMariaDB):
    """One node: a private mariadbd with the wsrep settings of the cluster, read from its own
    option file (state transfer scripts read their settings from it too)."""

    def __init__(self, basedir: pathlib.Path, index: int, cluster: PrivateGalera, *,
                 die_with_parent: bool = False) -> None:
        super().__init__(basedir, die_with_parent=die_with_parent)
        self.index = index
        self.cluster = cluster
        self.bootstrap = False
        self.option_file = self.basedir / "node.cnf"

    def _argument_marker(self) -> bytes:
        """A node is started with its option file only (the data dir is named inside it)."""
        return os.fsencode(f"--defaults-file={self.option_file}")

    @property
    def ports(self) -> dict[str, int]:
        self.basedir.mkdir(parents=True, exist_ok=True)
        return _ports(self.basedir / "galera-ports")

    def _install(self) -> None:
        super()._install()
        if self.index != 1:
            # Joiners get their data (users included) from a donor by state transfer.
            with contextlib.suppress(FileNotFoundError):
                self._first_start_file.unlink()

    def _write_options(self) -> None:
        ports = self.ports
        peers = ",".join(f"127.0.0.1:{node.ports['gcomm']}" for node in self.cluster.nodes)
        address = "gcomm://" if self.bootstrap else f"gcomm://{peers}"
        options = (f"gmcast.listen_addr=tcp://127.0.0.1:{ports['gcomm']}; ist.recv_addr=127.0.0.1:{ports['ist']}; "
                   "gcache.size=64M; gcs.fc_limit=64; pc.recovery=false; evs.suspect_timeout=PT3S; "
                   "evs.inactive_timeout=PT6S; pc.wait_prim_timeout=PT30S")
        lines = [
            "[mysqld]",
            f"datadir={self.datadir}",
            f"socket={self.socket}",
            f"pid-file={self.pid_file}",
            f"log-error={self.error_log}",
            f"tmpdir={self.basedir / 'tmp'}",
            f"port={self.port}",
            "bind-address=127.0.0.1",
            "skip-name-resolve",
            "max-connections=300",
            "innodb-buffer-pool-size=64M",
            "innodb-log-file-size=48M",
            "character-set-server=utf8mb4",
            "collation-server=utf8mb4_general_ci",
            "binlog-format=ROW",
            "default-storage-engine=InnoDB",
            "innodb-autoinc-lock-mode=2",
            "wsrep-on=ON",
            f"wsrep-provider={provider()}",
            f"wsrep-cluster-name={CLUSTER_NAME}",
            f"wsrep-cluster-address={address}",
            f"wsrep-node-name=node{self.index}",
            "wsrep-node-address=127.0.0.1",
            f"wsrep-node-incoming-address=127.0.0.1:{self.port}",
            f"wsrep-provider-options={options}",
            "wsrep-sst-method=mariabackup",
            "wsrep-sst-auth=root:",
            f"wsrep-sst-receive-address=127.0.0.1:{ports['sst']}",
            "[sst]",
            f"tmpdir={self.basedir / 'tmp'}",
            "[mariabackup]",
            f"socket={self.socket}",
            "user=root",
        ]
        if os.geteuid() == 0:
            lines.insert(1, "user=root")
        self.option_file.write_text("\n".join(lines) + "\n")

    def _server_args(self) -> list[str]:
        self._write_options()
        args = [_mariadbd(), f"--defaults-file={self.option_file}"]
        if self._first_start_file.exists():
            args.append(f"--init-file={self._first_start_file}")
        return args

    def start(self, timeout: float = 120) -> None:
        if not self.port_chosen():
            self.basedir.mkdir(parents=True, exist_ok=True)
            (self.basedir / "port").write_text(f"{free_port()}\n")
        super().start(timeout=timeout)

    def port_chosen(self) -> bool:
        return (self.basedir / "port").exists()

    def status(self, name: str) -> str:
        """A wsrep status variable, read with the mariadb client over the node's socket."""
        result = subprocess.run(
            [_client(), "--no-defaults", "-uroot", f"--socket={self.socket}", "-N", "-B", "-e",
             f"SHOW GLOBAL STATUS LIKE '{name}'"],
            capture_output=True, text=True, timeout=10, check=False)
        parts = result.stdout.split()
        return parts[1] if len(parts) >= 2 else ""

    def synced(self) -> bool:
        return self.running and self.status("wsrep_local_state_comment") == "Synced"

    def bootstrap_component(self) -> None:
        """Make this node's group the primary component again (Galera's recovery when a group lost it)."""
        subprocess.run([_client(), "--no-defaults", "-uroot", f"--socket={self.socket}", "-e",
                        "SET GLOBAL wsrep_provider_options = 'pc.bootstrap=YES'"],
                       capture_output=True, text=True, timeout=10, check=True)


def _client() -> str:
    found = shutil.which("mariadb") or shutil.which("mysql")
    if not found:
        raise MariaDBError("the mariadb client is not installed (Debian: apt-get install mariadb-client)")
    return found


class PrivateGalera:
    """Three GaleraNode servers under ``basedir/node1..3`` forming one cluster on loopback."""

    def __init__(self, basedir: pathlib.Path, *, die_with_parent: bool = False) -> None:
        self.basedir = pathlib.Path(basedir).resolve()
        self.nodes: list[GaleraNode] = []
        for index in range(1, SIZE + 1):
            self.nodes.append(GaleraNode(self.basedir / f"node{index}", index, self, die_with_parent=die_with_parent))
        for node in self.nodes:  # every node's ports exist before any option file names its peers
            node.basedir.mkdir(parents=True, exist_ok=True)
            if not node.port_chosen():
                (node.basedir / "port").write_text(f"{free_port()}\n")
            _ = node.ports

    def node(self, index: int) -> GaleraNode:
        if not 1 <= index <= SIZE:
            raise MariaDBError(f"there is no node {index}: nodes are 1 to {SIZE}")
        return self.nodes[index - 1]

    @property
    def dsn(self) -> str:
        """One DSN naming every node (mysqlq fails over between them)."""
        hosts = ",".join(f"127.0.0.1:{node.port}" for node in self.nodes)
        return f"mysql://root@{hosts}/test"

    def node_dsn(self, index: int) -> str:
        return self.node(index).tcp_dsn

    def start(self, timeout: float = 300) -> None:
        """Bootstrap node 1 (unless another node runs), start the others, wait until all are Synced."""
        deadline = time.monotonic() + timeout
        if not any(node.running for node in self.nodes):
            first = self.nodes[0]
            first.bootstrap = True
            _mark_safe_to_bootstrap(first.datadir)
            try:
                first.start(timeout=max(1.0, deadline - time.monotonic()))
            finally:
                first.bootstrap = False
            self._wait_synced(first, deadline)
        for node in self.nodes:
            if not node.running:
                node.start(timeout=max(1.0, deadline - time.monotonic()))
            self._wait_synced(node, deadline)

    def rejoin(self, index: int, timeout: float = 180) -> None:
        """Start a stopped or killed node again; returns once it is Synced.

        It waits first until the other nodes have evicted the node's old self (a killed node is only
        declared gone after the group's inactivity timeout): a node that comes back while its old
        self is still a member splits the group into non-primary views.
        """
        node = self.node(index)
        deadline = time.monotonic() + timeout
        others = [other for other in self.nodes if other is not node and other.running]
        evicted_at: float | None = None
        while any(other.status("wsrep_cluster_size") != str(len(others))
                  or other.status("wsrep_cluster_status") != "Primary" for other in others):
            if time.monotonic() >= deadline:
                raise MariaDBError(f"the cluster did not evict node {index} in time")
            if all(other.status("wsrep_cluster_size") == str(len(others)) for other in others):
                # Together, but without a primary component: seen under load when the kill fell in
                # a view change (each survivor alone for a moment, neither with a majority of the
                # last primary view). Galera's documented recovery: bootstrap it on one of them.
                evicted_at = evicted_at or time.monotonic()
                if time.monotonic() - evicted_at > BOOTSTRAP_AFTER:
                    others[0].bootstrap_component()
                    evicted_at = None
            time.sleep(0.2)
        for attempt in range(REJOIN_ATTEMPTS):
            try:
                node.start(timeout=max(1.0, deadline - time.monotonic()))
                break
            except MariaDBError:
                # Seen under load: the joiner still meets its old self in the group's membership,
                # never reaches a primary view and exits after pc.wait_prim_timeout. A second
                # start, once the group has forgotten the old self, joins.
                if attempt + 1 == REJOIN_ATTEMPTS or time.monotonic() + 60 >= deadline:
                    raise
                time.sleep(3)
        self._wait_synced(node, deadline)

    def _wait_synced(self, node: GaleraNode, deadline: float) -> None:
        while not node.synced():
            if not node.running:
                raise MariaDBError(f"galera node {node.index} exited while joining (log {node.error_log})")
            if time.monotonic() >= deadline:
                raise MariaDBError(f"galera node {node.index} not Synced in time (log {node.error_log})")
            time.sleep(0.2)

    def stop(self, timeout: float = 60) -> None:
        for node in reversed(self.nodes):
            node.stop(timeout=timeout)

    def kill(self) -> None:
        for node in self.nodes:
            node.kill()


def _mark_safe_to_bootstrap(datadir: pathlib.Path) -> None:
    """After a whole-cluster stop the state file may forbid a bootstrap; this cluster is throwaway."""
    state = datadir / "grastate.dat"
    with contextlib.suppress(OSError):
        text = state.read_text()
        state.write_text(text.replace("safe_to_bootstrap: 0", "safe_to_bootstrap: 1"))


def _parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="python -m mysqlq_harness.galera",
                                description="A throwaway 3-node Galera cluster under DIR.")
    sub = p.add_subparsers(dest="command", required=True, metavar="COMMAND")
    for name, text in (("start", "start the cluster, print its DSN"), ("stop", "stop every node"),
                       ("dsn", "print the DSN")):
        sub.add_parser(name, help=text).add_argument("dir", type=pathlib.Path, metavar="DIR")
    for name, text in (("kill", "kill -9 node N"), ("restart", "start node N again, wait until Synced")):
        sp = sub.add_parser(name, help=text)
        sp.add_argument("dir", type=pathlib.Path, metavar="DIR")
        sp.add_argument("n", type=int, metavar="N")
    return p


def main(argv: Sequence[str] | None = None) -> int:
    args = _parser().parse_args(argv)
    cluster = PrivateGalera(args.dir)
    try:
        if args.command == "start":
            cluster.start()
            print(cluster.dsn)
        elif args.command == "stop":
            cluster.stop()
        elif args.command == "dsn":
            print(cluster.dsn)
        elif args.command == "kill":
            cluster.node(args.n).kill()
        elif args.command == "restart":
            cluster.rejoin(args.n)
    except MariaDBError as e:
        print(f"mysqlq_harness.galera: error: {e.summary}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
