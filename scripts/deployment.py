"""Workers deployed as users deploy them, for the demo and the wheel's smoke test: ``mysqlq
install-systemd``, ``systemctl start NAME@1 NAME@2``, ``systemctl status``, ``journalctl -u 'NAME@*'
JOB_ID=N`` and ``systemctl stop``, under this machine's systemd when it is PID 1, else under a private
one (mysqlq_harness.systemd: PID 1 of namespaces of its own, as the end-to-end tests use it).

On this machine's systemd the deployment must not touch what is already there: its units have a name
of their own, its settings (the DSN) come from a file of its own through a drop-in that also drops the
units' usual env files and credentials (an /etc/mysqlq/mysqlq.env or /etc/credstore/mysqlq.dsn of a
real deployment is not read), and :meth:`Deployment.uninstall` removes every file the installer wrote
and nothing else. Inside a private systemd, /etc is an overlay that vanishes with it, so the same
steps leave nothing behind either.
"""

from __future__ import annotations

import json
import os
import shlex
import shutil
import subprocess
import time
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from pathlib import Path
from typing import Protocol

from mysqlq_harness.systemd import PrivateSystemd, missing_prerequisites

UNITS = Path("/etc/systemd/system")


class Systemd(Protocol):
    """Where ``systemctl`` and ``journalctl`` run (the signature of PrivateSystemd.run)."""

    def run(self, *argv: str, check: bool = True, input: str | None = None, timeout: float = 60,
            env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]: ...


class MachineSystemd:
    """This machine's own systemd, PID 1: commands run here, as root."""

    def run(self, *argv: str, check: bool = True, input: str | None = None, timeout: float = 60,
            env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
        environment = {**os.environ, "SYSTEMD_PAGER": "", "SYSTEMD_COLORS": "0", **(env or {})}
        result = subprocess.run(list(argv), input=input, capture_output=True, text=True, timeout=timeout,
                                env=environment, check=False)
        if check and result.returncode != 0:
            raise RuntimeError(f"{shlex.join(argv)} exited {result.returncode}: {result.stderr.strip()}")
        return result


def machine_runs_systemd() -> bool:
    """True when this machine booted with systemd as PID 1 (sd_booted's test) and we are root."""
    return os.geteuid() == 0 and Path("/run/systemd/system").is_dir()


@contextmanager
def a_systemd(state: Path) -> Iterator[tuple[Systemd | None, str]]:
    """(a systemd, what it is), or (None, why none can run here); a private one is stopped at the end."""
    if machine_runs_systemd():
        yield MachineSystemd(), "this machine's systemd"
        return
    reason = missing_prerequisites()
    if reason:
        yield None, f"this machine's PID 1 is not systemd, and a private one cannot run here ({reason})"
        return
    shutil.rmtree(state, ignore_errors=True)  # a fresh journal and /etc each time: no story of an earlier run
    with PrivateSystemd(state, traversable_root=True) as private:
        yield private, "a private systemd (PID 1 of namespaces of its own; /etc, /run and /tmp private to it)"


class Deployment:
    """NAME@.service installed by ``mysqlq install-systemd`` from ``mysqlq`` (a venv's console script),
    its settings in a file of its own (``settings``: MYSQLQ_* variables, the DSN among them)."""

    def __init__(self, systemd: Systemd, mysqlq: str, name: str, settings: Mapping[str, str],
                 unit_lines: str = "") -> None:
        self.systemd = systemd
        self.mysqlq = mysqlq
        self.name = name
        self.settings = dict(settings)
        self.unit_lines = unit_lines  # more [Service] settings, e.g. WatchdogSec=2s
        self.env_file = f"/etc/mysqlq/{name}.deployment.env"
        self.dropin = UNITS / f"{name}@.service.d" / "deployment.conf"
        self._written: list[str] = []  # what the installer wrote (and the deployment must remove)

    def run(self, *argv: str, check: bool = True, input: str | None = None) -> subprocess.CompletedProcess[str]:
        return self.systemd.run(*argv, check=check, input=input)

    def write(self, path: str, text: str, mode: str = "0644") -> None:
        self.run("sh", "-c", 'mkdir -p "$(dirname "$1")" && umask 077 && cat > "$1" && chmod "$2" "$1"',
                 "write", path, mode, input=text)

    def install(self) -> str:
        """``mysqlq install-systemd --name NAME``, then the deployment's settings; returns the installer's output."""
        config = Path("/etc/mysqlq")
        existed = self.run("test", "-d", str(config), check=False).returncode == 0
        result = self.run(self.mysqlq, "install-systemd", "--name", self.name)
        if not existed:
            self._written.append(str(config))
        for line in result.stdout.splitlines():
            what, _, path = line.partition(" ")
            if what in ("wrote", "made") and path.startswith("/"):
                self._written.append(path)
        self._written += [str(self.dropin.parent), str(self.dropin), self.env_file]
        self.write(self.env_file, "".join(f"{key}={value}\n" for key, value in self.settings.items()), "0600")
        # Empty assignments drop the unit's env files and credentials: only this deployment's settings count.
        self.write(str(self.dropin), f"[Service]\nEnvironmentFile=\nEnvironmentFile={self.env_file}\n"
                   f"LoadCredential=\n{self.unit_lines}")
        self.run("systemctl", "daemon-reload")
        return result.stdout

    def instances(self, *numbers: int) -> list[str]:
        return [f"{self.name}@{n}" for n in numbers]

    def systemctl(self, *args: str, check: bool = True) -> subprocess.CompletedProcess[str]:
        return self.run("systemctl", "--no-pager", *args, check=check)

    def show(self, unit: str, *properties: str) -> dict[str, str]:
        shown = self.systemctl("show", unit, *(f"--property={name}" for name in properties)).stdout
        return dict(line.split("=", 1) for line in shown.splitlines() if "=" in line)

    def journal(self, *args: str) -> list[dict[str, str]]:
        """Entries of the deployment's units as JSON objects."""
        out = self.run("journalctl", "--no-pager", "-o", "json", "-u", f"{self.name}@*", *args, check=False).stdout
        return [json.loads(line) for line in out.splitlines() if line.startswith("{")]

    def wait_journal(self, *matches: str, timeout: float = 30) -> list[dict[str, str]]:
        """Entries matching ``FIELD=value`` arguments, once there are some (journald files them a moment later)."""
        deadline = time.monotonic() + timeout
        while True:
            found = self.journal(*matches)
            if found or time.monotonic() > deadline:
                return found
            time.sleep(0.2)

    def uninstall(self) -> None:
        """Stop the instances and remove what the installer and the deployment wrote, newest first."""
        self.systemctl("stop", f"{self.name}@*", f"{self.name}.target", check=False)
        for path in reversed(self._written):
            self.run("sh", "-c", 'if [ -d "$1" ]; then rmdir "$1" 2>/dev/null || true; else rm -f "$1"; fi',
                     "remove", path, check=False)
        self._written = []
        self.run("systemctl", "daemon-reload", check=False)
        self.systemctl("reset-failed", f"{self.name}@*", check=False)
