"""Secrets from files and systemd credentials (mysqlq.core.secrets), without a server: where the DSN,
its password and the dashboard's token are read from, which place wins, and the one-line errors,
none of which shows what a file holds."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from mysqlq.core import secrets
from mysqlq.core.config import DEFAULT_DSN, Dsn, dsn_from_environment, resolve_dsn
from mysqlq.core.errors import ConfigError

from ..conftest import MYSQLQ

SECRET = "s3cr3t-Pa55"
DSN = f"mysql://app:{SECRET}@db.example.com:3307/shop"


def write(path: Path, text: str | bytes) -> Path:
    if isinstance(text, bytes):
        path.write_bytes(text)
    else:
        path.write_text(text, encoding="utf-8")
    return path


def refused(call: object, *args: object, **kwargs: object) -> str:
    """The one-line message of the ConfigError that ``call`` raises; it never shows the secret."""
    assert callable(call)
    with pytest.raises(ConfigError) as caught:
        call(*args, **kwargs)
    message = str(caught.value)
    assert "\n" not in message and SECRET not in message
    return message


# ------------------------------------------------------------------------------------ reading a file

@pytest.mark.parametrize("text", [SECRET, SECRET + "\n", SECRET + "\r\n"])
def test_one_trailing_newline_is_dropped(tmp_path: Path, text: str) -> None:
    assert secrets.read_secret(write(tmp_path / "s", text), "X") == SECRET


def test_spaces_inside_and_around_the_secret_are_kept(tmp_path: Path) -> None:
    assert secrets.read_secret(write(tmp_path / "s", " a b \n"), "X") == " a b "


@pytest.mark.parametrize(("text", "expected"), [
    ("", "is empty"),
    ("\n", "is empty"),
    ("  \t\n", "is empty"),
    (SECRET + "\n\n", "holds more than one line"),
    (f"{SECRET}\nsecond line\n", "holds more than one line"),
    (b"\xff\xfe" + SECRET.encode(), "is not UTF-8 text"),
    ("x" * (secrets.MAX_BYTES + 1), "is larger than 64 KiB"),
])
def test_a_file_that_cannot_be_a_secret_is_refused(tmp_path: Path, text: str | bytes, expected: str) -> None:
    path = write(tmp_path / "s", text)
    assert refused(secrets.read_secret, path, "MYSQLQ_DSN_FILE") == f"{path} (MYSQLQ_DSN_FILE) {expected}" + (
        ": put the secret alone on one line" if "line" in expected else
        ": a secret file holds one line" if "KiB" in expected else "")


def test_a_missing_file_and_a_directory_are_named(tmp_path: Path) -> None:
    missing = tmp_path / "nowhere"
    assert refused(secrets.read_secret, missing, "MYSQLQ_DSN_FILE") == \
        f"MYSQLQ_DSN_FILE names {missing}, which does not exist"
    assert refused(secrets.read_secret, tmp_path, "--dsn-file") == \
        f"--dsn-file names {tmp_path}, which is a directory, not the file holding the secret"


def test_an_unreadable_file_says_permission_denied(tmp_path: Path) -> None:
    path = write(tmp_path / "s", SECRET)
    path.chmod(0o600)
    if os.geteuid() != 0:
        path.chmod(0)
        message = refused(secrets.read_secret, path, "MYSQLQ_DSN_FILE")
    else:  # root reads anything: read it as nobody
        if shutil.which("setpriv") is None:
            pytest.fail("setpriv is needed to read a file as another user")
        tmp_path.chmod(0o755)
        code = ("import sys; from mysqlq.core import secrets\n"
                "try: secrets.read_secret(__import__('pathlib').Path(sys.argv[1]), 'MYSQLQ_DSN_FILE')\n"
                "except Exception as e: print(e)")
        result = subprocess.run(["setpriv", "--reuid=65534", "--regid=65534", "--clear-groups", "--",
                                 sys.executable, "-c", code, str(path)],
                                capture_output=True, text=True, check=False, env={**os.environ, "HOME": "/"})
        message = result.stdout.strip()
        assert result.returncode == 0 and SECRET not in message, result.stderr
    assert message == f"cannot read {path} (MYSQLQ_DSN_FILE): permission denied (run as a user who may read it, " \
                      "e.g. with sudo)"


# ------------------------------------------------------------------------------------ the DSN

def test_the_dsn_from_each_place(tmp_path: Path) -> None:
    expected = Dsn.parse(DSN)
    assert resolve_dsn(DSN, environ={}) == expected
    assert resolve_dsn(dsn_file=str(write(tmp_path / "dsn", DSN + "\n")), environ={}) == expected
    credentials = tmp_path / "credentials"
    credentials.mkdir()
    write(credentials / "mysqlq.dsn", DSN + "\n")
    assert resolve_dsn(environ={"CREDENTIALS_DIRECTORY": str(credentials)}) == expected
    assert resolve_dsn(environ={}) == Dsn.parse(DEFAULT_DSN)
    # A credentials directory without mysqlq's credentials (another unit's, or none loaded) is no DSN.
    assert resolve_dsn(environ={"CREDENTIALS_DIRECTORY": str(tmp_path / "none")}) == Dsn.parse(DEFAULT_DSN)


def test_dsn_from_environment_reads_the_variables_and_the_credentials(tmp_path: Path) -> None:
    path = write(tmp_path / "dsn", DSN)
    assert dsn_from_environment({"MYSQLQ_DSN_FILE": str(path)}) == Dsn.parse(DSN)
    assert dsn_from_environment({"MYSQLQ_DSN": "", "MYSQLQ_DSN_FILE": str(path)}) == Dsn.parse(DSN)


def test_places_that_agree_are_fine_and_places_that_differ_are_refused(tmp_path: Path) -> None:
    same = write(tmp_path / "same", DSN + "\n")
    other = write(tmp_path / "other", DSN.replace("shop", "other"))
    # The same DSN written differently (spaces around it) still agrees.
    assert resolve_dsn(f" {DSN} ", str(same), environ={}) == Dsn.parse(DSN)
    message = refused(resolve_dsn, DSN, str(other), environ={})
    assert message == f"the DSN is given both by MYSQLQ_DSN and by MYSQLQ_DSN_FILE ({other}), differently: " \
                      "keep one of them"
    credentials = tmp_path / "credentials"
    credentials.mkdir()
    write(credentials / "mysqlq.dsn", DSN.replace("shop", "other"))
    message = refused(resolve_dsn, DSN, environ={"CREDENTIALS_DIRECTORY": str(credentials)})
    assert "MYSQLQ_DSN and by the credential mysqlq.dsn" in message


def test_a_value_typed_on_the_command_line_wins_over_the_rest(tmp_path: Path) -> None:
    other = write(tmp_path / "other", DSN.replace("shop", "other"))
    credentials = tmp_path / "credentials"
    credentials.mkdir()
    write(credentials / "mysqlq.dsn", "not even a DSN")
    env = {"CREDENTIALS_DIRECTORY": str(credentials)}
    assert resolve_dsn(DSN, str(other), typed={"dsn"}, environ=env) == Dsn.parse(DSN)
    assert resolve_dsn(DSN, str(other), typed={"dsn_file"}, environ=env).database == "other"
    assert "--dsn and by --dsn-file" in refused(resolve_dsn, DSN, str(other), typed={"dsn", "dsn_file"})


def test_a_bad_dsn_in_a_file_names_the_file_and_hides_the_password(tmp_path: Path) -> None:
    path = write(tmp_path / "dsn", f"MYSQLQ_DSN={DSN}\n")  # an env file's line copied whole
    message = refused(resolve_dsn, dsn_file=str(path), environ={})
    assert message.startswith(f"MYSQLQ_DSN_FILE ({path}): DSN must start with mysql://")
    assert "is empty: name the file" in refused(resolve_dsn, dsn_file="", typed={"dsn_file"})


def test_the_password_alone_needs_no_url_encoding(tmp_path: Path) -> None:
    password = "p@ss:w/rd%20#?"
    path = write(tmp_path / "password", password + "\n")
    dsn = resolve_dsn("mysql://app@db/shop", password_file=str(path), environ={})
    assert (dsn.user, dsn.password, dsn.host, dsn.database) == ("app", password, "db", "shop")
    assert password not in repr(dsn) and password not in dsn.redacted()
    credentials = tmp_path / "credentials"
    credentials.mkdir()
    write(credentials / "mysqlq.password", password)
    from_credential = resolve_dsn("mysql://app@db/shop", environ={"CREDENTIALS_DIRECTORY": str(credentials)})
    assert from_credential == dsn


def test_a_password_given_twice_differently_is_refused(tmp_path: Path) -> None:
    path = write(tmp_path / "password", "another")
    assert resolve_dsn(DSN, password_file=str(write(tmp_path / "same", SECRET)), environ={}).password == SECRET
    assert refused(resolve_dsn, DSN, password_file=str(path), environ={}) == \
        f"the DSN from MYSQLQ_DSN has a password, and MYSQLQ_PASSWORD_FILE ({path}) gives another: keep one of them"


# ------------------------------------------------------------------------------------ the dashboard's token

def test_the_token_from_each_place_and_which_wins(tmp_path: Path) -> None:
    token = "t" * 24
    path = write(tmp_path / "token", token + "\n")
    credentials = tmp_path / "credentials"
    credentials.mkdir()
    env = {"CREDENTIALS_DIRECTORY": str(credentials)}
    assert secrets.resolve_token(environ=env) is None
    assert secrets.resolve_token(token_file=str(path), environ={}) == (token, secrets.Source(
        "MYSQLQ_WEB_TOKEN_FILE", path=path))
    write(credentials / "mysqlq.web-token", token)
    found = secrets.resolve_token(environ=env)
    assert found is not None and found[0] == token and found[1].label == "the credential mysqlq.web-token"
    assert secrets.resolve_token(token, str(path), environ=env) is not None  # all three agree
    assert "MYSQLQ_WEB_TOKEN and by the credential" in refused(secrets.resolve_token, "u" * 24, environ=env)
    typed = secrets.resolve_token("u" * 24, typed={"token"}, environ=env)
    assert typed is not None and typed[0] == "u" * 24
    assert "u" * 24 not in repr(typed[1])  # a place given inline does not show its value


# ------------------------------------------------------------------------------------ through the command

def cli(*args: str, **env: str) -> subprocess.CompletedProcess[str]:
    environ = {key: value for key, value in os.environ.items()
               if not key.startswith("MYSQLQ_") and key != "CREDENTIALS_DIRECTORY"}
    return subprocess.run([MYSQLQ, *args], capture_output=True, text=True, check=False, timeout=60,
                          env={**environ, "MYSQLQ_LOG_FORMAT": "console", **env})


def test_the_command_refuses_in_one_line_before_connecting(tmp_path: Path) -> None:
    other = write(tmp_path / "dsn", DSN.replace("shop", "other"))
    result = cli("stats", MYSQLQ_DSN=DSN, MYSQLQ_DSN_FILE=str(other))
    assert result.returncode == 1 and SECRET not in result.stderr
    assert result.stderr == f"mysqlq: error: the DSN is given both by MYSQLQ_DSN and by MYSQLQ_DSN_FILE ({other}), " \
                            "differently: keep one of them\n"
    result = cli("--dsn-file", str(tmp_path / "nowhere"), "stats")
    assert result.stderr == f"mysqlq: error: --dsn-file names {tmp_path / 'nowhere'}, which does not exist\n"
    short = write(tmp_path / "token", "short\n")
    result = cli("web", MYSQLQ_WEB_TOKEN_FILE=str(short))
    assert result.returncode == 1
    assert result.stderr == f"mysqlq: error: MYSQLQ_WEB_TOKEN_FILE ({short}) must be at least 16 characters " \
                            "(e.g. `openssl rand -hex 24`)\n"


def test_every_command_shows_the_file_options_and_their_variables() -> None:
    shown = " ".join(cli("stats", "--help").stdout.split())
    for text in ("--dsn-file PATH", "env var: MYSQLQ_DSN_FILE", "--password-file PATH", "env var: MYSQLQ_PASSWORD_FILE",
                 f"default: {DEFAULT_DSN}"):
        assert text in shown
    assert "env var: MYSQLQ_WEB_TOKEN_FILE" in " ".join(cli("web", "--help").stdout.split())


def test_a_library_user_gets_the_dsn_from_a_file_or_a_credential_too(tmp_path: Path,
                                                                     monkeypatch: pytest.MonkeyPatch) -> None:
    from mysqlq import Settings

    monkeypatch.delenv("MYSQLQ_DSN", raising=False)
    monkeypatch.setenv("MYSQLQ_DSN_FILE", str(write(tmp_path / "dsn", DSN + "\n")))
    assert Settings().dsn == Dsn.parse(DSN)  # mysqlq.Producer() reads what the workers read
    monkeypatch.delenv("MYSQLQ_DSN_FILE")
    credentials = tmp_path / "credentials"
    credentials.mkdir()
    write(credentials / "mysqlq.dsn", DSN)
    monkeypatch.setenv("CREDENTIALS_DIRECTORY", str(credentials))
    assert Settings().dsn == Dsn.parse(DSN)
