"""Socket addresses as people write them: ``HOST:PORT``, ``[IPV6]:PORT``, ``ADDR`` alone."""

from __future__ import annotations

import ipaddress
from typing import Literal

from mysqlq.core.errors import ConfigError

Address = tuple[str, int]
MAX_PORT = 65535

# Where the port is in text with several colons and no brackets: nowhere (the text is an IPv6
# address alone), after the first colon (as in a URL, where an IPv6 address must be bracketed), or
# after the last colon (where a port must be given, so the last colon can only be its own).
Unbracketed = Literal["ipv6", "first colon", "last colon"]


def port_number(text: str, lowest: int = 1) -> int | None:
    """``text`` as a TCP port from ``lowest`` (1, or 0 where 0 means any free port) to 65535; None when
    it is not one."""
    if text.isdigit() and lowest <= int(text) <= MAX_PORT:
        return int(text)
    return None


def split_host_port(text: str, unbracketed: Unbracketed = "ipv6") -> tuple[str, str] | None:
    """``HOST:PORT``, ``[IPV6]:PORT``, ``[IPV6]`` or ``HOST`` → (host, port as written, "" when there is
    none), neither checked; None when text follows ``]`` that is not ``:PORT``. Text with several colons
    and no brackets is read as ``unbracketed`` says."""
    if text.startswith("["):
        host, _, rest = text[1:].partition("]")
        if rest and not rest.startswith(":"):
            return None
        return host, rest[1:]
    if text.count(":") > 1 and unbracketed == "ipv6":
        return text, ""
    host, colon, port = text.rpartition(":") if unbracketed == "last colon" else text.partition(":")
    return (host, port) if colon else (text, "")


def join_host_port(host: str, port: int) -> str:
    """(host, port) as written: ``HOST:PORT``, or ``[IPV6]:PORT``."""
    return f"[{host}]:{port}" if ":" in host else f"{host}:{port}"


def parse_address(spec: str, what: str, port_required: bool = False, numeric: bool = True,
                  extra: str = "") -> Address:
    """``ADDR[:PORT]`` (IPv6 as ``[ADDR]:PORT``) → (host, port); a missing port is 0 unless
    ``port_required``. With ``numeric`` the host must be an IP address. ConfigError names ``what``
    (``extra`` follows its "not an IP address")."""
    parts = split_host_port(spec.strip())
    if parts is None:
        raise ConfigError(f"{what} {spec!r}: expected [IPV6]:PORT")
    host, port = parts
    if not numeric and not host:
        raise ConfigError(f"{what} {spec!r}: no host")
    if port_required and not port:
        raise ConfigError(f"{what} {spec!r}: expected HOST:PORT, e.g. 127.0.0.1:8080")
    if numeric:
        try:
            host = str(ipaddress.ip_address(host))
        except ValueError:
            raise ConfigError(f"{what} {spec!r}: not an IP address{extra}") from None
    low = 1 if port_required else 0
    number = port_number(port or "0", low)
    if number is None:
        raise ConfigError(f"{what} {spec!r}: the port must be a number from {low} to {MAX_PORT}")
    return host, number


def parse_bind(spec: str) -> Address | str:
    """A hint bind address: ``auto``, ``off``, or ``ADDR[:PORT]`` (port 0 or none: any free port)."""
    text = spec.strip()
    if text.lower() in ("auto", "off"):
        return text.lower()
    return parse_address(text, "hint bind address", extra=" (or auto, off)")
