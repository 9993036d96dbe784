"""Secrets from files: the DSN (or only its password) and the dashboard's access token.

A secret in an environment variable is readable in /proc/PID/environ by the process's user, is
copied into every child process, and, set with a unit's ``Environment=``, shows in ``systemctl
show``. So each secret may also come from a file: one named by a ``MYSQLQ_*_FILE`` variable (or its
option), or one of systemd's credentials, which a unit's ``LoadCredential=`` (or
``LoadCredentialEncrypted=``, decrypted by systemd) copies into ``$CREDENTIALS_DIRECTORY``,
readable by the unit's own user only:

==========================  ==========================  ========================
secret                      file                        credential
==========================  ==========================  ========================
the DSN                     ``MYSQLQ_DSN_FILE``         ``mysqlq.dsn``
only the DSN's password     ``MYSQLQ_PASSWORD_FILE``    ``mysqlq.password``
the dashboard's token       ``MYSQLQ_WEB_TOKEN_FILE``   ``mysqlq.web-token``
==========================  ==========================  ========================

The password alone serves those whose secret store hands out a password, not a URL (Docker and
Kubernetes secrets, a vault agent), and keeps the rest of the DSN (host, user, database) readable
in the env file; it needs no URL-encoding either. A file holds the secret on one line; one trailing
newline is dropped (editors and ``echo`` add it).

When a secret is given in more than one place, a value typed on the command line wins over the
environment, files and credentials; among the others, places that disagree are an error (never a
silent choice), places that agree are fine. A message names the place (an option, a variable, a
credential) and the file's path, never what the file holds.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Collection, Iterable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import TypeVar

from mysqlq.core.errors import ConfigError

CREDENTIALS_DIRECTORY = "CREDENTIALS_DIRECTORY"  # set by systemd for a unit with credentials
DSN_CREDENTIAL = "mysqlq.dsn"
PASSWORD_CREDENTIAL = "mysqlq.password"
TOKEN_CREDENTIAL = "mysqlq.web-token"
MAX_BYTES = 64 * 1024  # a secret is one short line; a larger file is the wrong one

T = TypeVar("T")


@dataclass(frozen=True)
class Source:
    """One place a secret was given: a value (an option or a variable) or a file."""

    label: str  # how messages name it: "--dsn", "MYSQLQ_DSN_FILE", "the credential mysqlq.dsn"
    value: str | None = field(default=None, repr=False)  # a secret: kept out of reprs and tracebacks
    path: Path | None = None
    typed: bool = False  # given on the command line

    def read(self) -> str:
        """The secret (read from the file, when it is one)."""
        if self.path is not None:
            return read_secret(self.path, self.label)
        return self.value or ""

    @property
    def named(self) -> str:
        """The label with the file's path: ``MYSQLQ_DSN_FILE (/etc/mysqlq/dsn)``."""
        return f"{self.label} ({self.path})" if self.path is not None else self.label


def read_secret(path: Path, label: str) -> str:
    """The secret in ``path``, without one trailing newline; ConfigError, in one line naming ``label``
    and the path, when the file is missing, unreadable, empty, too large or holds several lines."""
    where = f"{path} ({label})"
    try:
        with path.open("rb") as file:
            data = file.read(MAX_BYTES + 1)
    except FileNotFoundError:
        raise ConfigError(f"{label} names {path}, which does not exist") from None
    except IsADirectoryError:
        raise ConfigError(f"{label} names {path}, which is a directory, not the file holding the secret") from None
    except PermissionError:
        hint = ("systemd gives a credential to the unit's own user only" if label.startswith("the credential")
                else "run as a user who may read it, e.g. with sudo")
        raise ConfigError(f"cannot read {where}: permission denied ({hint})") from None
    except OSError as exc:
        raise ConfigError(f"cannot read {where}: {exc.strerror or exc}") from None
    if len(data) > MAX_BYTES:
        raise ConfigError(f"{where} is larger than {MAX_BYTES // 1024} KiB: a secret file holds one line")
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError:
        raise ConfigError(f"{where} is not UTF-8 text") from None
    if text.endswith("\n"):
        text = text[:-2] if text.endswith("\r\n") else text[:-1]
    if not text.strip():
        raise ConfigError(f"{where} is empty")
    if "\n" in text or "\r" in text:
        raise ConfigError(f"{where} holds more than one line: put the secret alone on one line")
    return text


def credential(name: str, environ: Mapping[str, str] | None = None) -> Source | None:
    """The systemd credential ``name`` when the process has it ($CREDENTIALS_DIRECTORY/name), else None.
    One that exists but cannot be read is returned: reading it says why."""
    directory = (os.environ if environ is None else environ).get(CREDENTIALS_DIRECTORY)
    if not directory:
        return None
    path = Path(directory) / name
    try:
        path.stat()
    except FileNotFoundError:
        return None
    except OSError:
        pass
    return Source(f"the credential {name}", path=path)


def choose(what: str, sources: Iterable[Source | None],
           convert: Callable[[str, Source], T]) -> tuple[T, Source] | None:
    """The secret ``what`` from the places it was given (None for a place where it was not), as
    ``convert`` makes it, with its place; None when it was given nowhere. Typed ones win over the
    rest; the remaining places must agree (ConfigError naming two that do not)."""
    given = [source for source in sources if source is not None]
    given = [source for source in given if source.typed] or given
    found: list[tuple[T, Source]] = [(convert(source.read(), source), source) for source in given]
    if not found:
        return None
    value, first = found[0]
    for other, source in found[1:]:
        if other != value:
            raise ConfigError(f"{what} is given both by {first.named} and by {source.named}, differently: "
                              "keep one of them")
    return value, first


def given(value: str | None, typed: bool, option: str, variable: str, file: bool = False) -> Source | None:
    """A Source for an option's value, labelled by the option when typed, else by its variable; None
    when not given. An empty value typed on the command line is given (and refused where it is read)."""
    if value is None or (not value and not typed):
        return None
    label = option if typed else variable
    if not file:
        return Source(label, value=value, typed=typed)
    if not value:
        raise ConfigError(f"{label} is empty: name the file that holds the secret")
    return Source(label, path=Path(value), typed=typed)


def resolve_token(token: str | None = None, token_file: str | None = None, *, typed: Collection[str] = (),
                  environ: Mapping[str, str] | None = None) -> tuple[str, Source] | None:
    """The dashboard's access token from ``--token``/MYSQLQ_WEB_TOKEN, ``--token-file``/
    MYSQLQ_WEB_TOKEN_FILE or the credential mysqlq.web-token, with its place; None when there is none."""
    return choose("the dashboard's token", [
        given(token, "token" in typed, "--token", "MYSQLQ_WEB_TOKEN"),
        given(token_file, "token_file" in typed, "--token-file", "MYSQLQ_WEB_TOKEN_FILE", file=True),
        credential(TOKEN_CREDENTIAL, environ),
    ], lambda text, source: text)
