"""Schema versions: reading the applied version and applying migrations."""

from __future__ import annotations

import contextlib
import hashlib
import re
import secrets
import time
from collections.abc import Callable

import MySQLdb

from mysqlq.core.errors import ConfigError, SchemaError
from mysqlq.store import execute
from mysqlq.store.db import Connection, Cursor, error_code, transaction
from mysqlq.store.migration_lease import LeaseRenewal
from mysqlq.store.sql import migrations, query

NO_SUCH_TABLE = 1146
MIGRATION_LEASE = 300.0  # seconds a migration holds its lock without progress before others may take it
MIGRATION_WAIT = 600.0  # seconds a second `mysqlq migrate` waits for the first
# A migration statement under this line runs over mysqlq_jobs in primary-key ranges [low, high) of
# BACKFILL_STEP ids, each its own short autocommit statement, so that no lock is held for long.
IN_ID_RANGES = "-- mysqlq: in primary-key ranges"
# The same with several statements (separated by THEN lines) that commit together in each range.
AS_ONE_TRANSACTION = ", as one transaction"
THEN = "-- mysqlq: then"
BACKFILL_STEP = 5000
# A migration statement with this line drops something (with what else it changes, atomically): on
# a migration run again after one stopped past it, the server finds nothing to drop, and it is done.
DROPS = "-- mysqlq: done if nothing is left to drop"
CANT_DROP = 1091  # ER_CANT_DROP_FIELD_OR_KEY
# A migration statement with this line adds columns (with what else it changes, atomically): on a
# migration run again after one stopped past it, the server finds them there, and it is done.
ADDS = "-- mysqlq: done if it was added already"
ALREADY_THERE = frozenset({1060, 1061})  # ER_DUP_FIELDNAME, ER_DUP_KEYNAME
# Database names --create-database accepts: what needs no quoting, plus "-" (it is backquoted anyway).
DATABASE_NAME = re.compile(r"[A-Za-z0-9_$-]{1,64}")


def lock_name(prefix: str, database: str) -> str:
    """A server-wide lock name for one database (GET_LOCK names are limited to 64 characters)."""
    return f"mysqlq:{prefix}:" + hashlib.sha1(database.encode()).hexdigest()[:20]


def latest_version() -> int:
    """The schema version this mysqlq expects (its newest migration)."""
    return migrations()[-1][0]


def applied_version(cur: Cursor) -> int:
    """The schema version the database has (0 when mysqlq was never migrated there)."""
    try:
        execute(cur, "schema_version")
    except MySQLdb.ProgrammingError as exc:
        if error_code(exc) == NO_SUCH_TABLE:
            return 0
        raise
    row = cur.fetchone()
    return int(row[0]) if row else 0


def quote_database(name: str) -> str:
    """``name`` as a backquoted identifier, after checking it is a plain database name."""
    if not DATABASE_NAME.fullmatch(name):
        raise ConfigError(f"database name {name!r} may use only letters, digits, _ $ and -, at most 64 characters "
                          "(create it yourself, then run `mysqlq migrate`)")
    return f"`{name}`"


def create_database(cur: Cursor, name: str) -> bool:
    """Create the database ``name`` unless it exists (on a connection to no database); True if created."""
    quoted = quote_database(name)
    execute(cur, "database_exists", {"name": name})
    row = cur.fetchone()
    if row and int(row[0]):
        return False
    return int(cur.execute(query("create_database").replace("{database}", quoted))) > 0


def migrate(cur: Cursor, database: str, wait: float = MIGRATION_WAIT,
            renew_on: Callable[[], Connection] | None = None) -> list[int]:
    """Apply the migrations the database lacks, one process at a time; returns those applied.

    The lock is a lease row, so it holds across the nodes of a cluster; it is extended after each
    statement, and one left by a crashed run lapses after MIGRATION_LEASE seconds. With
    ``renew_on`` (a way to open a second connection), it is also extended every quarter lease
    while a statement runs, however long an index build takes. A schema newer than this mysqlq
    knows is refused (SchemaError), as every other command does.
    """
    holder = secrets.token_hex(16)
    execute(cur, "create_version_table")
    execute(cur, "create_migration_lock_table")
    execute(cur, "add_migration_lock")
    _take_lock(cur, holder, wait)
    renewal = (LeaseRenewal(renew_on, holder, MIGRATION_LEASE, MIGRATION_LEASE / 4) if renew_on
               else contextlib.nullcontext())
    try:
        with renewal:  # stopped before the release below, so that it cannot take the lock again
            return _apply(cur, holder)
    finally:
        execute(cur, "release_migration_lock", {"holder": holder})


def _apply(cur: Cursor, holder: str) -> list[int]:
    current = applied_version(cur)
    if current > latest_version():
        raise SchemaError(f"the schema is at version {current}, newer than this mysqlq knows "
                          f"({latest_version()}): upgrade mysqlq")
    applied = []
    for version, statements in migrations():
        if version <= current:
            continue
        for statement in statements:
            if statement.startswith(IN_ID_RANGES):
                _in_id_ranges(cur, statement, lambda: _extend_lock(cur, holder))
            else:
                _run(cur, statement)
            _extend_lock(cur, holder)
        execute(cur, "record_version", {"version": version})
        applied.append(version)
    return applied


def _run(cur: Cursor, statement: str) -> None:
    """One statement of a migration (see :data:`DROPS` and :data:`ADDS`)."""
    try:
        cur.execute(statement)
    except (MySQLdb.OperationalError, MySQLdb.ProgrammingError) as exc:
        lines = statement.splitlines()
        if not ((DROPS in lines and error_code(exc) == CANT_DROP)
                or (ADDS in lines and error_code(exc) in ALREADY_THERE)):
            raise


def _in_id_ranges(cur: Cursor, statement: str, progress: Callable[[], object]) -> int:
    """Run ``statement`` (with %(low)s and %(high)s) over every job id, BACKFILL_STEP ids at a time;
    returns the rows it changed. Rows inserted meanwhile need no backfill: the step before it gave
    new rows their values."""
    execute(cur, "job_id_range")
    row = cur.fetchone()
    low, last = (int(row[0]), int(row[1])) if row else (0, 0)
    together = statement.splitlines()[0].endswith(AS_ONE_TRANSACTION)
    steps = [step.strip() for step in statement.split(THEN)] if together else [statement]
    changed = 0
    while low <= last:
        params = {"low": low, "high": low + BACKFILL_STEP}
        if together:
            with transaction(cur.connection):
                changed += sum(int(cur.execute(step, params)) for step in steps)
        else:
            changed += int(cur.execute(statement, params))
        low += BACKFILL_STEP
        progress()
    return changed


def _take_lock(cur: Cursor, holder: str, wait: float) -> None:
    deadline = time.monotonic() + wait
    while not _extend_lock(cur, holder):
        if time.monotonic() >= deadline:
            raise SchemaError(f"another `mysqlq migrate` has held the migration lock for over {wait:g}s; "
                              f"try again (a crashed one's lock lapses within {MIGRATION_LEASE:g}s)")
        time.sleep(0.2)


def _extend_lock(cur: Cursor, holder: str) -> bool:
    return execute(cur, "take_migration_lock", {"holder": holder, "lease_us": round(MIGRATION_LEASE * 1e6)}) == 1


def migration_running(cur: Cursor) -> bool:
    """Whether a `mysqlq migrate` is at work now (it holds the lock; False before the first one)."""
    try:
        execute(cur, "migration_running")
    except MySQLdb.ProgrammingError as exc:
        if error_code(exc) == NO_SUCH_TABLE:
            return False
        raise
    row = cur.fetchone()
    return bool(row and row[0])


def check_schema(cur: Cursor) -> None:
    """Refuse a database whose schema is missing, older or newer than this mysqlq expects."""
    have, want = applied_version(cur), latest_version()
    if have == want:
        return
    if have == 0:
        raise SchemaError("the mysqlq schema is missing: run `mysqlq migrate`")
    if have < want:
        raise SchemaError(f"the schema is at version {have}, this mysqlq needs {want}: run `mysqlq migrate`")
    raise SchemaError(f"the schema is at version {have}, newer than this mysqlq knows ({want}): upgrade mysqlq")
