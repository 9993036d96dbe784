"""TLS modes: the MySQL clients' ``--ssl-mode`` values, what each asks of a connection, and how the
other ways of naming TLS (an option file's older flags, mysqlclient's ``ssl`` option) map onto them.
docs/security.md has the table; mysqlq.store.db turns a mode into mysqlclient's connect() arguments."""

from __future__ import annotations

from collections.abc import Mapping
from enum import StrEnum

from mysqlq.core.errors import ConfigError


class SslMode(StrEnum):
    """The MySQL clients' --ssl-mode values, weakest first."""

    DISABLED = "DISABLED"
    PREFERRED = "PREFERRED"
    REQUIRED = "REQUIRED"
    VERIFY_CA = "VERIFY_CA"
    VERIFY_IDENTITY = "VERIFY_IDENTITY"


DEFAULT = SslMode.PREFERRED  # as the MySQL clients: TLS whenever the server offers it
VERIFYING = (SslMode.VERIFY_CA, SslMode.VERIFY_IDENTITY)  # the modes that verify the server (with a CA file)
ENCRYPTING = (SslMode.REQUIRED, *VERIFYING)  # the modes that refuse a connection without a cipher


def parse_mode(value: str) -> SslMode:
    """A mode in any case; ConfigError naming the modes otherwise."""
    mode = value.upper() if isinstance(value, str) else value
    if mode not in tuple(SslMode):
        raise ConfigError(f"ssl_mode must be one of {', '.join(SslMode)} (any case), got {value!r}")
    return SslMode(mode)


def library_mode(mode: str, connector_c: bool) -> str:
    """The ``ssl_mode`` argument that carries ``mode`` out on mysqlclient, built on MariaDB Connector/C
    or not (mysqlq.store.db.tls_arguments says why PREFERRED and VERIFY_CA are its REQUIRED there)."""
    if connector_c and mode in (SslMode.PREFERRED, SslMode.VERIFY_CA):
        return str(SslMode.REQUIRED)
    return str(mode)


def mode_of_driver_options(ssl: object) -> tuple[Mapping[str, str], SslMode | None]:
    """mysqlclient's ``ssl`` option (True, or a dict of ``ca``, ``cert``, ``key``) → its TLS files and
    the mode it means there: True requires TLS; a ``ca`` verifies the chain (not the host name), which
    is VERIFY_CA; otherwise no mode (the default)."""
    if not isinstance(ssl, dict):
        return {}, SslMode.REQUIRED if ssl else None
    return ssl, SslMode.VERIFY_CA if ssl.get("ca") else None
