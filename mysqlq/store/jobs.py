"""Producer statements: inserting jobs, one at a time or many per statement."""

from __future__ import annotations

import contextlib
import json
import operator
from collections.abc import Callable, Iterator, Sequence
from functools import cache
from typing import Any

from mysqlq.core.jobs import JobState
from mysqlq.store import dedupe_periods, execute, fairness
from mysqlq.store.db import Connection, Cursor
from mysqlq.store.sql import query

# The columns of a job row (mysqlq.core.jobs.Job.row), in the order of job_values' placeholders.
NAMES = ("queue", "handler", "payload", "status", "priority", "run_at", "delay_us", "max_attempts",
         "time_limit", "dedupe_key", "dedupe_scope", "concurrency_key", "tags", "trace_context")
# Those that differ from job to job. The others (queue, handler, status, priority...) repeat: a row
# template is made with their literals filled in, once per distinct combination. Job.row gives them
# as str, int or None only, so equal values render alike (1 and True would both be 1).
PER_ROW = frozenset({"payload", "run_at", "delay_us", "dedupe_key", "concurrency_key", "tags", "trace_context"})
# job_values_due, for jobs due at once, has NOW(6) where job_values takes these two.
DUE_OMITS = frozenset({"run_at", "delay_us"})
MAX_SHAPES = 1000  # distinct combinations kept per renderer (and kind of row) before it starts afresh

TAGS = NAMES.index("tags")
FAIRNESS_KEY = len(NAMES)  # a job row's field after NAMES: its fairness key (mysqlq.store.fairness)
DEDUPE_PERIOD = FAIRNESS_KEY + 1  # its last: a DedupePeriod when its key is held for a period (dedupe_periods)
Quote = Callable[[Any], bytes]  # the connection's escaping of one value (conn.literal)
_REPEATING = operator.itemgetter(*[n for n, name in enumerate(NAMES) if name not in PER_ROW])


@cache
def _statement(name: str) -> bytes:
    """A job-inserting statement as the bytes the driver sends, ``{rows}`` left in (ASCII; encoded once)."""
    return query(name).encode()


@cache
def _around_rows(name: str) -> tuple[bytes, bytes]:
    """A job-inserting statement split at its ``{rows}``: what goes before the rows and after them."""
    head, tail = _statement(name).split(b"{rows}")
    return head, tail


@cache
def _single(name: str) -> bytes:
    """``name`` with its ``{rows}`` as one job_values row of placeholders, for the driver's binding."""
    return _statement(name).replace(b"{rows}", _statement("job_values"))


class _Kind:
    """One row template (job_values or job_values_due): which columns fill its placeholders."""

    def __init__(self, template: str, omitted: frozenset[str]) -> None:
        self.template = _statement(template)
        self.columns = [n for n, name in enumerate(NAMES) if name not in omitted]
        self.varying = [n for n in self.columns if NAMES[n] in PER_ROW]
        self.shapes: dict[tuple[Any, ...], bytes] = {}

    def shape(self, row: Sequence[Any], repeating: tuple[Any, ...], literal: Quote) -> bytes:
        """The template with this row's repeating columns filled in (their % doubled, to survive the next %)."""
        if len(self.shapes) >= MAX_SHAPES:
            self.shapes.clear()
        filled = tuple(b"%s" if NAMES[n] in PER_ROW else literal(row[n]).replace(b"%", b"%%") for n in self.columns)
        shape = self.shapes[repeating] = self.template % filled
        return shape


class RowRenderer:
    """Renders job rows as a statement's VALUES list, each value escaped by the connection's own
    ``literal`` (what ``cursor.execute`` does with parameters). The literals of the repeating columns
    are escaped once per distinct combination, into a row template whose remaining placeholders take
    each row's payload and dedupe key (and run_at and delay, unless the job is due at once: then the
    template is job_values_due, which the server evaluates faster).

    The templates hold bytes escaped for one connection character set: use a renderer only with
    connections opened alike (mysqlq's own, by mysqlq.store.db.connect).
    """

    def __init__(self) -> None:
        self.due = _Kind("job_values_due", DUE_OMITS)
        self.later = _Kind("job_values", frozenset())

    def values(self, rows: Sequence[Sequence[Any]], literal: Quote) -> bytes:
        due, later = self.due, self.later
        run_at, delay_us = NAMES.index("run_at"), NAMES.index("delay_us")
        rendered = []
        for row in rows:
            kind = due if row[run_at] is None and not row[delay_us] else later
            repeating = _REPEATING(row)
            shape = kind.shapes.get(repeating) or kind.shape(row, repeating, literal)
            rendered.append(shape % tuple([b"NULL" if row[n] is None else literal(row[n]) for n in kind.varying]))
        return b",".join(rendered)

    def statement(self, name: str, rows: Sequence[Sequence[Any]], literal: Quote) -> bytes:
        """The statement ``name`` (insert_job or insert_jobs) for these rows."""
        head, tail = _around_rows(name)
        return head + self.values(rows, literal) + tail

    def statement_with(self, name: str, rows: Sequence[Sequence[Any]], literal: Quote,
                       more: Sequence[Sequence[Any]]) -> bytes:
        """The statement ``name`` for these rows, each row's values followed by those of ``more``
        (the same number of rows): the columns ``name`` lists after a job row's (insert_fair_jobs)."""
        head, tail = _around_rows(name)
        rendered = [self.values((row,), literal)[:-1] + b"".join([b"," + literal(value) for value in extra]) + b")"
                    for row, extra in zip(rows, more, strict=True)]
        return head + b",".join(rendered) + tail


def insert_job(cur: Cursor, row: Sequence[Any], renderer: RowRenderer | None = None) -> int:
    """Insert one job; returns its id (the existing job's id when its dedupe key is taken).

    With a ``renderer`` (a producer's own connections), the row is rendered from its cached
    template; without (a caller's connection, whatever its character set), the driver binds it.
    A new job with tags gets its rows in mysqlq_job_tags too: call this in a transaction (the
    caller's), so that both are written or neither. A job with a fairness key takes its turn first
    (mysqlq.store.fairness); a job whose key is held for a period takes the key first, and is not
    inserted while another job holds it (mysqlq.store.dedupe_periods): the same transaction too.
    """
    return insert_job_counted(cur, row, renderer)[0]


def insert_job_counted(cur: Cursor, row: Sequence[Any], renderer: RowRenderer | None = None) -> tuple[int, bool]:
    """:func:`insert_job`, also returning whether the job is new (False: its dedupe key is taken)."""
    period = row[DEDUPE_PERIOD]
    if period is not None:
        holder = dedupe_periods.take(cur, period)
        if holder is not None:  # nothing written: the key's row is as it was
            return holder, False
    if row[FAIRNESS_KEY] is not None:
        fairness.insert(cur, (row,), renderer)
    elif renderer is None:
        cur.execute(_single("insert_job"), tuple(row[:FAIRNESS_KEY]))
    else:
        cur.execute(renderer.statement("insert_job", (row,), cur.connection.literal))
    job_id = int(cur.lastrowid or cur.connection.insert_id())
    new = cur.rowcount == 1
    if row[TAGS] is not None and new:  # a taken dedupe key: the existing job keeps its tags
        with cur.connection.cursor() as tag_cur:  # keeps ``cur.rowcount`` the job insert's
            _insert_tag_rows(tag_cur, [(job_id, tag) for tag in json.loads(row[TAGS])])
    if period is not None:
        with cur.connection.cursor() as key_cur:
            dedupe_periods.hold(key_cur, period, job_id)
    return job_id, new


def _insert_tag_rows(cur: Cursor, pairs: Sequence[tuple[int, str]]) -> None:
    """The mysqlq_job_tags rows of jobs just inserted: (job id, tag) pairs, in one statement."""
    cur.execute(query("insert_job_tags").replace("{rows}", ", ".join([query("job_tag_values")] * len(pairs))),
                [value for pair in pairs for value in pair])


class Interleaved(Exception):
    """A multi-row insert's ids were not one block (another statement's rows among them): its tag
    rows cannot be told apart by id range. The caller rolls back and inserts the jobs one by one."""


def insert_tagged(cur: Cursor, rows: Sequence[Sequence[Any]], renderer: RowRenderer) -> int:
    """Insert jobs with tags in one multi-row INSERT, then all their tag rows in one more (an id's
    tags read back from the job rows, by the statement's block of ids), in the caller's transaction;
    returns how many jobs were new. Raises Interleaved when the block held rows not of this insert."""
    cur.execute(renderer.statement("insert_jobs", rows, cur.connection.literal))
    added = cur.rowcount
    if added <= 0:
        return 0
    execute(cur, "jobs_inserted", {"first": int(cur.lastrowid or cur.connection.insert_id()), "places": len(rows) - 1})
    found = [(int(job_id), json.loads(tags) if tags is not None else None) for job_id, tags in cur.fetchall()]
    sent = iter(json.loads(row[TAGS]) for row in rows)  # in order: the rows found are some of them, in order
    if len(found) != added or not all(any(tags == mine for mine in sent) for _, tags in found):
        raise Interleaved(f"{len(found)} rows in the block of ids of an insert that added {added}")
    _insert_tag_rows(cur, [(job_id, tag) for job_id, tags in found for tag in tags or ()])
    return added


def insert_rendered(conn: Connection, row: Sequence[Any], renderer: RowRenderer) -> int:
    """:func:`insert_job` on one of mysqlq's own connections, sent without a cursor (a single INSERT
    returns no rows; the cursor's bookkeeping would add a quarter to the client's CPU for it).
    For a job without tags, fairness key or period key only (those take :func:`insert_job`, in a
    transaction)."""
    if row[TAGS] is not None or row[FAIRNESS_KEY] is not None or row[DEDUPE_PERIOD] is not None:
        raise ValueError("insert_rendered takes jobs without tags, fairness key or dedupe period")
    conn.query(renderer.statement("insert_job", (row,), conn.literal))
    return int(conn.insert_id())


class BulkInsert:
    """Multi-row inserts sent one ahead: each statement goes to the server at once, and its result is
    read only when the next is ready (or at the end), so the server inserts one chunk while the
    caller checks and renders the next. At most one statement is in flight."""

    def __init__(self, cur: Cursor, renderer: RowRenderer) -> None:
        self.conn: Connection = cur.connection
        self.renderer = renderer
        self._in_flight = False

    def send(self, rows: Sequence[Sequence[Any]]) -> int:
        """Send an insert of ``rows`` without waiting for it; returns how many rows the previous
        insert added (0 for the first). The statement is rendered before the previous one is waited
        for, while the server still inserts it (escaping needs only the connection's character set)."""
        try:
            statement = self.renderer.statement("insert_jobs", rows, self.conn.literal) if rows else None
        except BaseException:
            self.wait()  # read the result in flight, so that the connection can roll back
            raise
        added = self.wait()
        if statement is not None:
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
def bulk_insert(cur: Cursor, renderer: RowRenderer) -> Iterator[BulkInsert]:
    """A BulkInsert whose statement in flight is always read, so that the connection can be used
    (rolled back) after an error raised while it was out."""
    bulk = BulkInsert(cur, renderer)
    try:
        yield bulk
    except BaseException:
        with contextlib.suppress(Exception):
            bulk.wait()
        raise


def job_state(cur: Cursor, job_id: int | None = None, dedupe_key: str | None = None) -> JobState | None:
    """Where one job stands, by id or by the dedupe key it holds (None: no such job, or purged). A
    key held for a period is looked up when no live job holds the key itself: it names its job for as
    long as the period lasts, in whichever table the job is."""
    if dedupe_key is not None:
        cur.execute(query("job_state_by_key"), {"key": dedupe_key})
    else:
        cur.execute(query("job_state"), {"id": job_id})
    row = cur.fetchone()
    if row is None and dedupe_key is not None:
        holder = dedupe_periods.holder(cur, dedupe_key)
        return None if holder is None else job_state(cur, holder)
    if row is None:
        return None
    (id_, queue, handler, status, priority, attempts, max_attempts, worker, enqueued_at, run_at, started_at,
     finished_at, error, result, payload, key) = row
    return JobState(int(id_), str(queue), str(handler), str(status), int(priority), int(attempts),
                    int(max_attempts), worker, enqueued_at, run_at, started_at, finished_at, error,
                    None if result is None else bytes(result), bytes(payload), key)


def holds_queue(cur: Cursor) -> bool:
    """Whether the connection's database holds mysqlq's tables."""
    cur.execute(query("holds_queue"))
    row = cur.fetchone()
    return bool(row and row[0])
