"""Env files: the ``VAR=value`` lines of /etc/mysqlq/*.env, read into the environment for the CLI."""

from __future__ import annotations

import os
import re
from collections.abc import Mapping, MutableMapping
from pathlib import Path

from mysqlq.core.errors import ConfigError

PREFIX = "MYSQLQ_"
_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")


def parse(text: str, source: str = "env file") -> dict[str, str]:
    """The variables of an env file as systemd's ``EnvironmentFile=`` reads them: ``VAR=value`` lines,
    ``#`` and ``;`` comments, blank lines, optional matching quotes around the value."""
    found: dict[str, str] = {}
    for number, raw in enumerate(text.splitlines(), 1):
        line = raw.strip()
        if not line or line.startswith(("#", ";")):
            continue
        name, sep, value = line.partition("=")
        name, value = name.strip(), value.strip()
        if not sep or not _NAME.fullmatch(name):
            raise ConfigError(f"{source}, line {number}: expected VAR=value")
        if len(value) >= 2 and value[0] == value[-1] and value[0] in "'\"":
            value = value[1:-1]
        found[name] = value
    return found


class EnvFiles:
    """Loads env files into an environment: a variable the environment had before any file is kept
    (the environment wins, as with the option given on the command line), a later file overrides an
    earlier one. Only ``MYSQLQ_*`` variables are taken: the rest of a unit's file is not the CLI's."""

    def __init__(self, environ: MutableMapping[str, str] | None = None) -> None:
        self.environ = os.environ if environ is None else environ
        self.loaded: dict[str, str] = {}  # variable -> the file it came from
        self.files: list[Path] = []

    def load(self, path: Path) -> Mapping[str, str]:
        """Read ``path`` and set its MYSQLQ_* variables; returns those set (ConfigError if unreadable)."""
        try:
            text = path.read_text(encoding="utf-8")
        except PermissionError:
            raise ConfigError(f"cannot read {path}: permission denied (it holds the password: run as root, "
                              "e.g. with sudo)") from None
        except (OSError, UnicodeDecodeError) as exc:
            reason = exc.strerror if isinstance(exc, OSError) and exc.strerror else str(exc)
            raise ConfigError(f"cannot read {path}: {reason}") from None
        values = {name: value for name, value in parse(text, str(path)).items() if name.startswith(PREFIX)}
        set_here = {}
        for name, value in values.items():
            if name in self.environ and name not in self.loaded:
                continue
            self.environ[name] = value
            self.loaded[name] = str(path)
            set_here[name] = value
        if path not in self.files:
            self.files.append(path)
        return set_here
