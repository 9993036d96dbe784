"""The unit files and `mysqlq install-systemd`: what is written where, `systemd-analyze verify` with
nothing on stderr, and the exposure score of `systemd-analyze security` (all offline)."""

from __future__ import annotations

import re
import shutil
import stat
import subprocess
from pathlib import Path

import pytest

from mysqlq.cli.deploy import TEMPLATE, TEMPLATE_DIR, hidden_from_others, needs_home, render_unit

from ..conftest import MYSQLQ, unavailable

MAX_EXPOSURE = 2.0  # "OK" is below 4.0; the unit scores about 1.1 (1.5 when it has to run as root)


def install(root: Path, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([MYSQLQ, "install-systemd", "--root", str(root), "--no-reload", *args],
                          capture_output=True, text=True, check=False)


def analyze(*args: str) -> subprocess.CompletedProcess[str]:
    if shutil.which("systemd-analyze") is None:
        unavailable("systemd-analyze is not installed")
    return subprocess.run(["systemd-analyze", *args], capture_output=True, text=True, check=False)


def exposure(unit: Path) -> float:
    result = analyze("security", "--offline=true", "--no-pager", str(unit))
    found = re.search(r"Overall exposure level for \S+: (\d+\.\d+)", result.stdout)
    assert found, result.stdout + result.stderr
    return float(found.group(1))


def test_install_writes_the_template_under_the_asked_name_with_this_mysqlq(tmp_path: Path) -> None:
    result = install(tmp_path, "--name", "worker")
    assert result.returncode == 0, result.stderr
    unit = (tmp_path / "etc/systemd/system/worker@.service").read_text()
    assert f"\nExecStart={MYSQLQ} worker --name %i\n" in unit
    assert "@MYSQLQ@" not in unit
    assert "\nType=notify\n" in unit and "\nWatchdogSec=" in unit and "\nRestart=on-failure\n" in unit
    assert "\nEnvironmentFile=-/etc/mysqlq/mysqlq.env\nEnvironmentFile=-/etc/mysqlq/%i.env\n" in unit
    assert "\nWantedBy=%p.target\n" in unit and "\nPartOf=%p.target\n" in unit
    assert (tmp_path / "etc/systemd/system/worker.target").exists()

    env = tmp_path / "etc/mysqlq/mysqlq.env"
    assert stat.S_IMODE(env.stat().st_mode) == 0o600  # it will hold the database password
    lines = [line for line in env.read_text().splitlines() if line.strip()]
    assert lines and all(line.startswith("#") for line in lines)  # an example: every setting commented
    assert "#MYSQLQ_DSN=" in env.read_text()
    assert "systemctl start worker@1 worker@2" in result.stdout


def test_install_again_keeps_the_env_file_and_a_second_name_works(tmp_path: Path) -> None:
    assert install(tmp_path, "--name", "worker").returncode == 0
    env = tmp_path / "etc/mysqlq/mysqlq.env"
    env.write_text("MYSQLQ_DSN=mysql://app@db/app\n")
    again = install(tmp_path, "--name", "worker")
    assert again.returncode == 0
    assert "unchanged" in again.stdout and f"kept {env}" in again.stdout
    assert env.read_text() == "MYSQLQ_DSN=mysql://app@db/app\n"
    assert install(tmp_path).returncode == 0  # the default name: myjob@.service
    assert (tmp_path / "etc/systemd/system/myjob@.service").read_text() == (
        tmp_path / "etc/systemd/system/worker@.service"
    ).read_text()


@pytest.mark.parametrize("name", ["bad@name", "worker.service", "", "a b"])
def test_a_bad_unit_name_is_one_line_on_stderr(tmp_path: Path, name: str) -> None:
    result = install(tmp_path, "--name", name)
    assert result.returncode == 1
    assert result.stderr.startswith("mysqlq: error: unit name") and result.stderr.count("\n") == 1
    assert not (tmp_path / "etc").exists()


@pytest.mark.parametrize("as_root", [False, True], ids=["dynamic-user", "root"])
def test_systemd_analyze_verify_is_silent_and_the_exposure_low(tmp_path: Path, as_root: bool) -> None:
    unit = tmp_path / "worker@.service"
    unit.write_text(render_unit((TEMPLATE_DIR / TEMPLATE).read_text(), Path(MYSQLQ), as_root=as_root))
    shutil.copy(TEMPLATE_DIR / "myjob.target", tmp_path / "worker.target")
    for name in ("worker@.service", "worker@1.service", "worker.target"):
        result = analyze("verify", str(tmp_path / name))
        assert (result.returncode, result.stderr, result.stdout) == (0, "", ""), name
    assert ("DynamicUser=yes" in unit.read_text()) is not as_root
    assert exposure(unit) <= MAX_EXPOSURE


def test_protect_home_and_dynamic_user_follow_where_python_lives(tmp_path: Path) -> None:
    assert needs_home([Path("/root/.pyenv/versions/3.11/bin/python3")])
    assert needs_home([Path("/home/app/venv/lib/python3.11/site-packages")])
    assert not needs_home([Path("/opt/app/venv/bin/mysqlq"), Path("/usr/lib/python3.11")])
    text = render_unit((TEMPLATE_DIR / TEMPLATE).read_text(), Path("/x/mysqlq"), home_readable=True)
    assert "\nProtectHome=read-only\n" in text and "\nProtectHome=yes\n" not in text

    private = tmp_path / "private"
    (private / "bin").mkdir(parents=True)
    python = private / "bin" / "python3"
    python.write_text("")
    python.chmod(0o755)
    private.chmod(0o700)
    assert hidden_from_others([python, Path("/bin/sh")]) == [python]
