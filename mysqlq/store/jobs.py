"""Producer statements: inserting jobs, one at a time or many per statement."""

from __future__ import annotations

import contextlib
import operator
from collections.abc import Iterator, Sequence
from functools import cache
from typing import Any

from ..db import Connection, Cursor
from ..sql import query

# Columns of a job row (mysqlq.jobs.Job.row) whose values repeat from job to job (queue, handler,
# status, priority, delay, max_attempts, time_limit, dedupe_scope): a bulk insert renders the
# row's template with their literals once per distinct combination. Job.row gives them as str,
# int or None only, so equal values render alike (1 and True would both be 1).
REPEATING = operator.itemgetter(0, 1, 3, 4, 6, 7, 8, 10)


@cache
def _statement(name: str) -> bytes:
    """A named statement as the bytes the driver sends (ASCII; encoded once, not per call)."""
    return query(name).encode()


def insert_job(cur: Cursor, row: Sequence[Any]) -> int:
    """Insert one job; returns its id (the existing job's id when its dedupe key is taken)."""
    cur.execute(_statement("insert_job"), tuple(row))
    return int(cur.lastrowid or cur.connection.insert_id())


class RowRenderer:
    """Renders job rows as insert_jobs' VALUES list, each value escaped by the connection's own
    ``literal`` (what ``cursor.execute`` does with parameters). The literals of the repeating
    columns are escaped once per distinct combination, into a row template whose remaining
    placeholders take the payload, run_at and dedupe key of each row."""

    def __init__(self, conn: Connection) -> None:
        self.literal = conn.literal
        self.template = _statement("job_values")
        self._shapes: dict[tuple[Any, ...], bytes] = {}

    def _shape(self, repeating: tuple[Any, ...]) -> bytes:
        """job_values with the repeating columns filled in (their % doubled, to survive the next %)."""
        queue, handler, status, priority, delay_us, attempts, time_limit, scope = (
            self.literal(value).replace(b"%", b"%%") for value in repeating)
        return self.template % (queue, handler, b"%s", status, priority, b"%s", delay_us, attempts,
                                time_limit, b"%s", scope)

    def values(self, rows: Sequence[Sequence[Any]]) -> bytes:
        literal, shapes = self.literal, self._shapes
        rendered = []
        for row in rows:
            repeating = REPEATING(row)
            shape = shapes.get(repeating)
            if shape is None:
                shape = shapes[repeating] = self._shape(repeating)
            run_at, dedupe_key = row[5], row[9]
            rendered.append(shape % (literal(row[2]), b"NULL" if run_at is None else literal(run_at),
                                     b"NULL" if dedupe_key is None else literal(dedupe_key)))
        return b",".join(rendered)

    def statement(self, rows: Sequence[Sequence[Any]]) -> bytes:
        """One insert_jobs statement for these rows."""
        head, tail = _statement("insert_jobs").split(b"{rows}")
        return head + self.values(rows) + tail


class BulkInsert:
    """Multi-row inserts sent one ahead: each statement goes to the server at once, and its result is
    read only when the next is ready (or at the end), so the server inserts one chunk while the
    caller checks and renders the next. At most one statement is in flight."""

    def __init__(self, cur: Cursor) -> None:
        self.conn: Connection = cur.connection
        self.render = RowRenderer(self.conn)
        self._in_flight = False

    def send(self, rows: Sequence[Sequence[Any]]) -> int:
        """Send an insert of ``rows`` without waiting for it; returns how many rows the previous
        insert added (0 for the first)."""
        added = self.wait()
        if rows:
            statement = self.render.statement(rows)
            self.conn.send_query(statement)
            self._in_flight = True
        return added

    def wait(self) -> int:
        """Wait for the insert in flight, if any; returns how many rows it added (a row whose dedupe
        key is taken is not added)."""
        if not self._in_flight:
            return 0
        self._in_flight = False
        self.conn.read_query_result()
        return int(self.conn.affected_rows())


@contextlib.contextmanager
def bulk_insert(cur: Cursor) -> Iterator[BulkInsert]:
    """A BulkInsert whose statement in flight is always read, so that the connection can be used
    (rolled back) after an error raised while it was out."""
    bulk = BulkInsert(cur)
    try:
        yield bulk
    except BaseException:
        with contextlib.suppress(Exception):
            bulk.wait()
        raise
