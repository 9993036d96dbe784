"""Run a throwaway private MySQL ``mysqld`` for tests and the benchmark, as :mod:`mysqlq_harness.mariadb`
runs MariaDB: the same class, the same layout under one base directory, the same DSNs.

No MySQL package exists for Debian 12. Debian's development suite (sid) ships MySQL as
``mysql-server-core``: :func:`install` downloads it and every library it needs with the machine's own
apt (its own mirror, suite sid, into a cache of its own), unpacks them into a private root, and
``mysqld`` runs through that root's own dynamic loader. Nothing is installed system-wide. The root
is ``$MYSQLQ_MYSQL_ROOT`` (default ``~/.cache/mysqlq-mysql/root``); about 50 MB.

Command line::

    python -m mysqlq_harness.mysql install          # once (idempotent); prints the server's version
    python -m mysqlq_harness.mysql start DIR        # prints the DSN
    python -m mysqlq_harness.mysql stop DIR
"""

from __future__ import annotations

import os
import pathlib
import subprocess
import sys
from collections.abc import Sequence

from mysqlq_harness.mariadb import _DATABASE, MariaDBError, PrivateMariaDB

__all__ = ["PrivateMySQL", "install", "root"]

# Packages of mysql-server-core's dependency closure that mysqld does not need (perl is huge).
_SKIPPED = ("perl", "perl-base", "perl-modules-", "libperl", "libdb5.3t64", "libgdbm")
_FIRST_START_SQL = f"""\
CREATE DATABASE IF NOT EXISTS `{_DATABASE}`;
CREATE USER IF NOT EXISTS 'root'@'127.0.0.1';
GRANT ALL PRIVILEGES ON *.* TO 'root'@'127.0.0.1' WITH GRANT OPTION;
"""


def root() -> pathlib.Path:
    return pathlib.Path(os.environ.get("MYSQLQ_MYSQL_ROOT", pathlib.Path.home() / ".cache/mysqlq-mysql/root"))


def _mysqld(private: pathlib.Path) -> list[str]:
    """The command that runs the private root's mysqld with its own loader and libraries."""
    return [str(private / "usr/lib64/ld-linux-x86-64.so.2"), "--library-path",
            str(private / "usr/lib/x86_64-linux-gnu"), str(private / "usr/sbin/mysqld")]


def _mirror() -> str:
    """The machine's Debian mirror: the first URIs line of its deb822 sources, else of sources.list."""
    for path in sorted(pathlib.Path("/etc/apt/sources.list.d").glob("*.sources")):
        for line in path.read_text().splitlines():
            if line.startswith("URIs:"):
                return line.split()[1]
    for line in pathlib.Path("/etc/apt/sources.list").read_text().splitlines():
        if line.startswith("deb "):
            return line.split()[1]
    raise MariaDBError("no Debian mirror found in /etc/apt/sources.list(.d)")


def install() -> pathlib.Path:
    """Unpack mysql-server-core (suite sid) and its libraries into the private root, once."""
    private = root()
    if (private / "usr/sbin/mysqld").exists():
        return private
    cache = private.parent / "apt"
    for sub in ("lists/partial", "cache/archives/partial", "debs"):
        (cache / sub).mkdir(parents=True, exist_ok=True)
    (cache / "sid.sources").write_text(
        f"Types: deb\nURIs: {_mirror()}\nSuites: sid\nComponents: main\n"
        "Signed-By: /usr/share/keyrings/debian-archive-keyring.gpg\n")
    options = ["-o", f"Dir::Etc::sourcelist={cache / 'sid.sources'}", "-o", "Dir::Etc::sourceparts=-",
               "-o", f"Dir::State::Lists={cache / 'lists'}", "-o", f"Dir::Cache={cache / 'cache'}"]
    subprocess.run(["apt-get", *options, "update", "-qq"], check=True, stdout=subprocess.DEVNULL)
    listed = subprocess.run(["apt-cache", *options, "depends", "--recurse", "--no-recommends", "--no-suggests",
                             "--no-conflicts", "--no-breaks", "--no-replaces", "--no-enhances",
                             "mysql-server-core"], check=True, capture_output=True, text=True).stdout
    packages = sorted({line for line in listed.splitlines() if line and line[0] not in " <"}
                      - {""})
    packages = [name for name in packages if not name.startswith(_SKIPPED)]
    subprocess.run(["apt-get", *options, "download", *packages], cwd=cache / "debs", check=True,
                   stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    private.mkdir(parents=True, exist_ok=True)
    for deb in sorted((cache / "debs").glob("*.deb")):
        subprocess.run(["dpkg-deb", "-x", str(deb), str(private)], check=True)
    return private


class PrivateMySQL(PrivateMariaDB):
    """A private MySQL ``mysqld`` (see the module docstring); used exactly like PrivateMariaDB."""

    def __repr__(self) -> str:
        return f"PrivateMySQL({str(self.basedir)!r}, pid={self.pid})"

    def _argument_marker(self) -> bytes:
        return os.fsencode(f"--datadir={self.datadir}")

    def _common(self) -> list[str]:
        private = root()
        if not (private / "usr/sbin/mysqld").exists():
            raise MariaDBError(f"no MySQL in {private}: run `python -m mysqlq_harness.mysql install` "
                               "(make test-mysql does)")
        args = [*_mysqld(private), "--no-defaults", f"--basedir={private / 'usr'}",
                f"--lc-messages-dir={private / 'usr/share/mysql'}", f"--plugin-dir={private / 'usr/lib/mysql/plugin'}",
                "--secure-file-priv=", "--mysqlx=OFF"]
        if os.geteuid() == 0:
            args.append("--user=root")
        return args

    def _install(self) -> None:
        """A fresh data dir (root without a password), staged, then renamed."""
        staging = self.basedir / "data.new"
        subprocess.run(["rm", "-rf", str(staging)], check=True)
        if self.datadir.exists():
            subprocess.run(["rm", "-rf", str(self.datadir)], check=True)
        (self.basedir / "tmp").mkdir(exist_ok=True)
        result = subprocess.run([*self._common(), "--initialize-insecure", f"--datadir={staging}"],
                                stdin=subprocess.DEVNULL, capture_output=True, text=True, timeout=300, check=False)
        if result.returncode != 0:
            raise MariaDBError(f"mysqld --initialize-insecure failed (exit {result.returncode}) for {staging}",
                               (result.stdout + result.stderr)[-3000:])
        staging.rename(self.datadir)
        self._first_start_file.write_text(_FIRST_START_SQL)

    def _server_args(self) -> list[str]:
        args = [*self._common(), *self._layout_args(), *self._tls_args()]
        if self._first_start_file.exists():
            args.append(f"--init-file={self._first_start_file}")
        return args


def main(argv: Sequence[str] | None = None) -> int:
    args = list(sys.argv[1:] if argv is None else argv)
    if args[:1] == ["install"]:
        private = install()
        subprocess.run([*_mysqld(private), "--version"], check=True)
        return 0
    if len(args) == 2 and args[0] in ("start", "stop"):
        server = PrivateMySQL(pathlib.Path(args[1]))
        if args[0] == "start":
            server.start()
            print(server.dsn)
        else:
            server.stop()
        return 0
    print(__doc__, file=sys.stderr)
    return 2


if __name__ == "__main__":
    sys.exit(main())
