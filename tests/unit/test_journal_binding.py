"""The journal through systemd's own binding (systemd-python's ``sendv``, libsystemd's
``sd_journal_sendv``): entries as a real (private) journald files them, fields intact, a traceback
whole, an entry past a datagram whole, a value strict UTF-8 refuses sent with ``?``; and a journald
socket nobody listens on, or none at all, drops the entry as libsystemd drops a missing one."""

from __future__ import annotations

import subprocess
import sys

import pytest
from mysqlq_harness.journald import PrivateJournald, missing_prerequisites
from mysqlq_harness.waiting import wait_for

from mysqlq.core import journal

from ..conftest import unavailable

TRACE = "Traceback (most recent call last):\n  File \"x.py\", line 1\nValueError: boom"

SEND = """\
import sys
from mysqlq.core import logs
logs.configure("journal", "info")
log = logs.get_logger("mysqlq.worker").bind(worker="w1", batch_id=7)
log.error("job.failed", job_id=7, handler="app.fails", exception=sys.argv[1])
logs.log_many(log, "info", "job.done", ("job_id", "handler"), [(8, "app.a"), (9, "app.\\udc80b")])
log.info("job.done", job_id=10, result="y" * 600000)  # past the socket's send buffer: in a memfd
log.info("job.done", job_id=11, path="lone \\udc80 surrogate")
"""


def test_a_real_journald_files_every_entry_with_its_fields(journald: PrivateJournald) -> None:
    result = journald.run(sys.executable, "-c", SEND, TRACE, env={})
    assert result.returncode == 0, result.stderr
    wait_for(lambda: journald.entries("JOB_ID=11"), "the last entry", 30)
    by_job = {entry["JOB_ID"]: entry for entry in journald.entries("SYSLOG_IDENTIFIER=mysqlq", "--all")}
    assert sorted(by_job) == ["10", "11", "7", "8", "9"]
    failed = by_job["7"]
    assert failed["MESSAGE"] == f"job.failed job_id=7 handler=app.fails worker=w1 batch_id=7\n{TRACE}"
    assert failed["EXCEPTION"] == TRACE and failed["PRIORITY"] == "3" and failed["HANDLER"] == "app.fails"
    assert failed["_TRANSPORT"] == "journal" and failed["_PID"].isdigit()  # journald's own, from the socket
    assert [by_job[job]["HANDLER"] for job in ("8", "9")] == ["app.a", "app.?b"]  # a batch's lines too
    assert by_job["8"]["MYSQLQ_EVENT"] == "job.done" and by_job["8"]["BATCH_ID"] == "7"
    assert by_job["10"]["RESULT"] == "y" * 600000
    assert by_job["11"]["PATH"] == "lone ? surrogate"


DROP = """\
import socket
from systemd import journal as binding
from mysqlq.core import journal
journal.sendv("MESSAGE=no socket at all")  # ENOENT: libsystemd drops it
sock = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM)
sock.bind("/run/systemd/journal/socket")
sock.close()  # the file stays, nobody listens
try:
    binding.sendv("MESSAGE=refused")
except ConnectionRefusedError:
    print("the binding raises")
journal.sendv("MESSAGE=refused")
print("mysqlq drops it")
"""


def test_without_a_listening_journald_an_entry_is_dropped() -> None:
    reason = missing_prerequisites()
    if reason:
        unavailable(f"a private /run: {reason}")
    private_run = 'mount -t tmpfs tmpfs /run && mkdir -p /run/systemd/journal && exec "$@"'
    result = subprocess.run(["unshare", "--mount", "--propagation", "private", "sh", "-c", private_run, "sh",
                             sys.executable, "-c", DROP], capture_output=True, text=True, timeout=60, check=False)
    assert result.returncode == 0, result.stderr
    assert result.stdout.splitlines() == ["the binding raises", "mysqlq drops it"]


def test_the_writer_is_the_bindings_sendv(monkeypatch: pytest.MonkeyPatch) -> None:
    from systemd import journal as binding

    assert journal._sendv is binding.sendv
    sent: list[tuple[object, ...]] = []
    monkeypatch.setattr(journal, "_sendv", lambda *fields: sent.append(fields))
    journal.send("warning", {"event": "x.y", "job_id": 3})
    assert sent == [("MESSAGE=x.y job_id=3", "PRIORITY=4", "SYSLOG_IDENTIFIER=mysqlq", "MYSQLQ_EVENT=x.y",
                     "JOB_ID=3")]
