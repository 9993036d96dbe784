"""Where a worker takes network hints: ``--hint-bind`` parsed, and ``auto`` worked out from the DSN."""

from __future__ import annotations

import ipaddress
import socket

from mysqlq.core.addresses import Address, join_host_port, parse_bind
from mysqlq.core.config import Dsn
from mysqlq.core.errors import ConfigError


def route_address(dsn: Dsn) -> str | None:
    """This host's address on the route to the database (no packet is sent); None for a unix socket."""
    if dsn.unix_socket:
        return None
    try:
        family, _, _, _, target = socket.getaddrinfo(dsn.host, dsn.port, type=socket.SOCK_DGRAM)[0]
        with socket.socket(family, socket.SOCK_DGRAM) as probe:
            probe.connect(target)
            return str(probe.getsockname()[0])
    except (OSError, IndexError):
        return None


def resolve(spec: str, dsn: Dsn) -> Address | None:
    """The address to bind, or None for no network hints.

    ``auto`` is the address on the route to the database, port 0: producers reach the database, so
    they are most likely on that network. None when that route is loopback or a unix socket (then
    the database is on this host and so are the producers that reach it that way: the unix sockets
    serve them); give an address to take hints from other hosts anyway.
    """
    parsed = parse_bind(spec)
    if parsed == "off":
        return None
    if parsed == "auto":
        host = route_address(dsn)
        if host is None or ipaddress.ip_address(host).is_loopback:
            return None
        return host, 0
    assert isinstance(parsed, tuple)
    return parsed


def advertised(bound: Address, dsn: Dsn) -> str | None:
    """What producers send to: the bound address, or for a wildcard bind the route to the database."""
    host, port = bound
    if ipaddress.ip_address(host).is_unspecified:
        found = route_address(dsn)
        if found is None:
            return None
        host = found
    return join_host_port(host, port)


def parse_advertised(text: str) -> Address | None:
    """A registry ``hint_addr`` back into (host, port); None if it is not one."""
    try:
        parsed = parse_bind(text)
    except ConfigError:
        return None
    return parsed if isinstance(parsed, tuple) and parsed[1] else None
