"""`make demo` (scripts/demo) shows a new user the demo's handlers, not the test suite's."""

from __future__ import annotations

import json
import subprocess
import sys

from .conftest import MYSQLQ, REPO, QueueDB


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
