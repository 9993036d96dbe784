"""`mysqlq install-systemd` sets the units up to take their secrets as systemd credentials: the
LoadCredential= lines (LoadCredentialEncrypted= with --credentials encrypted), a credential store
that is root's alone, env files without a secret, and next steps that say where the DSN goes."""

from __future__ import annotations

import stat
import subprocess
from pathlib import Path

import pytest

from ..conftest import MYSQLQ
from .test_systemd_unit import MAX_EXPOSURE, analyze, exposure

CREDENTIALS = ("mysqlq.dsn", "mysqlq.password")


def install(root: Path, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([MYSQLQ, "install-systemd", "--root", str(root), "--no-reload", "--name", "worker", "--web",
                           *args], capture_output=True, text=True, check=False)


def loaded(unit: Path) -> list[str]:
    return [line for line in unit.read_text().splitlines() if line.startswith("LoadCredential")]


def test_the_units_load_the_secrets_from_the_credential_store(tmp_path: Path) -> None:
    result = install(tmp_path)
    assert result.returncode == 0, result.stderr
    units = tmp_path / "etc/systemd/system"
    assert loaded(units / "worker@.service") == [f"LoadCredential={name}" for name in (*CREDENTIALS, "mysqlq.keys")]
    assert loaded(units / "mysqlq-web.service") == [
        f"LoadCredential={name}" for name in (*CREDENTIALS, "mysqlq.web-token")]
    store = tmp_path / "etc/credstore"
    assert stat.S_IMODE(store.stat().st_mode) == 0o700 and list(store.iterdir()) == []
    assert f"made {store}" in result.stdout
    # No secret is asked for in the env files: the DSN's example there has no password.
    env = (tmp_path / "etc/mysqlq/mysqlq.env").read_text()
    assert "\n#MYSQLQ_DSN=mysql://mysqlq@db.example.com:3306/app\n" in env and "/etc/credstore/mysqlq.dsn" in env
    assert "/etc/credstore/mysqlq.web-token" in (tmp_path / "etc/mysqlq/web.env").read_text()
    steps = result.stdout
    assert "next: write the DSN into /etc/credstore/mysqlq.dsn with `sudoedit /etc/credstore/mysqlq.dsn`" in steps
    assert "run `mysqlq --env-file /etc/mysqlq/mysqlq.env --dsn-file /etc/credstore/mysqlq.dsn migrate`" in steps


def test_encrypted_credentials_and_a_store_of_their_own(tmp_path: Path) -> None:
    result = install(tmp_path, "--credentials", "encrypted")
    assert result.returncode == 0, result.stderr
    units = tmp_path / "etc/systemd/system"
    assert loaded(units / "worker@.service") == [
        f"LoadCredentialEncrypted={name}" for name in (*CREDENTIALS, "mysqlq.keys")]
    assert loaded(units / "mysqlq-web.service")[-1] == "LoadCredentialEncrypted=mysqlq.web-token"
    assert stat.S_IMODE((tmp_path / "etc/credstore.encrypted").stat().st_mode) == 0o700
    assert "systemd-creds encrypt --name=mysqlq.dsn - /etc/credstore.encrypted/mysqlq.dsn" in result.stdout
    assert "systemd-creds decrypt /etc/credstore.encrypted/mysqlq.dsn - | mysqlq --env-file /etc/mysqlq/mysqlq.env " \
           "--dsn-file /dev/stdin migrate" in result.stdout


def test_an_existing_store_is_kept_as_it_is(tmp_path: Path) -> None:
    store = tmp_path / "etc/credstore"
    store.mkdir(parents=True, mode=0o750)
    (store / "other.secret").write_text("x")
    result = install(tmp_path)
    assert result.returncode == 0 and f"kept {store}" in result.stdout
    assert stat.S_IMODE(store.stat().st_mode) == 0o750 and (store / "other.secret").read_text() == "x"


@pytest.mark.parametrize("credentials", ["plain", "encrypted"])
def test_the_units_with_credentials_verify_silently_and_stay_hardened(tmp_path: Path, credentials: str) -> None:
    assert install(tmp_path, "--credentials", credentials).returncode == 0
    for unit in ("worker@.service", "mysqlq-web.service"):
        path = tmp_path / "etc/systemd/system" / unit
        verified = analyze("verify", str(path))
        assert verified.stderr == "" and verified.returncode == 0, verified.stderr
        assert exposure(path) <= MAX_EXPOSURE
