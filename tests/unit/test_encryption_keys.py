"""Encryption at rest without a server (mysqlq.core.encryption, mysqlq.core.keyfile): the envelope opens
only where it was sealed for, the newest key seals and older ones open, and the keys file comes from
the option, the variable or the credential mysqlq.keys, refused in one line that never shows a key."""

from __future__ import annotations

import base64
from pathlib import Path

import pytest

from mysqlq.core.config import Dsn, Settings
from mysqlq.core.encryption import EncryptedValue, Keyring, key_id_of, readable
from mysqlq.core.errors import ConfigError
from mysqlq.core.keyfile import new_key_line, read_keys, resolve_keys

K1, K2 = bytes(range(32)), bytes(range(32, 64))
B1, B2 = base64.b64encode(K1).decode(), base64.b64encode(K2).decode()


def keys_file(path: Path, text: str, mode: int = 0o600) -> Path:
    path.write_text(text)
    path.chmod(mode)
    return path


def test_a_payload_opens_only_for_its_queue_and_handler_and_a_result_only_for_its_job() -> None:
    keys = Keyring([("k1", K1)])
    sealed = keys.seal_payload(b'{"card":"4111"}', "default", "charge")
    assert sealed.startswith(b"mysqlq-enc:1:k1:") and b"4111" not in sealed and key_id_of(sealed) == "k1"
    assert sealed != keys.seal_payload(b'{"card":"4111"}', "default", "charge")  # a nonce of its own each time
    assert keys.open_payload(sealed, "default", "charge") == b'{"card":"4111"}'
    for queue, handler in (("other", "charge"), ("default", "refund")):
        with pytest.raises(EncryptedValue, match="does not authenticate: it was moved from another job"):
            keys.open_payload(sealed, queue, handler)
    result = keys.seal_result(b"42", 7)
    assert keys.open_result(result, 7) == b"42"
    with pytest.raises(EncryptedValue):
        keys.open_result(result, 8)
    with pytest.raises(EncryptedValue):  # a payload is not a result, even of the same bytes
        keys.open_result(sealed, 7)
    error = keys.seal_error("ValueError: card 4111 declined\n\nTraceback ...", 7)
    assert "4111" not in error and "\n" not in error and keys.open_error(error, 7).startswith("ValueError: card")


def test_an_altered_or_truncated_value_does_not_open() -> None:
    keys = Keyring([("k1", K1)])
    sealed = keys.seal_result(b'"ok"', 1).decode()
    body = base64.b64decode(sealed.rsplit(":", 1)[1])
    flipped = sealed.rsplit(":", 1)[0] + ":" + base64.b64encode(body[:-1] + bytes([body[-1] ^ 1])).decode()
    for bad in (flipped, sealed[:30], sealed.replace(":k1:", ":k1x:")):
        with pytest.raises(EncryptedValue):
            keys.open_result(bad.encode(), 1)


def test_the_newest_key_seals_and_the_older_ones_still_open() -> None:
    old, both = Keyring([("k1", K1)]), Keyring([("k1", K1), ("k2", K2)])
    assert both.newest == "k2" and key_id_of(both.seal_result(b"1", 1)) == "k2"
    assert both.open_result(old.seal_result(b"1", 1), 1) == b"1"
    with pytest.raises(EncryptedValue, match="result is encrypted with key k2, which this process does not have"):
        old.open_result(both.seal_result(b"1", 1), 1)


def test_readers_without_the_key_are_shown_what_key_it_needs_never_the_value() -> None:
    keys = Keyring([("k1", K1)])
    row = {"id": 3, "queue": "q", "handler": "h", "payload": keys.seal_payload(b'{"a":1}', "q", "h"),
           "result": keys.seal_result(b"2", 3), "last_error": keys.seal_error("boom", 3),
           "error": "mysqlq-enc:1:k1:AAA"}
    shown = readable(dict(row), None)
    assert shown == {"id": 3, "queue": "q", "handler": "h", "payload": "(encrypted with key k1)",
                     "result": "(encrypted with key k1)", "last_error": "(encrypted with key k1)",
                     "error": "(encrypted with key k1)"}
    opened = readable(dict(row), keys)
    assert (opened["payload"], opened["result"], opened["last_error"]) == (b'{"a":1}', b"2", "boom")
    plain = {"id": 4, "queue": "q", "handler": "h", "payload": b"{}", "result": None, "last_error": "x"}
    assert readable(dict(plain), keys) == plain


def test_a_keyring_shows_its_ids_never_its_keys(tmp_path: Path) -> None:
    keys = read_keys(keys_file(tmp_path / "keys", f"# rotated 2026-11\nk1 {B1}\n\nk2 {B2}\n"), "test")
    assert keys.ids == ("k1", "k2") and keys.newest == "k2"
    assert B1 not in repr(keys) and B2 not in repr(keys) and repr(keys) == "Keyring(ids=['k1', 'k2'], newest='k2')"
    assert B1 not in repr(Settings(dsn=Dsn(), keys=keys))


@pytest.mark.parametrize(("text", "mode", "message"), [
    (f"k1 {B1}\nk2\n", 0o600, "line 2: expected '<key id> <base64 key>'"),
    (f"k1 {B1} extra\n", 0o600, "line 1: expected '<key id> <base64 key>'"),
    (f"k:1 {B1}\n", 0o600, "line 1: a key id is 1 to 32 letters"),
    ("k1 " + base64.b64encode(bytes(16)).decode() + "\n", 0o600, "line 1: key k1 is 16 bytes; AES-256 needs 32"),
    (f"k1 {B1}\nk1 {B2}\n", 0o600, "line 2: key id k1 is given twice"),
    (f"k1 {B1}\n", 0o640, "may be read by others (mode 0640): let only its owner read it (chmod 600"),
    (f"k1 {B1}\n", 0o604, "(mode 0604)"),
    ("\n# nothing\n", 0o600, "holds no key"),
    ("k1 ***\n", 0o600, "line 1: key k1 is not base64"),
])
def test_a_bad_keys_file_is_refused_in_one_line_naming_it(tmp_path: Path, text: str, mode: int,
                                                         message: str) -> None:
    path = keys_file(tmp_path / "keys", text, mode)
    with pytest.raises(ConfigError) as caught:
        resolve_keys(str(path))
    said = str(caught.value)
    assert message in said and str(path) in said and "\n" not in said and B1 not in said and B2 not in said


def test_the_keys_come_from_the_variable_or_the_credential_and_must_agree(tmp_path: Path) -> None:
    assert resolve_keys(None, environ={}) is None
    credentials = tmp_path / "credentials"
    credentials.mkdir()
    keys_file(credentials / "mysqlq.keys", f"k1 {B1}\n", 0o400)
    environ = {"CREDENTIALS_DIRECTORY": str(credentials)}
    assert resolve_keys(None, environ=environ) == Keyring([("k1", K1)])
    same = keys_file(tmp_path / "same", f"k1 {B1}\n")
    assert resolve_keys(str(same), environ=environ) == Keyring([("k1", K1)])
    other = keys_file(tmp_path / "other", f"k2 {B2}\n")
    with pytest.raises(ConfigError, match=r"given both by MYSQLQ_ENCRYPTION_KEYS_FILE .* and by the credential "
                                          r"mysqlq\.keys .*, differently"):
        resolve_keys(str(other), environ=environ)
    assert resolve_keys(str(other), typed=True, environ=environ) == Keyring([("k2", K2)])  # typed wins
    with pytest.raises(ConfigError, match=r"names .*missing, which does not exist"):
        resolve_keys(str(tmp_path / "missing"))


def test_a_new_key_line_is_a_fresh_32_byte_key() -> None:
    first, second = new_key_line("k1"), new_key_line()
    assert first.split()[0] == "k1" and second.split()[0].startswith("k20")
    assert len(base64.b64decode(first.split()[1])) == 32 and first.split()[1] != second.split()[1]
    with pytest.raises(ConfigError, match="a key id is"):
        new_key_line("bad id")
