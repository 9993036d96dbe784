"""Imported as a library, mysqlq writes nothing to the application's stdout or stderr: its records go
to the standard ``logging`` module under ``mysqlq``, where the application's configuration decides."""

from __future__ import annotations

import subprocess
import sys
import textwrap
import urllib.parse

from ..conftest import QueueDB

# Drives a Producer through every failure mode and one success; prints only what it decides to.
APP = textwrap.dedent('''
    import logging, sys
    import mysqlq

    good, empty, missing, down = sys.argv[1:5]
    if sys.argv[5] == "logging":
        logging.basicConfig(level=logging.DEBUG, stream=sys.stdout, format="%(name)s %(levelname)s %(message)s")

        class Fields(logging.Handler):  # the structured fields, as the record's attributes
            def emit(self, record):
                if hasattr(record, "error"):
                    sys.stdout.write(f"{record.name} field error={type(record.error).__name__}\\n")

        logging.getLogger("mysqlq").addHandler(Fields())

    def say(line):  # one write per line: records logged by other threads may come between lines
        sys.stdout.write(line + "\\n")

    def attempt(what, dsn, *args, **kwargs):
        try:
            with mysqlq.Producer(dsn=dsn) as producer:
                producer.enqueue(*args, **kwargs)
            say(f"{what} enqueued")
        except mysqlq.MysqlqError as exc:
            say(f"{what} {type(exc).__name__}")

    attempt("missing-database", missing, "test.record")
    attempt("no-schema", empty, "test.record")
    attempt("server-down", down, "test.record")
    attempt("bad-handler", good, "")
    attempt("bad-payload", good, "test.record", {"x": object()})
    attempt("no-worker", good, "test.record")
''')

EXPECTED = ["missing-database DatabaseUnavailable", "no-schema SchemaError", "server-down DatabaseUnavailable",
            "bad-handler InvalidJob", "bad-payload InvalidJob", "no-worker enqueued"]


def with_database(dsn: str, name: str) -> str:
    parts = urllib.parse.urlsplit(dsn)
    return urllib.parse.urlunsplit(parts._replace(path=f"/{name}"))


def run_app(qdb: QueueDB, mode: str) -> subprocess.CompletedProcess[str]:
    empty = f"{qdb.name}_empty"
    qdb.query(f"CREATE DATABASE IF NOT EXISTS `{empty}`")
    try:
        down = "mysql://nobody@127.0.0.1:1/nothing"  # nothing listens on port 1
        args = [qdb.dsn, with_database(qdb.dsn, empty), with_database(qdb.dsn, f"{qdb.name}_nosuch"), down, mode]
        env = {key: value for key, value in qdb.env().items() if not key.startswith("MYSQLQ_")}
        env["MYSQLQ_HINT_DIR"] = str(qdb.tmp / "hints")  # no worker listens there: the producer warns
        return subprocess.run([sys.executable, "-c", APP, *args], capture_output=True, text=True, env=env,
                              timeout=120)
    finally:
        qdb.query(f"DROP DATABASE IF EXISTS `{empty}`")


def test_the_library_prints_nothing_of_its_own(qdb: QueueDB) -> None:
    result = run_app(qdb, "silent")
    assert result.returncode == 0, result.stderr
    assert result.stdout.splitlines() == EXPECTED
    assert result.stderr == ""


def test_its_records_reach_the_applications_logging_with_their_fields(qdb: QueueDB) -> None:
    result = run_app(qdb, "logging")
    assert result.returncode == 0, result.stderr
    lines = result.stdout.splitlines()
    assert [line for line in lines if not line.startswith("mysqlq.")] == EXPECTED
    records = [line for line in lines if line.startswith("mysqlq.")]
    # The producer could not read the worker directory of the missing database: a debug record.
    assert any(line.startswith("mysqlq.hint DEBUG hint.directory_failed error=") for line in records), lines
    assert "mysqlq.hint field error=str" in records
    assert result.stderr == ""
