"""Schema versions: reading the applied version and applying migrations."""

from __future__ import annotations

import hashlib
import re

import MySQLdb

from ..db import Cursor, error_code
from ..errors import ConfigError, SchemaError
from ..sql import migrations, query
from . import execute

NO_SUCH_TABLE = 1146
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


def migrate(cur: Cursor, database: str) -> list[int]:
    """Apply the migrations the database lacks, one process at a time; returns those applied.

    A schema newer than this mysqlq knows is refused (SchemaError), as every other command does.
    """
    name = lock_name("migrate", database)
    execute(cur, "get_lock", {"name": name, "timeout": 60})
    try:
        execute(cur, "create_version_table")
        current = applied_version(cur)
        if current > latest_version():
            raise SchemaError(f"the schema is at version {current}, newer than this mysqlq knows "
                              f"({latest_version()}): upgrade mysqlq")
        applied = []
        for version, statements in migrations():
            if version <= current:
                continue
            for statement in statements:
                cur.execute(statement)
            execute(cur, "record_version", {"version": version})
            applied.append(version)
        return applied
    finally:
        execute(cur, "release_lock", {"name": name})
