"""The encryption keys file: where it comes from, what it must hold, and a new key's line.

One key a line, ``<key id> <base64 of 32 random bytes>``; blank lines and lines starting with ``#``
are skipped. The last key is the newest: it encrypts; every key decrypts. The file comes from
``--encryption-keys-file``/MYSQLQ_ENCRYPTION_KEYS_FILE or the systemd credential ``mysqlq.keys``
(as the other secrets, mysqlq.core.secrets), and is refused in one line when it is malformed, holds a
key of the wrong size or an id twice, or may be read by its group or others.
"""

from __future__ import annotations

import base64
import binascii
import os
import stat
from collections.abc import Mapping
from datetime import UTC, datetime
from pathlib import Path

from mysqlq.core import secrets
from mysqlq.core.encryption import KEY_BYTES, KEY_ID, Keyring
from mysqlq.core.errors import ConfigError

KEYS_CREDENTIAL = "mysqlq.keys"
KEYS_VARIABLE = "MYSQLQ_ENCRYPTION_KEYS_FILE"
MAX_BYTES = 64 * 1024  # a thousand keys; a larger file is the wrong one


def read_keys(path: Path, label: str) -> Keyring:
    """The keys in ``path``; ConfigError, one line naming ``label`` and the path (never a key), when it
    cannot be used."""
    where = f"{path} ({label})"
    try:
        with path.open("rb") as file:
            mode = os.fstat(file.fileno()).st_mode
            data = file.read(MAX_BYTES + 1)
    except FileNotFoundError:
        raise ConfigError(f"{label} names {path}, which does not exist") from None
    except IsADirectoryError:
        raise ConfigError(f"{label} names {path}, which is a directory, not the keys file") from None
    except PermissionError:
        raise ConfigError(f"cannot read {where}: permission denied") from None
    except OSError as exc:
        raise ConfigError(f"cannot read {where}: {exc.strerror or exc}") from None
    if mode & 0o077:
        raise ConfigError(f"{where} may be read by others (mode {stat.S_IMODE(mode):04o}): let only its owner "
                          f"read it (chmod 600 {path})")
    if len(data) > MAX_BYTES:
        raise ConfigError(f"{where} is larger than {MAX_BYTES // 1024} KiB: it holds one key a line")
    try:
        text = data.decode("ascii")
    except UnicodeDecodeError:
        raise ConfigError(f"{where} is not ASCII text: it holds lines of '<key id> <base64 key>'") from None
    return Keyring(parse_keys(text, where))


def parse_keys(text: str, where: str) -> list[tuple[str, bytes]]:
    """The (id, key) pairs of a keys file's text, in order; ConfigError naming the line (not its key)."""
    entries: list[tuple[str, bytes]] = []
    seen: set[str] = set()
    for number, line in enumerate(text.splitlines(), 1):
        line = line.strip()
        if not line or line.startswith("#"):
            continue
        fields = line.split()
        if len(fields) != 2:
            raise ConfigError(f"{where}, line {number}: expected '<key id> <base64 key>'")
        key_id, encoded = fields
        if not KEY_ID.fullmatch(key_id):
            raise ConfigError(f"{where}, line {number}: a key id is 1 to 32 letters, digits, '_', '.' or '-', "
                              "starting with a letter or digit")
        if key_id in seen:
            raise ConfigError(f"{where}, line {number}: key id {key_id} is given twice")
        try:
            key = base64.b64decode(encoded, validate=True)
        except (binascii.Error, ValueError):
            raise ConfigError(f"{where}, line {number}: key {key_id} is not base64") from None
        if len(key) != KEY_BYTES:
            raise ConfigError(f"{where}, line {number}: key {key_id} is {len(key)} bytes; AES-256 needs "
                              f"{KEY_BYTES} (`mysqlq keys generate` prints one)")
        seen.add(key_id)
        entries.append((key_id, key))
    if not entries:
        raise ConfigError(f"{where} holds no key (`mysqlq keys generate` prints one)")
    return entries


def resolve_keys(keys_file: str | None = None, *, typed: bool = False,
                 environ: Mapping[str, str] | None = None) -> Keyring | None:
    """The keys from ``--encryption-keys-file``/MYSQLQ_ENCRYPTION_KEYS_FILE or the credential
    mysqlq.keys; None when neither is given (nothing is encrypted then). A file typed on the command
    line wins; otherwise both places, when given, must hold the same keys."""
    sources = [secrets.given(keys_file, typed, "--encryption-keys-file", KEYS_VARIABLE, file=True),
               secrets.credential(KEYS_CREDENTIAL, environ)]
    given = [source for source in sources if source is not None]
    given = [source for source in given if source.typed] or given
    found = [(read_keys(source.path, source.label), source) for source in given if source.path is not None]
    if not found:
        return None
    keys, first = found[0]
    for other, source in found[1:]:
        if other != keys:
            raise ConfigError(f"the encryption keys are given both by {first.named} and by {source.named}, "
                              "differently: keep one of them")
    return keys


def keys_from_environment(environ: Mapping[str, str] | None = None) -> Keyring | None:
    """The keys as a process finds them without options: MYSQLQ_ENCRYPTION_KEYS_FILE, or the
    credential mysqlq.keys under systemd; None when neither is there."""
    env = os.environ if environ is None else environ
    return resolve_keys(env.get(KEYS_VARIABLE) or None, environ=env)


def new_key_line(key_id: str | None = None) -> str:
    """A new key's line for the keys file: ``<id> <base64 of 32 random bytes>`` (the id, by default,
    the time it was made: ``k20261129T155302``)."""
    key_id = key_id or datetime.now(UTC).strftime("k%Y%m%dT%H%M%S")
    if not KEY_ID.fullmatch(key_id):
        raise ConfigError("a key id is 1 to 32 letters, digits, '_', '.' or '-', starting with a letter or digit")
    return f"{key_id} {base64.b64encode(os.urandom(KEY_BYTES)).decode('ascii')}"
