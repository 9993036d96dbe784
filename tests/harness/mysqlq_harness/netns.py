"""Test hosts on one machine: network namespaces joined by a bridge, for tests and the benchmark.

Each host is a network namespace with one interface, ``eth0``, addressed ``10.77.0.N/24``; the bridge
lives in a namespace of its own, so nothing is added to the machine's own network (its interfaces,
addresses and routes stay as they are). Names carry the pid and a random tag, so runs in parallel do
not meet. ``down()`` (also on leaving the ``with`` block) kills what still runs inside and deletes
every namespace, which deletes their interfaces too.

    with Hosts(["db", "producer", "workers"]) as net:
        net.address("db")                       # "10.77.0.1"
        subprocess.run([*net.enter("producer"), "mysqlq", "enqueue", ...])

Needs root and ``ip`` (iproute2); ``unavailable()`` says why not, if not.
"""

from __future__ import annotations

import contextlib
import os
import secrets
import shutil
import signal
import subprocess
from collections.abc import Sequence

SUBNET = "10.77.0"


def unavailable() -> str | None:
    """Why network namespaces cannot be made here, or None if they can."""
    if os.geteuid() != 0:
        return "network namespaces need root"
    if shutil.which("ip") is None:
        return "the ip command (iproute2) is missing"
    return None


class Hosts:
    """Namespaces named after ``names``, with addresses 10.77.0.1, .2, … in that order."""

    def __init__(self, names: Sequence[str]) -> None:
        self.names = list(names)
        self.tag = f"mq{os.getpid()}-{secrets.token_hex(3)}"
        self.switch = f"{self.tag}-sw"
        self._made: list[str] = []

    def namespace(self, name: str) -> str:
        return f"{self.tag}-{name}"

    def address(self, name: str) -> str:
        return f"{SUBNET}.{self.names.index(name) + 1}"

    def enter(self, name: str) -> list[str]:
        """The command prefix that runs a program on host ``name`` (``ip netns exec`` execs it: same pid)."""
        return ["ip", "netns", "exec", self.namespace(name)]

    def up(self) -> Hosts:
        try:
            self._add(self.switch)
            _ip("-n", self.switch, "link", "add", "br0", "type", "bridge")
            _ip("-n", self.switch, "link", "set", "br0", "up")
            for index, name in enumerate(self.names):
                ns = self.namespace(name)
                self._add(ns)
                _ip("-n", self.switch, "link", "add", f"h{index}", "type", "veth", "peer", "name", "eth0", "netns", ns)
                _ip("-n", self.switch, "link", "set", f"h{index}", "master", "br0", "up")
                _ip("-n", ns, "addr", "add", f"{self.address(name)}/24", "dev", "eth0")
                _ip("-n", ns, "link", "set", "eth0", "up")
                _ip("-n", ns, "link", "set", "lo", "up")
        except BaseException:
            self.down()
            raise
        return self

    def _add(self, ns: str) -> None:
        _ip("netns", "add", ns)
        self._made.append(ns)

    def down(self) -> None:
        """Kill every process left in the namespaces, then delete them (and their interfaces)."""
        for ns in reversed(self._made):
            pids = subprocess.run(["ip", "netns", "pids", ns], capture_output=True, text=True, check=False).stdout
            for pid in pids.split():
                with contextlib.suppress(ProcessLookupError, ValueError):
                    os.kill(int(pid), signal.SIGKILL)
            subprocess.run(["ip", "netns", "del", ns], capture_output=True, check=False)
        self._made.clear()

    def __enter__(self) -> Hosts:
        return self.up()

    def __exit__(self, *exc: object) -> None:
        self.down()


def _ip(*args: str) -> None:
    result = subprocess.run(["ip", *args], capture_output=True, text=True, check=False)
    if result.returncode != 0:
        raise RuntimeError(f"ip {' '.join(args)}: {result.stderr.strip()}")
