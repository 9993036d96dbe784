"""The web sits above the store, the hint, the producer and the leader: it never reaches the worker or
the command line (not even through another module), and it holds no SQL of its own."""

from __future__ import annotations

import ast
import re

import grimp

from ..conftest import REPO

WEB = REPO / "mysqlq" / "web"
SQL = re.compile(r"\b(SELECT\s.+\sFROM|INSERT\s+INTO|UPDATE\s+\w+\s+SET|DELETE\s+FROM|REPLACE\s+INTO)\b", re.S)


def test_the_web_never_imports_the_worker_or_the_cli() -> None:
    graph = grimp.build_graph("mysqlq", exclude_type_checking_imports=True)
    for below in ("mysqlq.worker", "mysqlq.cli"):
        chain = graph.find_shortest_chain(importer="mysqlq.web", imported=below, as_packages=True)
        assert chain is None, " -> ".join(chain or ())


def test_every_statement_the_web_runs_is_in_the_store() -> None:
    for path in sorted(WEB.rglob("*.py")):
        for node in ast.walk(ast.parse(path.read_text(), str(path))):
            if isinstance(node, ast.Constant) and isinstance(node.value, str):
                assert not SQL.search(node.value), f"{path.relative_to(REPO)}:{node.lineno}: {node.value!r}"
