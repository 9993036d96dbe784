"""Settings: the DSN and every knob of producers and workers, in one typed object."""

from __future__ import annotations

import dataclasses
import os
import socket
from dataclasses import dataclass, field
from urllib.parse import parse_qs, unquote, urlsplit

from mysqlq.core.addresses import parse_bind
from mysqlq.core.errors import ConfigError, MysqlqError

DEFAULT_DSN = "mysql://root@127.0.0.1:3306/test"
MAX_NAME_LENGTH = 100
MAX_CONCURRENCY = 256


@dataclass(frozen=True)
class Dsn:
    """Where the database is: parsed from ``mysql://user:password@host:port/db?unix_socket=...``.

    Several hosts (``mysql://user:pw@h1:3306,h2:3306,h3/db``, the nodes of a cluster) are tried in
    order: every connection goes to the first one that answers, and moves on when it fails.
    """

    host: str = "127.0.0.1"
    port: int = 3306
    user: str = "root"
    password: str = ""
    database: str = "test"
    unix_socket: str | None = None
    failover: tuple[tuple[str, int], ...] = ()  # the hosts after the first, in order

    @classmethod
    def parse(cls, url: str) -> Dsn:
        """Parse a DSN; raise ConfigError naming what is wrong (never echoing the password)."""
        parts = urlsplit(url.strip())
        if parts.scheme not in ("mysql", "mariadb"):
            raise ConfigError("DSN must start with mysql:// or mariadb:// (e.g. mysql://user:pw@host:3306/db)")
        userinfo, _, hostlist = parts.netloc.rpartition("@")
        user, _, password = userinfo.partition(":")
        addresses = [_address(item) for item in hostlist.split(",")] if hostlist else [("localhost", 3306)]
        database = unquote(parts.path.lstrip("/"))
        if not database or "/" in database:
            raise ConfigError("DSN must name a database, e.g. mysql://user@host/mydb")
        query = parse_qs(parts.query)
        unknown = set(query) - {"unix_socket"}
        if unknown:
            raise ConfigError(f"DSN has unknown parameter(s): {', '.join(sorted(unknown))} (known: unix_socket)")
        sockets = query.get("unix_socket")
        if sockets and len(addresses) > 1:
            raise ConfigError("DSN names several hosts and a unix_socket: give one or the other")
        (host, port), *rest = addresses
        return cls(
            host=host,
            port=port,
            user=unquote(user or "root"),
            password=unquote(password),
            database=database,
            unix_socket=sockets[-1] if sockets else None,
            failover=tuple(rest),
        )

    @property
    def addresses(self) -> tuple[tuple[str, int], ...]:
        """Every host, in the order connections try them."""
        return ((self.host, self.port), *self.failover)

    def redacted(self) -> str:
        """The DSN as it may appear in logs and errors: the password is never shown."""
        auth = self.user + (":***" if self.password else "")
        where = ",".join(_join(host, port) for host, port in self.addresses) if not self.unix_socket else self.host
        tail = f"?unix_socket={self.unix_socket}" if self.unix_socket else ""
        return f"mysql://{auth}@{where}/{self.database}{tail}"

    def __repr__(self) -> str:
        return f"Dsn({self.redacted()!r})"

    @property
    def identity(self) -> str:
        """A stable string naming this database, used to scope has-task hints.

        The hosts are sorted: clients listing a cluster's nodes in different orders (each worker its
        own node first) reach the same database and must hear each other's hints.
        """
        where = self.unix_socket or ",".join(sorted(_join(host, port) for host, port in self.addresses))
        return f"{where}/{self.database}"


def _address(item: str) -> tuple[str, int]:
    """``host``, ``host:port``, ``[v6]`` or ``[v6]:port`` from a DSN's host list."""
    item = item.strip()
    if item.startswith("["):
        host, _, rest = item[1:].partition("]")
        port_text = rest[1:] if rest.startswith(":") else rest
    else:
        host, _, port_text = item.partition(":")
    if not host:
        raise ConfigError("DSN has an empty host in its host list")
    if port_text and not (port_text.isdigit() and 0 < int(port_text) < 65536):
        raise ConfigError("DSN has an invalid port")
    return host, int(port_text) if port_text else 3306


def _join(host: str, port: int) -> str:
    return f"[{host}]:{port}" if ":" in host else f"{host}:{port}"


def default_worker_name() -> str:
    """``host:pid``, or the systemd instance name when run from a template unit."""
    return f"{socket.gethostname()}:{os.getpid()}"


@dataclass(frozen=True)
class Settings:
    """Everything a worker or producer needs; the CLI builds one from options and MYSQLQ_* variables."""

    dsn: Dsn = field(default_factory=lambda: Dsn.parse(os.environ.get("MYSQLQ_DSN", DEFAULT_DSN)))
    queues: tuple[str, ...] = ("default",)
    worker_name: str = field(default_factory=default_worker_name)
    batch_size: int = 100
    concurrency: int = 5  # jobs in flight per worker process (see the README for why 5)
    poll_interval: float = 2.0
    flush_interval: float = 0.5
    heartbeat_interval: float = 10.0
    lease: float = 60.0
    reap_interval: float = 2.0
    processlist_check: bool = True
    time_limit: float = 300.0
    max_attempts: int = 5
    retry_base: float = 2.0
    retry_cap: float = 3600.0
    max_payload_bytes: int = 1024 * 1024
    result_max_bytes: int = 64 * 1024  # the largest handler return value stored, as JSON
    hint_dir: str | None = None
    hint: bool = True
    hint_bind: str = "auto"  # where a worker takes network hints: auto, off, or ADDR[:PORT]
    isolation: str | None = None
    claim_strategy: str = "update"
    retain_done: float | None = 7 * 86400.0  # seconds done/cancelled jobs are kept; 0 or None: forever
    retain_dead: float | None = 30 * 86400.0  # seconds dead jobs are kept; 0 or None: forever
    retention_interval: float = 60.0  # seconds between the workers' retention turns
    retention_batch: int = 1000  # rows per retention DELETE
    schedule: str | None = None  # a TOML file of recurring jobs (mysqlq.leader.schedule_file), run by the reaper leader
    burst: bool = False
    metrics_listen: str | None = None  # [host:]port where the worker serves its Prometheus metrics; None: off

    def replace(self, **changes: object) -> Settings:
        """A copy with some settings changed (validated again)."""
        return dataclasses.replace(self, **changes)  # type: ignore[arg-type]

    def __post_init__(self) -> None:
        if not self.queues:
            raise ConfigError("at least one queue is needed")
        for queue in self.queues:
            check_name("queue", queue)
        positive = {
            "batch_size": self.batch_size,
            "poll_interval": self.poll_interval,
            "heartbeat_interval": self.heartbeat_interval,
            "lease": self.lease,
            "time_limit": self.time_limit,
            "max_attempts": self.max_attempts,
            "max_payload_bytes": self.max_payload_bytes,
            "result_max_bytes": self.result_max_bytes,
        }
        for name, value in positive.items():
            if value <= 0:
                raise ConfigError(f"{name.replace('_', '-')} must be positive, got {value}")
        for name, retain in (("retain-done", self.retain_done), ("retain-dead", self.retain_dead)):
            if retain is not None and not retain >= 0:
                raise ConfigError(f"{name} must be 0 (keep forever) or a positive number of seconds, got {retain}")
        if self.retention_interval <= 0 or not 1 <= self.retention_batch <= 100_000:
            raise ConfigError("retention interval must be positive and the retention batch from 1 to 100000")
        if not isinstance(self.concurrency, int) or not 1 <= self.concurrency <= MAX_CONCURRENCY:
            raise ConfigError(f"concurrency must be an integer from 1 to {MAX_CONCURRENCY}, got {self.concurrency!r}")
        if self.batch_size > 10_000:
            raise ConfigError("batch-size must be at most 10000")
        if self.lease <= 2 * self.heartbeat_interval:
            raise ConfigError("lease must be longer than twice the heartbeat interval")
        if self.isolation not in (None, "REPEATABLE READ", "READ COMMITTED"):
            raise ConfigError("isolation must be 'REPEATABLE READ' or 'READ COMMITTED'")
        if self.claim_strategy not in ("update", "skip-locked"):
            raise ConfigError("claim strategy must be 'update' or 'skip-locked'")
        parse_bind(self.hint_bind)


def check_name(kind: str, value: str, error: type[MysqlqError] = ConfigError) -> str:
    """Validate a queue or handler name: non-empty, printable, at most MAX_NAME_LENGTH characters."""
    if not isinstance(value, str) or not value.strip():
        raise error(f"{kind} name must not be empty")
    if len(value) > MAX_NAME_LENGTH:
        raise error(f"{kind} name is {len(value)} characters long; the limit is {MAX_NAME_LENGTH}")
    if not value.isprintable() or value != value.strip():
        raise error(f"{kind} name {value!r} has whitespace at its ends or unprintable characters")
    return value
