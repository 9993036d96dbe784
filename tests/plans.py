"""Reading a statement's plan on MariaDB and MySQL alike: EXPLAIN FORMAT=JSON in the layout both print
(MySQL 8.3+ prints a second layout unless asked for the first), its table accesses with the same
keys, and whether it sorts."""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from typing import Any

import MySQLdb


def explain_json(cur: Any, sql: str, params: Any = None) -> str:
    """``EXPLAIN FORMAT=JSON sql`` as text, in the layout MariaDB and MySQL 8.0 share."""
    with contextlib.suppress(MySQLdb.Error):  # MariaDB and MySQL before 8.3 know only that layout
        cur.execute("SET SESSION explain_json_format_version = 1")
    cur.execute("EXPLAIN FORMAT=JSON " + sql, params)
    return str(cur.fetchone()[0])


def sorts_rows(plan: str) -> bool:
    """Whether a plan sorts (MariaDB writes a "filesort" node, MySQL "using_filesort": true)."""
    return '"filesort"' in plan or '"using_filesort": true' in plan


def tables(node: Any) -> Iterator[dict[str, Any]]:
    """Every table access of a JSON plan, with ``rows`` as MariaDB names it (MySQL:
    rows_examined_per_scan)."""
    if isinstance(node, dict):
        if isinstance(node.get("table"), dict) and "access_type" in node["table"]:
            access = dict(node["table"])
            if "rows" not in access and "rows_examined_per_scan" in access:
                access["rows"] = access["rows_examined_per_scan"]
            yield access
        for value in node.values():
            yield from tables(value)
    elif isinstance(node, list):
        for value in node:
            yield from tables(value)


def on_mysql(conn: Any) -> bool:
    """Whether ``conn`` talks to MySQL (not MariaDB)."""
    with conn.cursor() as cur:
        cur.execute("SELECT VERSION()")
        return "mariadb" not in str(cur.fetchone()[0]).lower()


def reads_per_updated_row(conn: Any) -> int:
    """Handler_read_* reads an UPDATE … ORDER BY … LIMIT makes per row it changes: the index entry,
    then the row by position; MySQL's counters show a third (its read of the row before the change)."""
    return 3 if on_mysql(conn) else 2
