"""Jobs of several callers written together: one multi-row INSERT and one commit, each row's id told
apart (the producer's group commit, mysqlq.producer.group_commit)."""

from __future__ import annotations

import contextlib
from collections.abc import Sequence
from typing import Any

import MySQLdb

from mysqlq.store import expand
from mysqlq.store.db import Connection
from mysqlq.store.jobs import DEDUPE_PERIOD, FAIRNESS_KEY, NAMES, TAGS, RowRenderer
from mysqlq.store.sql import query

KEY = NAMES.index("dedupe_key")


def insert_group(conn: Connection, rows: Sequence[Sequence[Any]], renderer: RowRenderer) -> list[int]:
    """Insert ``rows`` (job rows without tags, fairness key or period) in one transaction, sent with its
    COMMIT as one query (``connect(multi_statements=True)``); returns each row's id, in order: a new
    job's, or for a dedupe key already taken the holder's (rows that share a key make one job, the
    first of them). Anything failing rolls the whole group back: nothing is half-written.

    The rows without a key go first in one multi-row INSERT: the server reserves the ids of a
    multi-row INSERT … VALUES all at once, one block (every InnoDB lock mode, Galera's too), so theirs
    are LAST_INSERT_ID() onwards, one auto_increment_increment apart (grouped_ids). The keyed rows'
    ids are read back by key (grouped_keys)."""
    return send_group(conn, rows, renderer).receive()


class SentGroup:
    """A group's query sent and not yet answered: :meth:`receive` reads the answer (the connection is
    not to be used for anything else meanwhile)."""

    def __init__(self, conn: Connection, rows: Sequence[Sequence[Any]], unkeyed: list[int],
                 first_with: dict[str, int]) -> None:
        self.conn = conn
        self.rows = rows
        self.unkeyed = unkeyed
        self.first_with = first_with

    def receive(self) -> list[int]:
        """Each row's id, once the group has committed (see :func:`insert_group`)."""
        conn, rows, first_with = self.conn, self.rows, self.first_with
        try:
            conn.read_query_result()  # START TRANSACTION
            conn.next_result()  # the INSERT
            conn.next_result()
            first, step = (int(value) for value in conn.store_result().fetch_row()[0])
            found: dict[str, int] = {}
            if first_with:
                conn.next_result()
                found = {_text(key): int(job_id) for key, job_id in conn.store_result().fetch_row(0)}
            conn.next_result()  # COMMIT
        except BaseException:
            with contextlib.suppress(MySQLdb.Error):
                conn.rollback()
            raise
        if len(found) != len(first_with):  # cannot be: each key's row was written or locked by the INSERT
            raise RuntimeError(f"{len(first_with) - len(found)} dedupe keys of a group found no job")
        place = {n: first + k * step for k, n in enumerate(self.unkeyed)}
        return [place[n] if row[KEY] is None else found[row[KEY]] for n, row in enumerate(rows)]


def send_group(conn: Connection, rows: Sequence[Sequence[Any]], renderer: RowRenderer) -> SentGroup:
    """Send :func:`insert_group`'s query without waiting for the server (which then works on it while
    the caller goes on); the returned SentGroup reads the answer."""
    for row in rows:
        if row[TAGS] is not None or row[FAIRNESS_KEY] is not None or row[DEDUPE_PERIOD] is not None:
            raise ValueError("insert_group takes jobs without tags, fairness key or dedupe period")
    unkeyed = [n for n, row in enumerate(rows) if row[KEY] is None]
    first_with: dict[str, int] = {}  # a key: the first row that has it (the one sent)
    for n, row in enumerate(rows):
        if row[KEY] is not None:
            first_with.setdefault(row[KEY], n)
    literal = conn.literal
    sent = [rows[n] for n in unkeyed] + [rows[n] for n in first_with.values()]
    statements = [b"START TRANSACTION", renderer.statement("insert_jobs", sent, literal), _IDS]
    if first_with:
        statements.append(expand("grouped_keys", len(first_with)).encode() % tuple(map(literal, first_with)))
    statements.append(b"COMMIT")
    conn.send_query(b";\n".join(statements))
    return SentGroup(conn, rows, unkeyed, first_with)


def _text(value: str | bytes) -> str:
    return value.decode() if isinstance(value, bytes) else value


_IDS = query("grouped_ids").encode()
