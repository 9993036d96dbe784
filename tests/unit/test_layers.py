"""The package's folders import only downward: cli and testing → web, worker and producer (side by
side: none imports another) → leader → hint → store → core; the producer never reaches the leader,
no modules import each other in a cycle, and no folder imports an integration (mysqlq.contrib)."""

from __future__ import annotations

import os
import pathlib
import shutil
import subprocess
import sys

from ..conftest import REPO

ROOT = REPO
LINT_IMPORTS = pathlib.Path(sys.executable).parent / "lint-imports"


def lint_imports(tree: pathlib.Path) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "PYTHONPATH": str(tree)}
    return subprocess.run([str(LINT_IMPORTS), "--config", str(tree / "pyproject.toml"), "--no-cache"],
                          cwd=tree, env=env, capture_output=True, text=True, timeout=120)


def test_every_import_runs_downward() -> None:
    result = lint_imports(ROOT)
    assert result.returncode == 0, result.stdout + result.stderr
    assert "0 broken" in result.stdout


def copied_tree(tmp_path: pathlib.Path) -> pathlib.Path:
    """A copy of the package and its contracts that a test may break."""
    tree = tmp_path / "tree"
    shutil.copytree(ROOT / "mysqlq", tree / "mysqlq", ignore=shutil.ignore_patterns("__pycache__"))
    shutil.copy(ROOT / "pyproject.toml", tree / "pyproject.toml")
    return tree


def add_import(tree: pathlib.Path, module: str, statement: str) -> None:
    path = tree / (module.replace(".", "/") + ".py")
    path.write_text(path.read_text() + f"\n{statement}  # noqa: E402, F401\n")


def test_an_upward_import_is_caught(tmp_path: pathlib.Path) -> None:
    tree = copied_tree(tmp_path)
    add_import(tree, "mysqlq.store.stats", "from mysqlq.worker import loop")
    result = lint_imports(tree)
    assert result.returncode != 0
    assert "mysqlq.store.stats -> mysqlq.worker.loop" in result.stdout


def test_an_import_between_side_by_side_parts_is_caught(tmp_path: pathlib.Path) -> None:
    tree = copied_tree(tmp_path)
    add_import(tree, "mysqlq.web.app", "from mysqlq.producer import enqueue")
    result = lint_imports(tree)
    assert result.returncode != 0
    assert "mysqlq.web.app -> mysqlq.producer.enqueue" in result.stdout


def test_an_import_cycle_is_caught(tmp_path: pathlib.Path) -> None:
    tree = copied_tree(tmp_path)
    add_import(tree, "mysqlq.core.journal", "from mysqlq.core import logs")
    result = lint_imports(tree)
    assert result.returncode != 0
    assert "No cycles are allowed in mysqlq.core" in result.stdout
