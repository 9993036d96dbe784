"""`mysqlq install-systemd --web`: mysqlq-web.service, hardened like the workers' unit, its token
in an env file and never on the command line (all offline)."""

from __future__ import annotations

import stat
from pathlib import Path

import pytest

from mysqlq.cli.deploy import TEMPLATE_DIR, WEB_UNIT, render_unit

from ..conftest import MYSQLQ
from .test_systemd_unit import MAX_EXPOSURE, analyze, exposure, install


def test_install_web_writes_the_unit_and_a_private_env_file(tmp_path: Path) -> None:
    result = install(tmp_path, "--name", "worker", "--web")
    assert result.returncode == 0, result.stderr
    unit = (tmp_path / "etc/systemd/system" / WEB_UNIT).read_text()
    assert f"\nExecStart={MYSQLQ} web\n" in unit  # no --token: it comes from the env file
    assert "\nEnvironmentFile=-/etc/mysqlq/mysqlq.env\nEnvironmentFile=-/etc/mysqlq/web.env\n" in unit
    env = tmp_path / "etc/mysqlq/web.env"
    assert stat.S_IMODE(env.stat().st_mode) == 0o600
    assert "#MYSQLQ_WEB_TOKEN=" in env.read_text() and "#MYSQLQ_WEB_BIND=" in env.read_text()
    assert (tmp_path / "etc/systemd/system/worker@.service").exists()  # the workers' units as before
    assert f"systemctl enable --now {WEB_UNIT}" in result.stdout

    env.write_text("MYSQLQ_WEB_TOKEN=x" * 2 + "\n")
    again = install(tmp_path, "--name", "worker", "--web")
    assert f"kept {env}" in again.stdout and env.read_text() == "MYSQLQ_WEB_TOKEN=x" * 2 + "\n"


def test_without_web_no_web_unit(tmp_path: Path) -> None:
    assert install(tmp_path).returncode == 0
    assert not (tmp_path / "etc/systemd/system" / WEB_UNIT).exists()
    assert not (tmp_path / "etc/mysqlq/web.env").exists()


@pytest.mark.parametrize("as_root", [False, True], ids=["dynamic-user", "root"])
def test_the_web_unit_verifies_silently_and_its_exposure_is_low(tmp_path: Path, as_root: bool) -> None:
    unit = tmp_path / WEB_UNIT
    unit.write_text(render_unit((TEMPLATE_DIR / WEB_UNIT).read_text(), Path(MYSQLQ), as_root=as_root))
    result = analyze("verify", str(unit))
    assert (result.returncode, result.stderr, result.stdout) == (0, "", "")
    assert ("DynamicUser=yes" in unit.read_text()) is not as_root
    assert exposure(unit) <= MAX_EXPOSURE
