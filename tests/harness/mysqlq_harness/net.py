"""Local ports and HTTP: a free port, a GET that returns what any status says, and a server process
run for as long as a test needs it."""

from __future__ import annotations

import socket
import subprocess
import urllib.error
import urllib.request
from collections.abc import Iterator, Mapping, Sequence
from contextlib import contextmanager
from pathlib import Path

from mysqlq_harness.waiting import stop_processes, wait_for


def free_port() -> int:
    """A TCP port on 127.0.0.1 that nothing listens on (as of now)."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def get(url: str, headers: dict[str, str] | None = None) -> tuple[int, str]:
    """(status, body) of a GET, without raising on 4xx/5xx."""
    request = urllib.request.Request(url, headers=headers or {})
    try:
        with urllib.request.urlopen(request, timeout=30) as response:
            return response.status, response.read().decode()
    except urllib.error.HTTPError as exc:
        return exc.code, exc.read().decode()


def listening(port: int) -> bool:
    """Something accepts connections on 127.0.0.1:``port``."""
    try:
        with socket.create_connection(("127.0.0.1", port), timeout=1):
            return True
    except OSError:
        return False


@contextmanager
def serving(command: Sequence[str], port: int, log: Path, *, env: Mapping[str, str], cwd: Path | None = None,
            timeout: float = 60) -> Iterator[str]:
    """Run ``command`` (its output into ``log``) until it listens on 127.0.0.1:``port``; yield its
    base URL; stop it afterwards. A command that exits first fails with its output."""
    with open(log, "wb") as out:
        proc = subprocess.Popen(list(command), cwd=cwd, env=dict(env), stdout=out, stderr=subprocess.STDOUT)

    def up() -> bool:
        if proc.poll() is not None:
            raise AssertionError(f"{command[0]} exited with {proc.returncode}: {log.read_text(errors='replace')}")
        return listening(port)

    try:
        wait_for(up, lambda: f"{command[0]} to listen on port {port}: {log.read_text(errors='replace')}", timeout)
        yield f"http://127.0.0.1:{port}"
    finally:
        stop_processes([proc], timeout=20)
