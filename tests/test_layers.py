"""The package's folders import only downward: cli → web → worker → leader → producer → hint →
store → core, and none of them imports an integration (mysqlq.contrib)."""

from __future__ import annotations

import os
import pathlib
import shutil
import subprocess
import sys

ROOT = pathlib.Path(__file__).resolve().parent.parent
LINT_IMPORTS = pathlib.Path(sys.executable).parent / "lint-imports"


def lint_imports(tree: pathlib.Path) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "PYTHONPATH": str(tree)}
    return subprocess.run([str(LINT_IMPORTS), "--config", str(tree / "pyproject.toml"), "--no-cache"],
                          cwd=tree, env=env, capture_output=True, text=True, timeout=120)


def test_every_import_runs_downward() -> None:
    result = lint_imports(ROOT)
    assert result.returncode == 0, result.stdout + result.stderr
    assert "0 broken" in result.stdout


def test_an_upward_import_is_caught(tmp_path: pathlib.Path) -> None:
    tree = tmp_path / "tree"
    shutil.copytree(ROOT / "mysqlq", tree / "mysqlq", ignore=shutil.ignore_patterns("__pycache__"))
    shutil.copy(ROOT / "pyproject.toml", tree / "pyproject.toml")
    store = tree / "mysqlq" / "store" / "stats.py"
    store.write_text(store.read_text() + "\nfrom mysqlq.worker import loop  # noqa: E402, F401\n")
    result = lint_imports(tree)
    assert result.returncode != 0
    assert "mysqlq.store.stats -> mysqlq.worker.loop" in result.stdout
