"""Settings: the DSN and every knob of producers and workers, in one typed object."""

from __future__ import annotations

import dataclasses
import os
import socket
from collections.abc import Collection, Mapping
from dataclasses import dataclass, field
from enum import StrEnum
from urllib.parse import parse_qs, unquote, urlsplit

from mysqlq.core import optionfile, secrets
from mysqlq.core.addresses import join_host_port, parse_bind, port_number, split_host_port
from mysqlq.core.encryption import Keyring
from mysqlq.core.errors import ConfigError, MysqlqError
from mysqlq.core.keyfile import keys_from_environment
from mysqlq.core.tls import DEFAULT as DEFAULT_SSL_MODE
from mysqlq.core.tls import VERIFYING, SslMode, parse_mode

DEFAULT_DSN = "mysql://root@127.0.0.1:3306/test"
MAX_NAME_LENGTH = 100
MAX_CONCURRENCY = 256


class Isolation(StrEnum):
    """The transaction isolation levels a worker's session may take (``--isolation``)."""

    REPEATABLE_READ = "REPEATABLE READ"
    READ_COMMITTED = "READ COMMITTED"


class ClaimStrategy(StrEnum):
    """How a worker claims a batch (``--claim``; the statements are mysqlq.store.claims.CLAIMS)."""

    UPDATE = "update"  # UPDATE…LIMIT, then SELECT by batch_id
    SKIP_LOCKED = "skip-locked"  # SELECT…FOR UPDATE SKIP LOCKED, then UPDATE by id


def either(values: type[StrEnum]) -> str:
    """``'a' or 'b'``: the values of an enum as an error message lists them."""
    return " or ".join(repr(str(value)) for value in values)


NO_DATABASE = "DSN must name a database, e.g. mysql://user@host/mydb"
DSN_PARAMETERS = ("read_default_file", "read_default_group", "ssl_ca", "ssl_cert", "ssl_key", "ssl_mode",
                  "unix_socket")
# TLS options of an option file that mysqlq does not apply: refused rather than silently left out.
_TLS_OPTIONS = ("ssl_mode", "ssl_ca", "ssl_cert", "ssl_key", "ssl_verify_server_cert", "ssl", "skip_ssl")


@dataclass(frozen=True)
class Dsn:
    """Where the database is and how to reach it: parsed from
    ``mysql://user:password@host:port/db?unix_socket=...&ssl_mode=...``.

    Several hosts (``mysql://user:pw@h1:3306,h2:3306,h3/db``, the nodes of a cluster) are tried in
    order: every connection goes to the first one that answers, and moves on when it fails.

    ``ssl_mode`` has the MySQL clients' names and meanings (see mysqlq.core.tls and docs/security.md);
    ``ssl_ca``, ``ssl_cert`` and ``ssl_key`` are file paths. ``read_default_file`` and
    ``read_default_group`` name the option file and group the other fields were completed from
    when the DSN was parsed (mysqlq.core.optionfile); they only say so in :meth:`redacted`.
    """

    host: str = "127.0.0.1"
    port: int = 3306
    user: str = "root"
    password: str = ""
    database: str = "test"
    unix_socket: str | None = None
    failover: tuple[tuple[str, int], ...] = ()  # the hosts after the first, in order
    ssl_mode: str = DEFAULT_SSL_MODE  # an SslMode once checked
    ssl_ca: str | None = None
    ssl_cert: str | None = None
    ssl_key: str | None = None
    read_default_file: str | None = None
    read_default_group: str | None = None

    def __post_init__(self) -> None:
        mode = parse_mode(self.ssl_mode)
        object.__setattr__(self, "ssl_mode", mode)
        files = {"ssl_ca": self.ssl_ca, "ssl_cert": self.ssl_cert, "ssl_key": self.ssl_key}
        given = [name for name, path in files.items() if path]
        if mode == SslMode.DISABLED and given:
            raise ConfigError(f"ssl_mode=DISABLED makes no use of {' and '.join(given)}: remove "
                              f"{'it' if len(given) == 1 else 'them'} or choose another ssl_mode")
        if mode in VERIFYING and not self.ssl_ca:
            raise ConfigError(f"ssl_mode={mode} needs ssl_ca, the file of the CA certificate(s) to verify the "
                              "server with (for a public CA, the system's bundle: /etc/ssl/certs/ca-certificates.crt)")
        if self.ssl_ca and mode not in VERIFYING:
            raise ConfigError(f"ssl_ca serves only to verify the server, which ssl_mode={mode} does not do: "
                              "choose ssl_mode=VERIFY_CA or VERIFY_IDENTITY")
        if bool(self.ssl_cert) != bool(self.ssl_key):
            raise ConfigError("ssl_cert and ssl_key go together: give both (the client certificate and its key) "
                              "or neither")
        for name in given:
            _check_readable(name, str(files[name]))

    @classmethod
    def parse(cls, url: str) -> Dsn:
        """Parse a DSN; raise ConfigError naming what is wrong (never echoing the password)."""
        parts = urlsplit(url.strip())
        if parts.scheme not in ("mysql", "mariadb"):
            raise ConfigError("DSN must start with mysql:// or mariadb:// (e.g. mysql://user:pw@host:3306/db)")
        userinfo, _, hostlist = parts.netloc.rpartition("@")
        user, colon, password = userinfo.partition(":")
        addresses = [_address(item) for item in hostlist.split(",")] if hostlist else None
        database = unquote(parts.path.lstrip("/"))
        if "/" in database:
            raise ConfigError(NO_DATABASE)
        query = parse_qs(parts.query, keep_blank_values=True)
        unknown = set(query) - set(DSN_PARAMETERS)
        if unknown:
            raise ConfigError(f"DSN has unknown parameter(s): {', '.join(sorted(unknown))} "
                              f"(known: {', '.join(DSN_PARAMETERS)})")
        params: dict[str, str] = {}
        for name, values in query.items():
            if not values[-1]:
                raise ConfigError(f"DSN parameter {name} is empty")
            params[name] = values[-1]
        if "unix_socket" in params and addresses and len(addresses) > 1:
            raise ConfigError("DSN names several hosts and a unix_socket: give one or the other")
        return cls.assemble(
            addresses=addresses,
            user=unquote(user) or None,
            password=unquote(password) if colon else None,
            database=database or None,
            unix_socket=params.get("unix_socket"),
            ssl_mode=params.get("ssl_mode"),
            ssl_ca=params.get("ssl_ca"),
            ssl_cert=params.get("ssl_cert"),
            ssl_key=params.get("ssl_key"),
            read_default_file=params.get("read_default_file"),
            read_default_group=params.get("read_default_group"),
        )

    @classmethod
    def assemble(cls, *, addresses: list[tuple[str, int]] | None = None, user: str | None = None,
                 password: str | None = None, database: str | None = None, unix_socket: str | None = None,
                 ssl_mode: str | None = None, ssl_ca: str | None = None, ssl_cert: str | None = None,
                 ssl_key: str | None = None, read_default_file: str | None = None,
                 read_default_group: str | None = None) -> Dsn:
        """A DSN from the parts given (None: not given), completed from the option file or group when
        one is named (what is given wins, as on the MySQL clients' command line), then from defaults.

        Without hosts given, the option file's ``host``, ``port`` and ``socket`` are used (its socket
        when its host is absent or ``localhost``, as the clients do)."""
        options: dict[str, str | None] = {}
        where = ""
        if read_default_file or read_default_group:
            options, where = optionfile.read_groups(read_default_file, read_default_group)
            for name in options:
                if name.startswith(("ssl", "tls", "skip_ssl")) and name not in _TLS_OPTIONS:
                    raise ConfigError(f"option file {where} sets {name.replace('_', '-')}, which mysqlq does "
                                      "not apply: use ssl-mode, ssl-ca, ssl-cert and ssl-key")
        if addresses is None:
            host = options.get("host") or "localhost"
            port = _port(options["port"], where) if options.get("port") else 3306
            addresses = [(host, port)]
            if unix_socket is None and host == "localhost":
                unix_socket = options.get("socket") or None
        if database is None:
            database = options.get("database")
            if not database:
                raise ConfigError(NO_DATABASE)
        if ssl_mode:
            # The mode given overrides the file's: the file's TLS files that it makes no use of are left out.
            mode = ssl_mode.upper()
            if mode not in VERIFYING:
                options.pop("ssl_ca", None)
            if mode == SslMode.DISABLED:
                options.pop("ssl_cert", None)
                options.pop("ssl_key", None)
        (host, port), *rest = addresses
        return cls(
            host=host,
            port=port,
            user=user or options.get("user") or "root",
            password=password if password is not None else options.get("password") or "",
            database=database,
            unix_socket=unix_socket,
            failover=tuple(rest),
            ssl_mode=ssl_mode or options.get("ssl_mode") or _mode_of_flags(options, where),
            ssl_ca=ssl_ca or options.get("ssl_ca"),
            ssl_cert=ssl_cert or options.get("ssl_cert"),
            ssl_key=ssl_key or options.get("ssl_key"),
            read_default_file=read_default_file,
            read_default_group=read_default_group,
        )

    @property
    def addresses(self) -> tuple[tuple[str, int], ...]:
        """Every host, in the order connections try them."""
        return ((self.host, self.port), *self.failover)

    def redacted(self) -> str:
        """The DSN as it may appear in logs and errors: where and how, but never the password."""
        auth = self.user + (":***" if self.password else "")
        where = self.host if self.unix_socket else ",".join(join_host_port(*address) for address in self.addresses)
        params = {"unix_socket": self.unix_socket,
                  "ssl_mode": self.ssl_mode if self.ssl_mode != DEFAULT_SSL_MODE else None,
                  "read_default_file": self.read_default_file, "read_default_group": self.read_default_group}
        tail = "&".join(f"{name}={value}" for name, value in params.items() if value)
        return f"mysql://{auth}@{where}/{self.database}" + (f"?{tail}" if tail else "")

    def __repr__(self) -> str:
        return f"Dsn({self.redacted()!r})"

    @property
    def identity(self) -> str:
        """A stable string naming this database, used to scope has-task hints.

        The hosts are sorted: clients listing a cluster's nodes in different orders (each worker its
        own node first) reach the same database and must hear each other's hints. How they connect
        (TLS, an option file) is not part of it.
        """
        where = self.unix_socket or ",".join(sorted(join_host_port(*address) for address in self.addresses))
        return f"{where}/{self.database}"


def _check_readable(name: str, path: str) -> None:
    """A clear error now rather than the TLS library's later: the file must exist and be readable."""
    try:
        os.close(os.open(path, os.O_RDONLY))
    except OSError as exc:
        raise ConfigError(f"{name} file {path} cannot be read: {exc.strerror or exc}") from None


def _port(text: str | None, where: str) -> int:
    port = port_number(text or "")
    if port is None:
        raise ConfigError(f"option file {where} has an invalid port")
    return port


def _mode_of_flags(options: dict[str, str | None], where: str) -> SslMode:
    """ssl_mode from an option file's older flags: ``ssl-verify-server-cert`` (MariaDB's clients) is
    VERIFY_IDENTITY; ``skip-ssl`` or ``ssl=0`` is DISABLED; otherwise the default."""
    def flag(name: str) -> bool:
        if name not in options:
            return False
        value = (options[name] or "1").upper()
        if value not in ("1", "0", "ON", "OFF", "TRUE", "FALSE"):
            raise ConfigError(f"option file {where}: {name.replace('_', '-')} must be 0 or 1")
        return value in ("1", "ON", "TRUE")

    if flag("ssl_verify_server_cert"):
        return SslMode.VERIFY_IDENTITY
    if flag("skip_ssl") or ("ssl" in options and not flag("ssl")):
        return SslMode.DISABLED
    return DEFAULT_SSL_MODE


def _address(item: str) -> tuple[str, int]:
    """``host``, ``host:port``, ``[v6]`` or ``[v6]:port`` from a DSN's host list."""
    parts = split_host_port(item.strip(), "first colon")
    if parts is None:
        raise ConfigError("DSN has an invalid port")
    host, port_text = parts
    if not host:
        raise ConfigError("DSN has an empty host in its host list")
    port = port_number(port_text) if port_text else 3306
    if port is None:
        raise ConfigError("DSN has an invalid port")
    return host, port


def default_worker_name() -> str:
    """``host:pid``, or the systemd instance name when run from a template unit."""
    return f"{socket.gethostname()}:{os.getpid()}"


# ---------------------------------------------------------------- where the DSN comes from


def _parse_dsn(text: str, source: secrets.Source) -> Dsn:
    try:
        return Dsn.parse(text)
    except ConfigError as exc:
        if source.path is None:
            raise
        raise ConfigError(f"{source.named}: {exc}") from None


def resolve_dsn(dsn: str | None = None, dsn_file: str | None = None, password_file: str | None = None, *,
                typed: Collection[str] = (), environ: Mapping[str, str] | None = None,
                default: str = DEFAULT_DSN) -> Dsn:
    """The DSN from ``--dsn``/MYSQLQ_DSN, ``--dsn-file``/MYSQLQ_DSN_FILE or the credential mysqlq.dsn
    (``default`` when none is given), with the password from ``--password-file``/MYSQLQ_PASSWORD_FILE
    or the credential mysqlq.password when one is given. ``typed`` names those of ``dsn``,
    ``dsn_file`` and ``password_file`` that were typed on the command line (labels use the option's
    name then, the variable's otherwise)."""
    found = secrets.choose("the DSN", [
        secrets.given(dsn, "dsn" in typed, "--dsn", "MYSQLQ_DSN"),
        secrets.given(dsn_file, "dsn_file" in typed, "--dsn-file", "MYSQLQ_DSN_FILE", file=True),
        secrets.credential(secrets.DSN_CREDENTIAL, environ),
    ], _parse_dsn)
    chosen, where = found if found else (Dsn.parse(default), secrets.Source("the default DSN"))
    password = secrets.choose("the database password", [
        secrets.given(password_file, "password_file" in typed, "--password-file", "MYSQLQ_PASSWORD_FILE",
                      file=True),
        secrets.credential(secrets.PASSWORD_CREDENTIAL, environ),
    ], lambda text, source: text)
    if password is None:
        return chosen
    secret, source = password
    if chosen.password and chosen.password != secret:
        raise ConfigError(f"the DSN from {where.named} has a password, and {source.named} gives another: "
                          "keep one of them")
    return dataclasses.replace(chosen, password=secret)


def dsn_from_environment(environ: Mapping[str, str] | None = None) -> Dsn:
    """The DSN as the ``mysqlq`` command finds it without options: MYSQLQ_DSN, MYSQLQ_DSN_FILE,
    MYSQLQ_PASSWORD_FILE and systemd's credentials (see :func:`resolve_dsn`)."""
    env = os.environ if environ is None else environ
    return resolve_dsn(env.get("MYSQLQ_DSN"), env.get("MYSQLQ_DSN_FILE"), env.get("MYSQLQ_PASSWORD_FILE"),
                       environ=env)  # an empty variable counts as unset, as for the command


@dataclass(frozen=True)
class Settings:
    """Everything a worker or producer needs; the CLI builds one from options and MYSQLQ_* variables."""

    dsn: Dsn = field(default_factory=lambda: dsn_from_environment())
    queues: tuple[str, ...] = ("default",)
    worker_name: str = field(default_factory=default_worker_name)
    batch_size: int = 500  # at most: claims are sized to what the slots start soon (mysqlq.worker.intake.claimsize)
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
    max_snoozes: int = 100  # a job snoozed more often than this ends dead (mysqlq.Snooze)
    max_payload_bytes: int = 1024 * 1024
    result_max_bytes: int = 64 * 1024  # the largest handler return value stored, as JSON
    hint_dir: str | None = None
    hint: bool = True
    hint_bind: str = "auto"  # where a worker takes network hints: auto, off, or ADDR[:PORT]
    isolation: str | None = None
    claim_strategy: str = ClaimStrategy.UPDATE
    retain_done: float | None = 7 * 86400.0  # seconds done/cancelled jobs are kept; 0 or None: forever
    retain_dead: float | None = 30 * 86400.0  # seconds dead jobs are kept; 0 or None: forever
    retention_interval: float = 60.0  # seconds between the workers' retention turns
    retention_batch: int = 1000  # rows per retention DELETE
    schedule: str | None = None  # a TOML file of recurring jobs (mysqlq.leader.schedule_file), run by the reaper leader
    burst: bool = False
    metrics_listen: str | None = None  # [host:]port where the worker serves its Prometheus metrics; None: off
    # The keys that encrypt payloads, results and errors at rest (mysqlq.core.encryption); None: none, nothing
    # is encrypted. By default from MYSQLQ_ENCRYPTION_KEYS_FILE or the credential mysqlq.keys, as the DSN.
    keys: Keyring | None = field(default_factory=lambda: keys_from_environment(), repr=False)

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
            "max_snoozes": self.max_snoozes,
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
        if self.isolation is not None and self.isolation not in tuple(Isolation):
            raise ConfigError(f"isolation must be {either(Isolation)}")
        if self.claim_strategy not in tuple(ClaimStrategy):
            raise ConfigError(f"claim strategy must be {either(ClaimStrategy)}")
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
