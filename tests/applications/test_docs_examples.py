"""Every Python example of the README and the guides runs, against the test database, as a reader
would run it: alone, in a fresh interpreter, with MYSQLQ_DSN naming the database. An example that
cannot run alone says so on the line before it: ``<!-- example: not run (the reason) -->``."""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

import pytest

from ..conftest import REPO, QueueDB

NOT_RUN = re.compile(r"<!-- example: not run \((.+)\) -->\s*$")
SOURCES = [REPO / "README.md", *sorted((REPO / "docs").rglob("*.md"))]


def examples() -> list[tuple[str, str, str | None]]:
    """(where, code, reason not run) for every fenced python block."""
    found = []
    for source in SOURCES:
        lines = source.read_text(encoding="utf-8").splitlines()
        for n, line in enumerate(lines):
            if line.strip() != "```python":
                continue
            end = lines.index("```", n + 1)
            skipped = NOT_RUN.match(lines[n - 1]) if n else None
            where = f"{source.relative_to(REPO)}:{n + 1}"
            found.append((where, "\n".join(lines[n + 1:end]) + "\n", skipped.group(1) if skipped else None))
    return found


EXAMPLES = examples()


def test_the_guides_have_examples_and_few_are_not_run() -> None:
    assert len(EXAMPLES) >= 8
    assert sum(1 for _, _, reason in EXAMPLES if reason) <= 3


@pytest.mark.parametrize(("where", "code"), [(w, c) for w, c, reason in EXAMPLES if reason is None],
                         ids=[w for w, _, reason in EXAMPLES if reason is None])
def test_example_runs(qdb: QueueDB, tmp_path: Path, where: str, code: str) -> None:
    # The tables the examples write to, as an application would have them.
    qdb.query("CREATE TABLE orders (id INT PRIMARY KEY, total INT, confirmed TINYINT NOT NULL DEFAULT 0)")
    env = {key: value for key, value in qdb.env().items() if key != "MYSQLQ_LOG_FORMAT"}
    result = subprocess.run([sys.executable, "-c", code], cwd=tmp_path, env=env, capture_output=True, text=True,
                            timeout=120)
    assert result.returncode == 0, f"{where}:\n{result.stderr}"
