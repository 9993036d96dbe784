"""Payloads, results and errors encrypted at rest: the envelope, and the keys that seal and open it.

A sealed value is ASCII text, so that one form fits the payload and result (MEDIUMBLOB) and the
error (MEDIUMTEXT) columns alike, beside plaintext values of jobs enqueued without keys::

    mysqlq-enc:1:<key id>:<base64 of a 12-byte nonce, the AES-256-GCM ciphertext and its 16-byte tag>

A JSON document never starts with ``m``, so a payload or result is sealed exactly when it starts with
:data:`PREFIX`. The authenticated associated data is the envelope's header (``mysqlq-enc:1:<key id>:``),
what the value is, and the fields of its job it is bound to: a payload to its queue and handler (the
job's id does not exist yet when it is sealed, before its INSERT); a result and an error, written by
the worker that ran the job, to the job's id. A value moved to a job it is not bound to, or altered,
does not open (docs/security.md says what that does and does not prevent).
"""

from __future__ import annotations

import base64
import binascii
import os
import re
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any, Literal

from mysqlq.core.errors import MysqlqError

if TYPE_CHECKING:
    from cryptography.hazmat.primitives.ciphers.aead import AESGCM

PREFIX = "mysqlq-enc:1:"
PREFIX_BYTES = PREFIX.encode()
KEY_BYTES = 32  # AES-256
NONCE_BYTES = 12  # GCM's standard nonce, random per value
TAG_BYTES = 16
KEY_ID = re.compile(r"[A-Za-z0-9][A-Za-z0-9_.-]{0,31}")  # in the envelope's header, so no ':' and short

Bound = Literal["payload", "result", "error"]


class EncryptedValue(MysqlqError):
    """A sealed value this process cannot open: its key is not configured here, or it does not
    authenticate (moved from another job, altered, or sealed with another key of the same id)."""

    def __init__(self, message: str, key_id: str | None) -> None:
        super().__init__(message)
        self.key_id = key_id


def key_id_of(value: str | bytes | bytearray | None) -> str | None:
    """The id of the key that sealed ``value``; None when it is not sealed (a plaintext value)."""
    if value is None:
        return None
    if isinstance(value, str):
        if not value.startswith(PREFIX):
            return None
        head = value[len(PREFIX):len(PREFIX) + 34]
    else:
        if not value.startswith(PREFIX_BYTES):
            return None
        head = bytes(value[len(PREFIX_BYTES):len(PREFIX_BYTES) + 34]).decode("ascii", "replace")
    key_id = head.split(":", 1)[0]
    return key_id if KEY_ID.fullmatch(key_id) else "?"


def described(value: str | bytes | bytearray) -> str:
    """What a reader without the key is shown of a sealed value: ``(encrypted with key k1)``."""
    return f"(encrypted with key {key_id_of(value)})"


def binding(what: Bound, *fields: str | int) -> bytes:
    """What a value is and the fields of its job it is bound to, as the associated data takes them."""
    return "\0".join([what, *map(str, fields)]).encode()


class Keyring:
    """The keys of this process by id; the newest (the key file's last) seals, every one opens.

    Holds key bytes: its repr names the ids only.
    """

    __slots__ = ("_ciphers", "entries", "newest")

    def __init__(self, entries: Sequence[tuple[str, bytes]]) -> None:
        if not entries:
            raise ValueError("a keyring needs at least one key")
        for key_id, key in entries:
            if not KEY_ID.fullmatch(key_id) or len(key) != KEY_BYTES:
                raise ValueError(f"key {key_id!r}: an id of letters, digits, '_', '.', '-' and a 32-byte key")
        if len({key_id for key_id, _ in entries}) != len(entries):
            raise ValueError("key ids repeat")
        self.entries = tuple(entries)
        self.newest = entries[-1][0]
        self._ciphers: dict[str, AESGCM] = {}

    @property
    def ids(self) -> tuple[str, ...]:
        return tuple(key_id for key_id, _ in self.entries)

    def __eq__(self, other: object) -> bool:
        return isinstance(other, Keyring) and other.entries == self.entries

    def __hash__(self) -> int:
        return hash(self.ids)

    def __repr__(self) -> str:
        return f"Keyring(ids={list(self.ids)!r}, newest={self.newest!r})"

    def _cipher(self, key_id: str) -> AESGCM | None:
        cipher = self._ciphers.get(key_id)
        if cipher is None:
            key = dict(self.entries).get(key_id)
            if key is None:
                return None
            from cryptography.hazmat.primitives.ciphers.aead import AESGCM  # only where keys are configured

            cipher = self._ciphers[key_id] = AESGCM(key)
        return cipher

    def seal(self, data: bytes, bound: bytes) -> str:
        """``data`` sealed with the newest key, bound to ``bound`` (see :func:`binding`)."""
        header = f"{PREFIX}{self.newest}:"
        cipher = self._cipher(self.newest)
        assert cipher is not None
        nonce = os.urandom(NONCE_BYTES)
        sealed = cipher.encrypt(nonce, data, header.encode() + bound)
        return header + base64.b64encode(nonce + sealed).decode("ascii")

    def open(self, value: str | bytes | bytearray, bound: bytes, what: str = "value") -> bytes:
        """The plaintext of a sealed ``value`` bound to ``bound``; EncryptedValue, in one line naming
        the key id, when this keyring lacks its key or it does not authenticate."""
        text = value if isinstance(value, str) else bytes(value).decode("ascii", "replace")
        key_id, colon, body = text[len(PREFIX):].partition(":")
        if not colon or not KEY_ID.fullmatch(key_id):
            raise EncryptedValue(f"{what} is not a well-formed encrypted value", None)
        cipher = self._cipher(key_id)
        if cipher is None:
            raise EncryptedValue(missing_key(what, key_id), key_id)
        try:
            raw = base64.b64decode(body, validate=True)
        except (binascii.Error, ValueError):
            raw = b""
        if len(raw) < NONCE_BYTES + TAG_BYTES:
            raise EncryptedValue(f"{what} encrypted with key {key_id} is truncated or malformed", key_id)
        from cryptography.exceptions import InvalidTag

        try:
            return cipher.decrypt(raw[:NONCE_BYTES], raw[NONCE_BYTES:], f"{PREFIX}{key_id}:".encode() + bound)
        except InvalidTag:
            raise EncryptedValue(
                f"{what} encrypted with key {key_id} does not authenticate: it was moved from another job, "
                f"altered, or sealed with another key of id {key_id}", key_id) from None

    # What each column holds, bound to its job.

    def seal_payload(self, encoded: bytes, queue: str, handler: str) -> bytes:
        return self.seal(encoded, binding("payload", queue, handler)).encode("ascii")

    def open_payload(self, stored: bytes, queue: str, handler: str) -> bytes:
        return self.open(stored, binding("payload", queue, handler), "payload")

    def seal_result(self, encoded: bytes, job_id: int) -> bytes:
        return self.seal(encoded, binding("result", job_id)).encode("ascii")

    def open_result(self, stored: bytes, job_id: int) -> bytes:
        return self.open(stored, binding("result", job_id), "result")

    def seal_error(self, error: str, job_id: int) -> str:
        return self.seal(error.encode("utf-8", "surrogatepass"), binding("error", job_id))

    def open_error(self, stored: str, job_id: int) -> str:
        return self.open(stored, binding("error", job_id), "error").decode("utf-8", "surrogatepass")


def missing_key(what: str, key_id: str) -> str:
    """The error of a job whose value is sealed with a key this process does not have."""
    return (f"{what} is encrypted with key {key_id}, which this process does not have "
            "(--encryption-keys-file, MYSQLQ_ENCRYPTION_KEYS_FILE or the credential mysqlq.keys)")


def open_error_text(error: str | None, job_id: int, keys: Keyring | None) -> str | None:
    """A job's stored error as a reader is shown it: opened when ``keys`` can, else described."""
    if error is None or not error.startswith(PREFIX):
        return error
    if keys is not None:
        try:
            return keys.open_error(error, job_id)
        except EncryptedValue as exc:
            return f"({exc})"
    return described(error)


def open_json(stored: bytes | None, keys: Keyring | None, what: Literal["payload", "result"], job_id: int,
              queue: str, handler: str) -> bytes | str | None:
    """A stored payload or result as a reader is shown it: the plaintext JSON when it is not sealed or
    ``keys`` open it; else (a str) what :func:`described` says, or why ``keys`` do not open it."""
    if stored is None or not stored.startswith(PREFIX_BYTES):
        return stored
    if keys is not None:
        try:
            if what == "payload":
                return keys.open_payload(stored, queue, handler)
            return keys.open_result(stored, job_id)
        except EncryptedValue as exc:
            return f"({exc})"
    return described(stored)


def readable(row: dict[str, Any], keys: Keyring | None) -> dict[str, Any]:
    """A job's row (``jobs show``, the dashboard) as a reader holding ``keys`` is shown it: its
    ``payload``, ``result`` and ``last_error`` decrypted where they can be, the others described
    (:func:`described`); an ``error`` (a list's first line of the error, cut short) described when
    it is encrypted. Never a key, never what a missing key would open."""
    job_id, queue, handler = int(row["id"]), str(row["queue"]), str(row["handler"])
    if "payload" in row:
        row["payload"] = open_json(row["payload"], keys, "payload", job_id, queue, handler)
    if "result" in row:
        row["result"] = open_json(row["result"], keys, "result", job_id, queue, handler)
    if "last_error" in row:
        row["last_error"] = open_error_text(row["last_error"], job_id, keys)
    if row.get("error") and key_id_of(row["error"]):
        row["error"] = described(row["error"])
    return row
