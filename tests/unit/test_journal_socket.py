"""The journal's native protocol as mysqlq writes it without systemd's C library: the datagram's bytes,
values with newlines in the binary-safe form, an entry too big for a datagram passed in a sealed memfd,
a missing journald, a journald whose socket was made anew; and the same entries read back from a real
(private) journald, fields intact."""

from __future__ import annotations

import array
import fcntl
import os
import socket
import struct
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest
from mysqlq_harness.journald import PrivateJournald
from mysqlq_harness.waiting import wait_for

from mysqlq.core import journalsocket
from mysqlq.core.journalsocket import JournalSocket, encode

TRACE = "Traceback (most recent call last):\n  File \"x.py\", line 1\nValueError: boom"


def parse(datagram: bytes) -> dict[str, bytes]:
    """A native-protocol datagram read back as journald reads it."""
    fields: dict[str, bytes] = {}
    rest = datagram
    while rest:
        line, sep, after = rest.partition(b"\n")
        assert sep, f"an unterminated field: {rest[:40]!r}"
        if b"=" in line:
            name, _, value = line.partition(b"=")
            rest = after
        else:  # binary-safe: NAME\n, a 64-bit little-endian length, the value, \n
            name = line
            (size,) = struct.unpack("<Q", after[:8])
            value, rest = after[8:8 + size], after[8 + size:]
            assert rest[:1] == b"\n"
            rest = rest[1:]
        assert name not in fields
        fields[name.decode()] = value
    return fields


class Receiver:
    """An AF_UNIX datagram socket standing in for journald's."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self.sock = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM)
        self.sock.bind(str(path))
        self.sock.settimeout(5)

    def receive(self) -> tuple[bytes, list[int]]:
        """The next datagram and the descriptors it carries."""
        fds = array.array("i")
        data, ancillary, _, _ = self.sock.recvmsg(1 << 20, socket.CMSG_SPACE(fds.itemsize * 4))
        for level, kind, payload in ancillary:
            if level == socket.SOL_SOCKET and kind == socket.SCM_RIGHTS:
                fds.frombytes(payload[: len(payload) - len(payload) % fds.itemsize])
        return data, list(fds)

    def close(self) -> None:
        self.sock.close()
        self.path.unlink(missing_ok=True)


@pytest.fixture
def receiver(tmp_path: Path) -> Iterator[Receiver]:
    found = Receiver(tmp_path / "journal.sock")
    yield found
    found.close()


def test_plain_fields_are_lines_and_a_value_with_newlines_is_binary_safe() -> None:
    plain = encode(("MESSAGE=job.done job_id=1", "JOB_ID=1", "EMPTY="))
    assert plain == b"MESSAGE=job.done job_id=1\nJOB_ID=1\nEMPTY=\n"
    datagram = encode((f"MESSAGE=oops\n{TRACE}", "PRIORITY=3", f"EXCEPTION={TRACE}", "NOTE=a=b"))
    assert datagram.startswith(b"MESSAGE\n" + struct.pack("<Q", len(f"oops\n{TRACE}")) + b"oops\nTraceback")
    assert parse(datagram) == {"MESSAGE": f"oops\n{TRACE}".encode(), "PRIORITY": b"3",
                               "EXCEPTION": TRACE.encode(), "NOTE": b"a=b"}
    assert parse(encode(("MESSAGE=naïve – ünïcode", "X=\u2603"))) == {"MESSAGE": "naïve – ünïcode".encode(),
                                                                     "X": "\u2603".encode()}
    assert parse(encode(("MESSAGE=lone \udc80 surrogate",)))["MESSAGE"] == b"lone ? surrogate"  # never raises


def test_each_entry_is_one_datagram_on_one_connected_socket(receiver: Receiver) -> None:
    journal = JournalSocket(str(receiver.path))
    try:
        journal.sendv("MESSAGE=first", "JOB_ID=1")
        journal.sendv("MESSAGE=second", f"EXCEPTION={TRACE}")
        first, second = receiver.receive(), receiver.receive()
        assert first == (b"MESSAGE=first\nJOB_ID=1\n", [])
        assert parse(second[0]) == {"MESSAGE": b"second", "EXCEPTION": TRACE.encode()}
    finally:
        journal.close()


def test_an_entry_too_big_for_a_datagram_goes_in_a_sealed_memfd(
        receiver: Receiver, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(journalsocket, "SEND_BUFFER", 4096)  # the kernel's floor: a 64 KiB entry does not fit
    journal = JournalSocket(str(receiver.path))
    big = "x" * 65536
    try:
        journal.sendv("MESSAGE=big", f"RESULT={big}", f"EXCEPTION={TRACE}")
        data, [fd] = receiver.receive()
    finally:
        journal.close()
    try:
        assert data == b""  # the datagram carries only the descriptor
        seals = fcntl.fcntl(fd, fcntl.F_GET_SEALS)
        assert seals & fcntl.F_SEAL_WRITE and seals & fcntl.F_SEAL_SHRINK and seals & fcntl.F_SEAL_GROW
        with os.fdopen(os.dup(fd), "rb") as memfd:
            memfd.seek(0)  # journald reads it from the start (the descriptor shares our write offset)
            assert parse(memfd.read()) == {"MESSAGE": b"big", "RESULT": big.encode(), "EXCEPTION": TRACE.encode()}
    finally:
        os.close(fd)


def test_without_a_journald_entries_are_dropped_and_a_socket_made_anew_is_found(tmp_path: Path) -> None:
    path = tmp_path / "journal.sock"
    journal = JournalSocket(str(path))
    try:
        journal.sendv("MESSAGE=nobody listens")  # no socket file: dropped, as libsystemd drops it
        first = Receiver(path)
        journal.sendv("MESSAGE=one")
        assert first.receive()[0] == b"MESSAGE=one\n"
        first.close()  # journald's socket closed and made again (a restarted systemd-journald.socket)
        journal.sendv("MESSAGE=lost")  # refused, and no socket to connect to again: dropped
        second = Receiver(path)
        try:
            journal.sendv("MESSAGE=two")
            assert second.receive()[0] == b"MESSAGE=two\n"
        finally:
            second.close()
    finally:
        journal.close()


SEND = """\
import sys
from mysqlq.core import journalsocket
journalsocket.sendv("MESSAGE=line one\\nline two", "SYSLOG_IDENTIFIER=mysqlq-wire", "JOB_ID=7",
                    "EXCEPTION=" + sys.argv[1])
journalsocket.SEND_BUFFER = 4096  # the kernel's floor: the next entry does not fit a datagram
journalsocket.JournalSocket().sendv("MESSAGE=big", "SYSLOG_IDENTIFIER=mysqlq-wire", "JOB_ID=8",
                                    "RESULT=" + "y" * 600000)
"""


def test_a_real_journald_stores_the_fields_of_both_forms_and_of_a_memfd(journald: PrivateJournald) -> None:
    """The worker's entries as journald files them: multi-line values whole, a 600 KB entry (past a
    small send buffer, so through a memfd) whole, and journald's own fields from the socket."""
    result = journald.run(sys.executable, "-c", SEND, TRACE, env={})
    assert result.returncode == 0, result.stderr
    wait_for(lambda: journald.entries("JOB_ID=8"), "the second entry", 30)
    entries = journald.entries("SYSLOG_IDENTIFIER=mysqlq-wire")
    by_job = {entry["JOB_ID"]: entry for entry in entries}
    assert by_job["7"]["MESSAGE"] == "line one\nline two"
    assert by_job["7"]["EXCEPTION"] == TRACE
    assert by_job["7"]["_TRANSPORT"] == "journal" and by_job["7"]["_PID"].isdigit()
    big = journald.entries("JOB_ID=8", "--all")
    assert [entry["RESULT"] for entry in big] == ["y" * 600000]


def test_the_journal_needs_no_c_extension() -> None:
    """Neither the journal's writer nor sd_notify imports python-systemd (``systemd``)."""
    code = ("import sys\nimport mysqlq.core.journal, mysqlq.core.systemd, mysqlq.core.logs\n"
            "sys.exit('systemd' in sys.modules)")
    assert subprocess.run([sys.executable, "-c", code], check=False).returncode == 0
