"""Run a throwaway private ``mariadbd`` for tests, the demo and the benchmark.

Everything lives under one base directory (data dir, pid file, error log, chosen
TCP port); the unix socket lives there too unless the path would be too long for
a unix socket, in which case it goes into a short per-basedir directory in /tmp.
The server ignores every option file (``--no-defaults``), listens on its own
socket and on a free TCP port on 127.0.0.1 only (or ``bind_address``), and lets ``root`` in without a
password over the socket (``root@localhost``) and over TCP (``root@127.0.0.1``).

A server may also offer TLS with given certificate files (``tls=ServerTls(ca, cert, key)``),
refuse unencrypted TCP connections (``require_secure_transport=True``) and take further options
(``options=["--performance-schema=ON"]``): tests of encrypted connections start such a server of
their own, the session's shared one stays plain.

Library use::

    db = PrivateMariaDB(pathlib.Path("/tmp/x"))
    db.start()            # initialises the data dir on first start
    db.dsn                # mysql://root@localhost/test?unix_socket=/tmp/x/mysqld.sock
    db.kill(); db.start() # crash and recover on the same data dir
    db.stop()

Command line::

    python -m mysqlq_harness.mariadb start DIR   # prints the DSN
    python -m mysqlq_harness.mariadb dsn DIR [--tcp]
    python -m mysqlq_harness.mariadb status DIR  # exit 0 running, 3 stopped
    python -m mysqlq_harness.mariadb stop DIR

No Python database driver is needed: readiness is checked by reading the
server's protocol greeting from the socket.
"""

from __future__ import annotations

import argparse
import contextlib
import fcntl
import hashlib
import os
import pathlib
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
import urllib.parse
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from types import TracebackType
from typing import Self

from mysqlq_harness.net import free_port

__all__ = ["MariaDBError", "PrivateMariaDB", "ServerTls", "server_greets"]

#: Unix socket paths are limited to 107 bytes (sun_path is 108 with the NUL).
_MAX_SOCKET_PATH = 100
_LOG_TAIL_LINES = 25
_DATABASE = "test"
_PROTOCOL_VERSION = 10  # first byte of the server's greeting packet

# Run once, on the first start of a fresh data dir.  mariadb-install-db with
# --auth-root-authentication-method=normal already creates root@127.0.0.1 on
# 10.4+, but CREATE USER IF NOT EXISTS + GRANT makes that explicit.
_FIRST_START_SQL = f"""\
CREATE DATABASE IF NOT EXISTS `{_DATABASE}`;
CREATE USER IF NOT EXISTS 'root'@'127.0.0.1';
GRANT ALL PRIVILEGES ON *.* TO 'root'@'127.0.0.1' WITH GRANT OPTION;
"""


class MariaDBError(RuntimeError):
    """The private server could not be initialised, started or stopped.

    ``summary`` is one line; ``log_tail`` (possibly empty) is the end of the
    server's error log or of the tool's output.  ``str()`` gives both.
    """

    def __init__(self, summary: str, log_tail: str = "") -> None:
        self.summary = summary
        self.log_tail = log_tail
        text = summary
        if log_tail:
            text += "\n--- error log tail ---\n" + log_tail
        super().__init__(text)


def _find_binary(name: str, *extra_dirs: str) -> str:
    found = shutil.which(name)
    if found:
        return found
    for directory in extra_dirs:
        candidate = os.path.join(directory, name)
        if os.access(candidate, os.X_OK):
            return candidate
    raise MariaDBError(
        f"{name} not found on PATH (install mariadb-server, e.g. `make deps`)"
    )


def _mariadbd() -> str:
    return _find_binary("mariadbd", "/usr/sbin", "/usr/local/sbin", "/usr/libexec")


def _install_db() -> str:
    return _find_binary("mariadb-install-db", "/usr/bin", "/usr/local/bin")


def server_greets(
    address: str | os.PathLike[str] | tuple[str, int], timeout: float = 2.0
) -> bool:
    """True if a MySQL/MariaDB server at ``address`` sends its protocol greeting.

    ``address`` is a unix socket path or a ``(host, port)`` pair.  Only the
    initial handshake packet (protocol version 10) is read; no login happens.
    """
    if isinstance(address, tuple):
        family = socket.AF_INET6 if ":" in address[0] else socket.AF_INET
        target: str | tuple[str, int] = address
    else:
        family = socket.AF_UNIX
        target = os.fspath(address)
    try:
        with socket.socket(family, socket.SOCK_STREAM) as s:
            s.settimeout(timeout)
            s.connect(target)
            header = _recv_exactly(s, 4)
            length = int.from_bytes(header[:3], "little")
            if length < 1:
                return False
            first = _recv_exactly(s, 1)
            return first[0] == _PROTOCOL_VERSION
    except OSError:
        return False


def _recv_exactly(s: socket.socket, n: int) -> bytes:
    data = b""
    while len(data) < n:
        chunk = s.recv(n - len(data))
        if not chunk:
            raise ConnectionError("connection closed during handshake")
        data += chunk
    return data


def _tail(path: pathlib.Path, offset: int = 0, lines: int = _LOG_TAIL_LINES) -> str:
    try:
        with path.open("rb") as f:
            f.seek(offset)
            data = f.read()
    except OSError:
        return ""
    text = data.decode("utf-8", "replace").rstrip()
    return "\n".join(text.splitlines()[-lines:])


@dataclass(frozen=True)
class ServerTls:
    """The PEM files a private server offers TLS with: the CA that signed client certificates it
    accepts, its own certificate and that certificate's key."""

    ca: pathlib.Path
    cert: pathlib.Path
    key: pathlib.Path


class PrivateMariaDB:
    """A private mariadbd; data dir, socket, pid file and error log live in ``basedir``.

    ``die_with_parent=True`` makes the kernel SIGKILL the server when the
    process that started it exits (use it in test sessions so a killed pytest
    leaves no server behind; do not use it for the CLI ``start``).  This needs
    ``setpriv`` (util-linux) and is silently skipped without it.

    ``bind_address`` is where it listens for TCP (127.0.0.1 by default); ``netns`` runs it in that
    network namespace (``ip netns exec``), e.g. a test host of mysqlq_harness.netns.  On another
    address than loopback, ``root`` may log in over TCP from anywhere that reaches it, without a
    password: bind it only to addresses of private test networks.
    """

    def __init__(
        self,
        basedir: pathlib.Path,
        *,
        die_with_parent: bool = False,
        bind_address: str = "127.0.0.1",
        netns: str | None = None,
        tls: ServerTls | None = None,
        require_secure_transport: bool = False,
        options: Sequence[str] = (),
    ) -> None:
        self.basedir = pathlib.Path(basedir).resolve()
        self.bind_address = bind_address
        self.netns = netns
        self.tls = tls
        self.require_secure_transport = require_secure_transport
        self.options = tuple(options)
        self.datadir = self.basedir / "data"
        self.pid_file = self.basedir / "mariadbd.pid"
        self.error_log = self.basedir / "error.log"
        self.die_with_parent = die_with_parent
        self._port_file = self.basedir / "port"
        self._first_start_file = self.basedir / "first-start.sql"
        self._lock_file = self.basedir / ".lock"
        self._proc: subprocess.Popen[bytes] | None = None
        self.socket = self._socket_path()

    def __repr__(self) -> str:
        return f"PrivateMariaDB({str(self.basedir)!r}, pid={self.pid})"

    def __enter__(self) -> Self:
        self.start()
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.stop()

    # -- paths and addresses -------------------------------------------------

    def _socket_path(self) -> pathlib.Path:
        local = self.basedir / "mysqld.sock"
        if len(os.fsencode(local)) <= _MAX_SOCKET_PATH:
            return local
        digest = hashlib.sha256(os.fsencode(self.basedir)).hexdigest()[:16]
        short_dir = f"pmariadb-{os.getuid()}-{digest}"
        return pathlib.Path(tempfile.gettempdir()) / short_dir / "mysqld.sock"

    @property
    def port(self) -> int:
        """TCP port on 127.0.0.1, chosen at the first start and reused afterwards."""
        try:
            return int(self._port_file.read_text().strip())
        except (OSError, ValueError):
            raise MariaDBError(
                f"no port chosen yet for {self.basedir} (never started)"
            ) from None

    @property
    def dsn(self) -> str:
        """DSN for root over the unix socket, database ``test``."""
        sock = urllib.parse.quote(str(self.socket), safe="/")
        return f"mysql://root@localhost/{_DATABASE}?unix_socket={sock}"

    @property
    def tcp_dsn(self) -> str:
        """DSN for root over TCP at the bind address (127.0.0.1 by default), database ``test``."""
        host = f"[{self.bind_address}]" if ":" in self.bind_address else self.bind_address
        return f"mysql://root@{host}:{self.port}/{_DATABASE}"

    # -- process state -------------------------------------------------------

    @property
    def pid(self) -> int | None:
        """Pid of the server for this data dir, or None when it is not running."""
        if self._proc is not None:
            if self._proc.poll() is None:
                return self._proc.pid
            self._proc = None
        try:
            pid = int(self.pid_file.read_text().strip())
        except (OSError, ValueError):
            return None
        return pid if self._is_our_server(pid) else None

    @property
    def running(self) -> bool:
        return self.pid is not None

    def _is_our_server(self, pid: int) -> bool:
        """True if ``pid`` is a live (non-zombie) mariadbd serving our data dir."""
        try:
            cmdline = pathlib.Path(f"/proc/{pid}/cmdline").read_bytes()
            stat = pathlib.Path(f"/proc/{pid}/stat").read_text()
        except OSError:
            return False
        state = stat.rsplit(")", 1)[-1].split()[0]
        if state in ("Z", "X"):
            return False
        return self._argument_marker() in cmdline.split(b"\0")

    def _argument_marker(self) -> bytes:
        """The command-line argument that only a server of this data dir has."""
        return os.fsencode(f"--datadir={self.datadir}")

    def _wait_gone(self, pid: int, timeout: float) -> bool:
        if self._proc is not None and self._proc.pid == pid:
            try:
                self._proc.wait(timeout)
            except subprocess.TimeoutExpired:
                return False
            self._proc = None
            return True
        deadline = time.monotonic() + timeout
        while self._is_our_server(pid):
            if time.monotonic() >= deadline:
                return False
            time.sleep(0.05)
        return True

    @contextlib.contextmanager
    def _locked(self) -> Iterator[None]:
        self.basedir.mkdir(parents=True, exist_ok=True)
        with self._lock_file.open("a") as f:
            fcntl.flock(f, fcntl.LOCK_EX)
            try:
                yield
            finally:
                fcntl.flock(f, fcntl.LOCK_UN)

    # -- lifecycle -----------------------------------------------------------

    def start(self, timeout: float = 60) -> None:
        """Start the server (initialising the data dir if needed); wait until it is up.

        If it is already running, only waits for it to accept connections.
        """
        with self._locked():
            deadline = time.monotonic() + timeout
            if self.running:
                self._wait_ready(deadline, None, 0)
                return
            if not (self.datadir / "mysql").is_dir():
                self._install()
            if not self._port_file.exists():
                self._port_file.write_text(f"{free_port()}\n")
            if len(os.fsencode(self.socket)) > _MAX_SOCKET_PATH:
                raise MariaDBError(
                    f"socket path too long for a unix socket: {self.socket}"
                )
            self.socket.parent.mkdir(mode=0o700, parents=True, exist_ok=True)
            with contextlib.suppress(FileNotFoundError):
                self.socket.unlink()  # stale after a kill; nobody is serving it
            with contextlib.suppress(FileNotFoundError):
                self.pid_file.unlink()
            log_offset = self.error_log.stat().st_size if self.error_log.exists() else 0
            args = self._server_args()
            # setpriv (util-linux) execs mariadbd, so the pid stays the same.
            setpriv = shutil.which("setpriv")
            if self.die_with_parent and setpriv:
                args = [setpriv, "--pdeathsig", "KILL", "--", *args]
            if self.netns:
                args = ["ip", "netns", "exec", self.netns, *args]  # execs: the pid stays mariadbd's
            with self.error_log.open("ab") as log:
                proc = subprocess.Popen(
                    args,
                    stdin=subprocess.DEVNULL,
                    stdout=log,
                    stderr=log,
                    cwd=self.basedir,
                    start_new_session=True,
                )
            self._proc = proc
            self._wait_ready(deadline, proc, log_offset)
            with contextlib.suppress(FileNotFoundError):
                self._first_start_file.unlink()

    def _install(self) -> None:
        """Create a fresh data dir with mariadb-install-db (staged, then renamed)."""
        staging = self.basedir / "data.new"
        shutil.rmtree(staging, ignore_errors=True)
        if self.datadir.exists():
            shutil.rmtree(self.datadir)
        (self.basedir / "tmp").mkdir(exist_ok=True)
        args = [
            _install_db(),
            "--no-defaults",
            "--auth-root-authentication-method=normal",
            "--skip-test-db",
            "--skip-name-resolve",
            f"--datadir={staging}",
            f"--tmpdir={self.basedir / 'tmp'}",
        ]
        if os.geteuid() == 0:
            args.append("--user=root")
        try:
            result = subprocess.run(
                args,
                stdin=subprocess.DEVNULL,
                stdout=subprocess.PIPE,
                stderr=subprocess.STDOUT,
                cwd=self.basedir,
                timeout=300,
                check=False,
            )
        except subprocess.TimeoutExpired as e:
            raise MariaDBError("mariadb-install-db did not finish within 300 s") from e
        if result.returncode != 0:
            out = result.stdout.decode("utf-8", "replace").rstrip()
            raise MariaDBError(
                f"mariadb-install-db failed (exit {result.returncode}) for {staging}",
                "\n".join(out.splitlines()[-_LOG_TAIL_LINES:]),
            )
        staging.rename(self.datadir)
        first = _FIRST_START_SQL
        if self.bind_address != "127.0.0.1":
            first += ("CREATE USER IF NOT EXISTS 'root'@'%';\n"
                      "GRANT ALL PRIVILEGES ON *.* TO 'root'@'%' WITH GRANT OPTION;\n")
        self._first_start_file.write_text(first)

    def _server_args(self) -> list[str]:
        args = [
            _mariadbd(),
            "--no-defaults",  # must come first: ignore /etc/mysql and ~/.my.cnf
            *self._layout_args(),
            # Without option files the server default would be latin1; match
            # what Debian's and MySQL 8's stock configs give.
            "--character-set-server=utf8mb4",
            "--collation-server=utf8mb4_general_ci",
            *self._tls_args(),
        ]
        if os.geteuid() == 0:
            args.append("--user=root")
        if self._first_start_file.exists():
            args.append(f"--init-file={self._first_start_file}")
        return args

    def _layout_args(self) -> list[str]:
        """Where the server keeps its files and listens, and its limits (any server of the harness)."""
        return [
            f"--datadir={self.datadir}",
            f"--socket={self.socket}",
            f"--pid-file={self.pid_file}",
            f"--log-error={self.error_log}",
            f"--tmpdir={self.basedir / 'tmp'}",
            f"--port={self.port}",
            f"--bind-address={self.bind_address}",
            "--skip-name-resolve",
            "--max-connections=500",
            "--innodb-buffer-pool-size=256M",
            "--skip-log-bin",
        ]

    def _tls_args(self) -> list[str]:
        """TLS and further options given to this server (the same names on MariaDB and MySQL)."""
        args = list(self.options)
        if self.tls is not None:
            args += [f"--ssl-ca={self.tls.ca}", f"--ssl-cert={self.tls.cert}", f"--ssl-key={self.tls.key}"]
        if self.require_secure_transport:
            args.append("--require-secure-transport=ON")
        return args

    def _wait_ready(
        self, deadline: float, proc: subprocess.Popen[bytes] | None, log_offset: int
    ) -> None:
        while True:
            if proc is not None and proc.poll() is not None:
                self._proc = None
                raise MariaDBError(
                    f"mariadbd exited with code {proc.returncode} during startup"
                    f" (data dir {self.datadir}, log {self.error_log})",
                    _tail(self.error_log, log_offset),
                )
            if proc is None and not self.running:
                raise MariaDBError(
                    f"mariadbd for {self.datadir} went away while starting"
                )
            if server_greets(self.socket, timeout=1.0):
                return
            if time.monotonic() >= deadline:
                break
            time.sleep(0.05)
        if proc is not None:
            proc.kill()
            proc.wait()
            self._proc = None
        raise MariaDBError(
            f"mariadbd did not accept connections on {self.socket} in time"
            f" (data dir {self.datadir}, log {self.error_log})",
            _tail(self.error_log, log_offset),
        )

    def stop(self, timeout: float = 30) -> None:
        """Shut the server down cleanly (SIGTERM) and wait for it to exit.

        If it does not exit within ``timeout`` it is SIGKILLed and MariaDBError
        is raised.  Stopping a server that is not running does nothing.
        """
        if not self.basedir.is_dir():
            return
        with self._locked():
            pid = self.pid
            if pid is None:
                self._cleanup_socket_dir()
                return
            self._signal(pid, signal.SIGTERM)
            if not self._wait_gone(pid, timeout):
                self._signal(pid, signal.SIGKILL)
                self._wait_gone(pid, 30)
                raise MariaDBError(
                    f"mariadbd (pid {pid}) not down after {timeout:g} s; killed it",
                    _tail(self.error_log),
                )
            self._cleanup_socket_dir()

    def kill(self) -> None:
        """SIGKILL the server (a simulated crash) and wait until the process is gone."""
        pid = self.pid
        if pid is None:
            return
        self._signal(pid, signal.SIGKILL)
        if not self._wait_gone(pid, 30):
            raise MariaDBError(f"mariadbd (pid {pid}) still alive 30 s after SIGKILL")

    @staticmethod
    def _signal(pid: int, sig: signal.Signals) -> None:
        with contextlib.suppress(ProcessLookupError):
            os.kill(pid, sig)

    def _cleanup_socket_dir(self) -> None:
        if self.socket.parent != self.basedir:
            with contextlib.suppress(OSError):
                self.socket.unlink()
            with contextlib.suppress(OSError):
                self.socket.parent.rmdir()


# -- command line ---------------------------------------------------------------


def _parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(
        prog="python -m mysqlq_harness.mariadb",
        description="Run a throwaway private mariadbd whose files all live under DIR.",
    )
    sub = p.add_subparsers(dest="command", required=True, metavar="COMMAND")
    start = sub.add_parser(
        "start", help="start (or reuse) the server and print its DSN"
    )
    start.add_argument(
        "--timeout", type=float, default=60.0, help="seconds to wait (default 60)"
    )
    start.add_argument("--tcp", action="store_true", help="print the TCP DSN instead")
    start.add_argument("--bind-address", default="127.0.0.1",
                       help="TCP address to listen on (default 127.0.0.1; elsewhere root needs no password)")
    start.add_argument("--netns", default=None, help="run the server in this network namespace (ip netns)")
    stop = sub.add_parser("stop", help="shut the server down")
    stop.add_argument(
        "--timeout", type=float, default=30.0, help="seconds to wait (default 30)"
    )
    dsn = sub.add_parser("dsn", help="print the DSN")
    dsn.add_argument("--tcp", action="store_true", help="print the TCP DSN instead")
    sub.add_parser("status", help="print whether it runs; exit 0 if running, 3 if not")
    for sp in (start, stop, dsn, sub.choices["status"]):
        sp.add_argument("dir", type=pathlib.Path, metavar="DIR", help="base directory")
    return p


def main(argv: Sequence[str] | None = None) -> int:
    args = _parser().parse_args(argv)
    db = PrivateMariaDB(args.dir, bind_address=getattr(args, "bind_address", "127.0.0.1"),
                        netns=getattr(args, "netns", None))
    try:
        if args.command == "start":
            db.start(timeout=args.timeout)
            print(db.tcp_dsn if args.tcp else db.dsn)
        elif args.command == "stop":
            db.stop(timeout=args.timeout)
        elif args.command == "dsn":
            if not (db.datadir / "mysql").is_dir():
                raise MariaDBError(f"no data dir under {db.basedir}; run `start` first")
            print(db.tcp_dsn if args.tcp else db.dsn)
        elif args.command == "status":
            pid = db.pid
            if pid is None:
                print("stopped")
                return 3
            print(f"running pid={pid} port={db.port} dsn={db.dsn}")
    except MariaDBError as e:
        print(f"mysqlq_harness.mariadb: error: {e.summary}", file=sys.stderr)
        return 1
    except OSError as e:
        name = os.strerror(e.errno) if e.errno else str(e)
        where = f": {e.filename}" if e.filename else ""
        print(f"mysqlq_harness.mariadb: error: {name}{where}", file=sys.stderr)
        return 1
    except KeyboardInterrupt:
        return 130
    return 0


if __name__ == "__main__":
    sys.exit(main())
