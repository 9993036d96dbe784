"""`make demo` (scripts/demo) shows a new user the demo's handlers, not the test suite's, and the workers
as deployed: `mysqlq install-systemd`, `systemctl start worker@1 worker@2`, `systemctl status`, a job's
`journalctl -u 'worker@*' JOB_ID=N` and a clean `systemctl stop`, under a private systemd where one can
run (two foreground workers, and why, where none can)."""

from __future__ import annotations

import json
import re
import subprocess
import sys
from pathlib import Path

import pytest
from mysqlq_harness.jobs import EVERY_JOB
from mysqlq_harness.systemd import missing_prerequisites

from ..conftest import MYSQLQ, REPO, MariaDBServer, QueueDB, private_systemd, with_database


def test_demo_lists_only_its_own_handlers(qdb: QueueDB) -> None:
    # The venv holds the test package too (that is the point of the test): the demo must not show it.
    installed = json.loads(subprocess.run([MYSQLQ, "handlers", "--json"], capture_output=True, text=True,
                                          check=True).stdout)
    assert any(item["name"].startswith("test.") for item in installed)

    env = qdb.env(MYSQLQ_DEMO_DIR=str(qdb.tmp / "demo"))
    result = subprocess.run([sys.executable, str(REPO / "scripts" / "demo")], env=env, capture_output=True,
                            text=True, timeout=300, check=False)
    assert result.returncode == 0, result.stdout + result.stderr
    section = result.stdout.split("mysqlq handlers:", 1)[1].split("==>", 1)[0]
    listed = [line.split()[0] for line in section.splitlines()[1:] if line.strip() and not line.startswith("(")]
    assert {"demo.greet", "demo.resize", "demo.flaky"} <= set(listed)
    assert not [name for name in listed if name.startswith("test.")]
    assert "test." not in section
    assert qdb.statuses().get("done", 0) > 250  # and the demo itself ran

    out = result.stdout
    if Path("/run/systemd/system").is_dir() or missing_prerequisites() is None:
        name = "mysqlq-demo" if Path("/run/systemd/system").is_dir() else "worker"
        assert f"$ {MYSQLQ} install-systemd --name {name}" in out
        assert f"$ systemctl start {name}@1 {name}@2" in out
        assert out.count('Status: "idle; ') == 2 and out.count("Active: active (running)") == 2  # systemctl status
        story = re.search(rf"\$ journalctl --no-pager -u '{name}@\*' JOB_ID=(\d+)\n(.*?)\n\n", out, re.S)
        assert story, out
        assert re.search(rf"mysqlq\[\d+\]: job\.done job_id={story[1]} ", story[2]), story[2]
        assert f"{name}@1: inactive (success)" in out and f"{name}@2: inactive (success)" in out
        workers = {row[0] for row in qdb.query(f"SELECT DISTINCT worker FROM {EVERY_JOB} WHERE status = 'done'")}
        assert workers == {"1", "2"}  # the units' instance names
    else:
        assert "in the foreground (--burst: exit when nothing is left), not under systemd: " in out


@pytest.mark.slow
def test_on_a_machine_whose_pid_1_is_systemd_the_demo_leaves_nothing_behind(
        qdb: QueueDB, mariadb: MariaDBServer, tmp_path: Path) -> None:
    """The demo run where systemd is PID 1 (inside a private systemd, as on a server): its units have a
    name of their own, and every file the installer and the demo wrote is gone afterwards."""
    systemd = private_systemd(mariadb, tmp_path / "systemd")
    assert mariadb.tcp_dsn is not None
    env = {"MYSQLQ_DSN": with_database(mariadb.tcp_dsn, qdb.name), "MYSQLQ_DEMO_DIR": "/tmp/demo", "HOME": "/root"}
    listing = "find /etc/systemd/system /etc/mysqlq /etc/credstore -maxdepth 2 2>/dev/null | sort"
    with systemd:
        before = systemd.run("sh", "-c", listing, check=False).stdout
        result = systemd.run(sys.executable, str(REPO / "scripts" / "demo"), env=env, check=False, timeout=300)
        after = systemd.run("sh", "-c", listing, check=False).stdout
        units = systemd.systemctl("list-units", "--all", "--plain", "--no-legend", "mysqlq-demo*").stdout
    assert result.returncode == 0, result.stdout + result.stderr
    assert "under this machine's systemd" in result.stdout
    assert "$ systemctl start mysqlq-demo@1 mysqlq-demo@2" in result.stdout
    assert "mysqlq-demo@1: inactive (success)" in result.stdout
    assert after == before and units.strip() == ""
    assert qdb.statuses().get("done", 0) > 250
