"""Schema versions: reading the applied version and applying migrations."""

from __future__ import annotations

import hashlib
import secrets
import time

import MySQLdb

from ..db import Cursor, error_code
from ..errors import SchemaError
from ..sql import migrations
from . import execute

NO_SUCH_TABLE = 1146
MIGRATION_LEASE = 300.0  # seconds a migration holds its lock without progress before others may take it
MIGRATION_WAIT = 600.0  # seconds a second `mysqlq migrate` waits for the first


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


def migrate(cur: Cursor, database: str, wait: float = MIGRATION_WAIT) -> list[int]:
    """Apply the migrations the database lacks, one process at a time; returns those applied.

    The lock is a lease row, so it holds across the nodes of a cluster; it is extended after each
    statement, and one left by a crashed run lapses after MIGRATION_LEASE seconds.
    """
    holder = secrets.token_hex(16)
    execute(cur, "create_version_table")
    execute(cur, "create_migration_lock_table")
    execute(cur, "add_migration_lock")
    _take_lock(cur, holder, wait)
    try:
        current = applied_version(cur)
        applied = []
        for version, statements in migrations():
            if version <= current:
                continue
            for statement in statements:
                cur.execute(statement)
                _extend_lock(cur, holder)
            execute(cur, "record_version", {"version": version})
            applied.append(version)
        return applied
    finally:
        execute(cur, "release_migration_lock", {"holder": holder})


def _take_lock(cur: Cursor, holder: str, wait: float) -> None:
    deadline = time.monotonic() + wait
    while not _extend_lock(cur, holder):
        if time.monotonic() >= deadline:
            raise SchemaError(f"another `mysqlq migrate` has held the migration lock for over {wait:g}s; "
                              f"try again (a crashed one's lock lapses within {MIGRATION_LEASE:g}s)")
        time.sleep(0.2)


def _extend_lock(cur: Cursor, holder: str) -> bool:
    return execute(cur, "take_migration_lock", {"holder": holder, "lease_us": round(MIGRATION_LEASE * 1e6)}) == 1
