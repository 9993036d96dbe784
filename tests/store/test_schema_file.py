"""The schema files: ``mysqlq/store/sql/schema.sql`` (MariaDB) and ``schema.mysql.sql`` (MySQL) are
what `mysqlq migrate` makes of a new database, so that today's schema can be read without replaying
every migration. Each lane checks its own server's file.

The two servers print one schema in different words (display widths, each column's collation,
quoted defaults, expression defaults), so each has a file of its own, printed as the server prints
it: translating one into the other would hide the differences this test is there to catch.

To regenerate a file after adding a migration, run this test with ``MYSQLQ_WRITE_SCHEMA=1`` in
each lane; the comment lines that open the file are kept, the tables below them are rewritten.
"""

from __future__ import annotations

import os
import re

from mysqlq.core.config import Dsn
from mysqlq.store.db import connect
from mysqlq.store.sql import HERE

from ..conftest import ON_MYSQL, QueueDB, query_once, with_database

SCHEMA = HERE / ("schema.mysql.sql" if ON_MYSQL else "schema.sql")
# A table's next AUTO_INCREMENT value is data, not schema.
COUNTER = re.compile(r" AUTO_INCREMENT=\d+")


def printed_schema(dsn: str) -> str:
    """``SHOW CREATE TABLE`` of every table in the database of ``dsn``, by name, counters removed."""
    tables = sorted(row[0] for row in query_once(connect(Dsn.parse(dsn)), "SHOW TABLES"))
    statements = [query_once(connect(Dsn.parse(dsn)), f"SHOW CREATE TABLE `{table}`")[0][1] for table in tables]
    return "".join(COUNTER.sub("", statement) + ";\n\n" for statement in statements).rstrip("\n") + "\n"


def split_note(text: str) -> tuple[str, str]:
    """The file's opening comment lines (its note) and the tables after them."""
    lines = text.splitlines(keepends=True)
    count = next((n for n, line in enumerate(lines) if not line.startswith("--")), len(lines))
    return "".join(lines[:count]), "".join(lines[count:]).lstrip("\n")


def test_migrating_a_new_database_makes_the_schema_file(qdb: QueueDB) -> None:
    # A database made by `mysqlq migrate --create-database`, as an operator would: its character set
    # is the one the tables are meant to have (mysqlq_schema_version and mysqlq_migration_lock name
    # none of their own and take the database's).
    name = qdb.name + "_file"
    dsn = with_database(qdb.server.dsn, name)
    try:
        qdb.cli("migrate", "--create-database", env=qdb.env(MYSQLQ_DSN=dsn), check=True)
        printed = printed_schema(dsn)
    finally:
        query_once(connect(Dsn.parse(qdb.server.dsn)), f"DROP DATABASE IF EXISTS `{name}`")
    assert printed.startswith("CREATE TABLE `mysqlq_")
    note, tables = split_note(SCHEMA.read_text(encoding="utf-8"))
    if os.environ.get("MYSQLQ_WRITE_SCHEMA"):
        SCHEMA.write_text(note + "\n" + printed, encoding="utf-8")
        tables = printed
    assert tables == printed, f"{SCHEMA.name} is not what the migrations make: regenerate it (see its note)"


def test_schema_files_name_no_statement() -> None:
    # The statement loader reads every *.sql file beside it (and the package data takes them all):
    # a schema file must add no name to it.
    for path in (HERE / "schema.sql", HERE / "schema.mysql.sql"):
        assert not re.search(r"^-- name:", path.read_text(encoding="utf-8"), re.MULTILINE), path.name
