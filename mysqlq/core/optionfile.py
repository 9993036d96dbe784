"""MySQL option files (``my.cnf``): the ``[client]`` group and one named group, read as the MySQL
and MariaDB clients read them, for a DSN that says ``read_default_file`` / ``read_default_group``.

mysqlq reads the file itself, once, when the DSN is parsed: what it finds (host, port, socket, user,
password, database and the TLS settings) becomes part of the DSN, so every connection mysqlq opens
(workers, producers, the CLI, the dashboard) uses the same settings, a worker and a producer that
reach one database by different DSNs still hear each other's hints, and log lines can say where
the database is. The format: ``[group]`` lines, ``name`` or ``name = value`` (``-`` and ``_`` alike
in names), ``#`` and ``;`` comments, ``#`` also after a value outside quotes, values in single or
double quotes with the escapes ``\\n \\t \\r \\b \\s \\\\``, and ``!include FILE`` / ``!includedir DIR``
(every ``*.cnf`` there, in name order). A later value wins.

Errors name the file and line, never a value (a value may be a password).
"""

from __future__ import annotations

import os
import stat
from pathlib import Path

from mysqlq.core.errors import ConfigError

# The files the MySQL and MariaDB clients read on Linux when a group is named without a file.
DEFAULT_FILES = ("/etc/my.cnf", "/etc/mysql/my.cnf", "~/.my.cnf")
MAX_INCLUDE_DEPTH = 10
_ESCAPES = {"n": "\n", "t": "\t", "r": "\r", "b": "\b", "s": " ", "\\": "\\", '"': '"', "'": "'"}


def read_groups(path: str | None, group: str | None) -> tuple[dict[str, str | None], str]:
    """The options of ``[client]`` and then ``[group]`` (a later value wins) from the file ``path``,
    or from the default files (DEFAULT_FILES, those that exist) when ``path`` is None. Names come
    with ``_`` for ``-``; an option given without ``=`` has the value None. Also returns a short
    description of where they were read, for error messages."""
    wanted = ["client"] + ([group] if group and group != "client" else [])
    found: dict[str, dict[str, str | None]] = {name: {} for name in wanted}
    if path is not None:
        file = Path(path).expanduser()
        _read(file, found, 0, str(file))
        where = str(file)
    else:
        files = [Path(name).expanduser() for name in DEFAULT_FILES]
        existing = [file for file in files if file.is_file()]
        for file in existing:
            _read(file, found, 0, str(file))
        where = "the default option files (" + ", ".join(DEFAULT_FILES) + ")"
        if not existing:
            raise ConfigError(f"read_default_group is {group!r} but none of {where} exists: give read_default_file")
    if group and group != "client" and not found[group]:
        raise ConfigError(f"option file {where} has no [{group}] group (or it is empty)")
    options: dict[str, str | None] = {}
    for name in wanted:
        options.update(found[name])
    return options, where


def _read(file: Path, found: dict[str, dict[str, str | None]], depth: int, top: str) -> None:
    if depth > MAX_INCLUDE_DEPTH:
        raise ConfigError(f"option file {top}: includes nest more than {MAX_INCLUDE_DEPTH} deep")
    try:
        info = file.stat()
        if stat.S_ISDIR(info.st_mode):
            raise ConfigError(f"option file {file} is a directory")
        if info.st_mode & stat.S_IWOTH:
            # Anyone could change where mysqlq connects: the MySQL clients ignore such a file too.
            raise ConfigError(f"option file {file} is world-writable: mysqlq refuses it (chmod o-w)")
        text = file.read_text(encoding="utf-8", errors="replace")
    except OSError as exc:
        raise ConfigError(f"cannot read option file {file}: {exc.strerror or exc}") from None
    current: dict[str, str | None] | None = None
    for number, raw in enumerate(text.splitlines(), start=1):
        line = raw.strip()
        if not line or line[0] in "#;":
            continue
        if line.startswith("!"):
            _include(file, number, line, found, depth, top)
            continue
        if line.startswith("["):
            end = line.find("]")
            if end < 0:
                raise ConfigError(f"option file {file}, line {number}: a group name misses its ']'")
            current = found.get(line[1:end].strip())
            continue
        if current is None:
            continue  # an option of a group that is not read, or before the first group
        name, equals, value = line.partition("=")
        name = name.strip().replace("-", "_").lower()
        if not name:
            raise ConfigError(f"option file {file}, line {number}: an option without a name")
        current[name] = _value(value, file, number) if equals else None


def _include(file: Path, number: int, line: str, found: dict[str, dict[str, str | None]], depth: int,
             top: str) -> None:
    directive, _, target_text = line.partition(" ")
    target = Path(target_text.strip()).expanduser()
    if not target_text.strip():
        raise ConfigError(f"option file {file}, line {number}: {directive} names no path")
    if not target.is_absolute():
        target = file.parent / target
    if directive == "!include":
        _read(target, found, depth + 1, top)
    elif directive == "!includedir":
        try:
            names = sorted(entry.name for entry in os.scandir(target) if entry.name.endswith(".cnf"))
        except OSError as exc:
            raise ConfigError(f"option file {file}, line {number}: cannot list {target}: "
                              f"{exc.strerror or exc}") from None
        for name in names:
            _read(target / name, found, depth + 1, top)
    else:
        raise ConfigError(f"option file {file}, line {number}: unknown directive {directive} "
                          "(known: !include, !includedir)")


def _value(text: str, file: Path, number: int) -> str:
    """An option's value: a comment after it removed, quotes removed, escapes replaced."""
    quote = ""
    escaped = False
    for index, char in enumerate(text):
        if quote:
            if escaped:
                escaped = False
            elif char == "\\":
                escaped = True
            elif char == quote:
                quote = ""
        elif char in "'\"":
            quote = char
        elif char == "#":
            text = text[:index]
            break
    if quote:
        raise ConfigError(f"option file {file}, line {number}: a quoted value misses its closing quote")
    value = text.strip()
    if len(value) >= 2 and value[0] == value[-1] and value[0] in "'\"":
        value = value[1:-1]
    out: list[str] = []
    chars = iter(value)
    for char in chars:
        if char == "\\":
            following = next(chars, "")
            out.append(_ESCAPES.get(following, "\\" + following))
        else:
            out.append(char)
    return "".join(out)
