"""The only code that runs SQL: small functions over a cursor, one module per concern.

Each function runs statements by name (``-- name: x`` headers in the ``*.sql`` files of
``mysqlq/store/sql/``, loaded by ``mysqlq.store.sql.queries``); callers decide the retry
(``mysqlq.store.db.Database.run``) and the transaction.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from mysqlq.store.db import Cursor
from mysqlq.store.sql import query


def expand(name: str, count: int) -> str:
    """The statement ``name`` with ``{ids}`` replaced by ``count`` placeholders (NULL when empty)."""
    marks = ", ".join(["%s"] * count) if count else "NULL"
    return query(name).replace("{ids}", marks)


def execute(cur: Cursor, name: str, params: Mapping[str, Any] | Sequence[Any] | None = None) -> int:
    """Run a named statement; returns the affected row count."""
    return int(cur.execute(query(name), params))


def execute_in(cur: Cursor, name: str, items: Sequence[object], *extra: object, before: Sequence[object] = ()) -> int:
    """Run a named statement whose ``{ids}`` list is ``items``; positional params around it."""
    return int(cur.execute(expand(name, len(items)), [*before, *items, *extra]))
