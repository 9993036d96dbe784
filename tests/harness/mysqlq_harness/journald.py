"""A standalone systemd-journald for tests, in private pid and mount namespaces.

Inside, /run is a private tmpfs holding journald's sockets, and /run/log is a directory of the
harness's, so a process started with :meth:`PrivateJournald.run` logs to this journald through the
usual /run/systemd/journal/socket, and the test reads the entries back from outside with
``journalctl -D``. Teardown SIGKILLs the namespace's init, which ends every process in it.
"""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
from pathlib import Path

from mysqlq_harness.lifecycle import StartStop, unshare_init
from mysqlq_harness.systemd import PATH
from mysqlq_harness.waiting import wait_for

JOURNALD = Path("/lib/systemd/systemd-journald")
SOCKET = "run/systemd/journal/socket"

INIT = """\
set -eu
mount -t tmpfs -o mode=0755 tmpfs /run
mkdir -p /run/log /run/systemd
mount --bind "$1" /run/log
{journald} &
wait
"""


def missing_prerequisites() -> str | None:
    """Why a private journald cannot run here, or None when it can."""
    if os.geteuid() != 0:
        return "needs root (namespaces, mounts)"
    for tool in ("unshare", "nsenter", "setpriv", "journalctl"):
        if shutil.which(tool) is None:
            return f"{tool} is not installed"
    if not JOURNALD.exists():
        return f"{JOURNALD} is missing"
    return None


class PrivateJournald(StartStop):
    """systemd-journald in its own namespaces, writing below ``base``."""

    def __init__(self, base: Path) -> None:
        self.base = base.resolve()
        self.log_dir = self.base / "log"
        self.init_pid = 0
        self._proc: subprocess.Popen[bytes] | None = None

    def start(self, timeout: float = 30) -> None:
        self.log_dir.mkdir(parents=True, exist_ok=True)
        with (self.base / "namespace.log").open("wb") as log:
            self._proc = subprocess.Popen(
                ["setpriv", "--pdeathsig", "KILL", "--", "unshare", "--pid", "--fork", "--kill-child", "--mount",
                 "--propagation", "private", "--mount-proc", "sh", "-c", INIT.format(journald=JOURNALD), "init",
                 str(self.log_dir)],
                stdin=subprocess.DEVNULL, stdout=log, stderr=log, start_new_session=True,
            )
        self.init_pid = wait_for(self._init, "the namespace's init process", timeout)
        wait_for(lambda: Path(f"/proc/{self.init_pid}/root/{SOCKET}").exists(), "journald's socket", timeout)

    def _init(self) -> int:
        assert self._proc is not None
        if self._proc.poll() is not None:
            raise RuntimeError(f"unshare exited with {self._proc.returncode}")
        return unshare_init(self._proc)

    def stop(self) -> None:
        if self.init_pid > 1:
            os.kill(self.init_pid, signal.SIGKILL)
        if self._proc is not None:
            if self._proc.poll() is None and not self.init_pid:
                os.killpg(self._proc.pid, signal.SIGKILL)
            self._proc.wait(timeout=30)
            self._proc = None
        self.init_pid = 0

    def run(self, *argv: str, env: dict[str, str], timeout: float = 120) -> subprocess.CompletedProcess[str]:
        """Run a command that sees this journald (its mount namespace)."""
        return subprocess.run(["nsenter", "-t", str(self.init_pid), "-m", "-p", "--", *argv], env={"PATH": PATH, **env},
                              capture_output=True, text=True, timeout=timeout, check=False)

    def entries(self, *matches: str) -> list[dict[str, str]]:
        """Entries matching ``FIELD=value`` arguments, read from outside with ``journalctl -D``."""
        folders = [folder for folder in (self.log_dir / "journal").glob("*") if folder.is_dir()]
        if not folders:
            return []
        out = subprocess.run(["journalctl", "--no-pager", "-D", str(folders[0]), "-o", "json", *matches],
                             capture_output=True, text=True, check=False).stdout
        return [json.loads(line) for line in out.splitlines() if line.startswith("{")]
