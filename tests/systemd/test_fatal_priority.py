"""A command that cannot start (schema missing, access denied) says why at error priority in the journal."""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

from mysqlq_harness.journald import PrivateJournald
from mysqlq_harness.waiting import wait_for

from ..conftest import MYSQLQ, QueueDB

MISSING = "mysqlq: error: the mysqlq schema is missing: run `mysqlq migrate`"
# Run with stderr connected to the journal as systemd does for a unit: systemd-cat gives the command
# a journal stream, and JOURNAL_STREAM names it (device:inode), which is how mysqlq recognises one.
AS_A_UNIT = 'JOURNAL_STREAM=$(stat -L -c %d:%i /proc/self/fd/2) exec "$@"'




def errors(journald: PrivateJournald, fragment: str) -> list[dict[str, str]]:
    return [entry for entry in journald.entries("PRIORITY=3") if fragment in entry.get("MESSAGE", "")]


def test_worker_under_systemd_logs_a_missing_schema_at_error_priority(qdb: QueueDB, journald: PrivateJournald) -> None:
    qdb.query("DROP TABLE mysqlq_schema_version")
    env = qdb.env()
    env.pop("MYSQLQ_LOG_FORMAT")  # auto: the journal, since stderr is a journal stream
    result = journald.run("systemd-cat", "-t", "worker", "sh", "-c", AS_A_UNIT, "sh", MYSQLQ, "worker", "--burst",
                          env=env)
    assert result.returncode == 1
    [entry] = wait_for(lambda: errors(journald, "schema is missing"), "the error entry", 30)
    assert entry["MESSAGE"] == MISSING
    assert entry["SYSLOG_IDENTIFIER"] == "mysqlq"
    assert entry["MYSQLQ_EVENT"] == "command.failed"
    assert entry["COMMAND"] == "worker"
    # Written once: not also as a stream line at info priority.
    assert not [e for e in journald.entries() if "schema is missing" in e.get("MESSAGE", "") and e is not entry
                and e.get("PRIORITY") != "3"]


def test_console_output_into_a_journal_stream_gets_the_error_prefix(qdb: QueueDB, journald: PrivateJournald) -> None:
    qdb.query("DROP TABLE mysqlq_schema_version")
    env = qdb.env(MYSQLQ_LOG_FORMAT="console")
    result = journald.run("systemd-cat", "-t", "stats", "sh", "-c", AS_A_UNIT, "sh", MYSQLQ, "stats", env=env)
    assert result.returncode == 1
    [entry] = wait_for(lambda: errors(journald, "schema is missing"), "the error entry", 30)
    assert entry["MESSAGE"] == MISSING  # journald took "<3>" as the priority and removed it
    assert entry["SYSLOG_IDENTIFIER"] == "stats"


def test_journal_output_from_a_terminal_goes_to_both(qdb: QueueDB, journald: PrivateJournald) -> None:
    assert qdb.server.tcp_dsn
    dsn = qdb.server.tcp_dsn.replace("mysql://root@", "mysql://nobody:hunter2@")
    result = journald.run(MYSQLQ, "--log-format", "journal", "workers", "--dsn", dsn, env=qdb.env())
    assert result.returncode == 1
    assert result.stderr.splitlines() == [
        f"mysqlq: error: access denied for user 'nobody' at 127.0.0.1:{dsn.rsplit(':', 1)[1].split('/')[0]}: "
        "check the DSN's user and password"]
    [entry] = wait_for(lambda: errors(journald, "access denied"), "the error entry", 30)
    assert entry["COMMAND"] == "workers"
    assert "hunter2" not in entry["MESSAGE"]


def test_the_error_prefix_is_written_only_into_a_journal_stream(qdb: QueueDB, tmp_path: Path) -> None:
    qdb.query("DROP TABLE mysqlq_schema_version")
    err = tmp_path / "stderr"
    with err.open("w") as out:
        stat = os.fstat(out.fileno())
        for stream in ("", f"{stat.st_dev}:{stat.st_ino + 1}"):  # none, and someone else's stream
            code = subprocess.run([MYSQLQ, "stats"], env=qdb.env(JOURNAL_STREAM=stream), stderr=out,
                                  check=False).returncode
            assert code == 1
        code = subprocess.run([MYSQLQ, "stats"], env=qdb.env(JOURNAL_STREAM=f"{stat.st_dev}:{stat.st_ino}"),
                              stderr=out, check=False).returncode
        assert code == 1
    assert err.read_text().splitlines() == [MISSING, MISSING, "<3>" + MISSING]
