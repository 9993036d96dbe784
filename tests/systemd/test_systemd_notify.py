"""sd_notify from `mysqlq worker`, read from a test-owned NOTIFY_SOCKET as systemd would read it:
READY=1, STATUS=, WATCHDOG=1 (also while a long job runs) and STOPPING=1, all from the main pid."""

from __future__ import annotations

import os
import select
import signal
import socket
import struct
import subprocess
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest
from mysqlq_harness.jobs import EVERY_JOB
from mysqlq_harness.waiting import wait_for

from mysqlq.core.systemd import Notifier

from ..conftest import QueueDB

CREDENTIALS = struct.Struct("3i")  # struct ucred: pid, uid, gid


@dataclass(frozen=True)
class Message:
    """One datagram: the sender's pid (from SCM_CREDENTIALS) and its KEY=VALUE lines."""

    pid: int
    fields: dict[str, str]


class NotifySocket:
    """An AF_UNIX datagram socket with SO_PASSCRED, like the one systemd gives Type=notify units."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self.sock = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM)
        self.sock.setsockopt(socket.SOL_SOCKET, socket.SO_PASSCRED, 1)
        self.sock.bind(str(path))
        self.messages: list[Message] = []

    def close(self) -> None:
        self.sock.close()

    def _receive(self, timeout: float) -> Message | None:
        if not select.select([self.sock], [], [], max(0.0, timeout))[0]:
            return None
        data, ancillary, _, _ = self.sock.recvmsg(4096, socket.CMSG_SPACE(CREDENTIALS.size))
        pid = 0
        for level, kind, payload in ancillary:
            if level == socket.SOL_SOCKET and kind == socket.SCM_CREDENTIALS:
                pid = CREDENTIALS.unpack(payload[: CREDENTIALS.size])[0]
        fields = dict(line.split("=", 1) for line in data.decode().splitlines() if "=" in line)
        message = Message(pid, fields)
        self.messages.append(message)
        return message

    def drain(self, quiet: float) -> None:
        """Read (into ``messages``) until nothing has arrived for ``quiet`` seconds."""
        while self._receive(quiet) is not None:
            pass

    def wait_exit(self, proc: subprocess.Popen[str], timeout: float = 30) -> int:
        """The process's exit code; meanwhile every message is read, as systemd would (a full
        queue would block the sender's next ping)."""

        def exited() -> bool:
            if proc.poll() is not None:
                return True
            self._receive(0.05)
            return False

        wait_for(exited, f"pid {proc.pid} to exit", timeout, interval=0)
        return proc.returncode

    def wait_for(self, matches: Callable[[Message], bool], what: str, timeout: float = 30) -> Message:
        """The next message that ``matches``; every message read is kept in ``messages``."""

        def matching() -> Message | None:
            message = self._receive(0.05)
            return message if message is not None and matches(message) else None

        return wait_for(matching, lambda: f"{what}; got {[m.fields for m in self.messages]}", timeout, interval=0)


@pytest.fixture
def notify_socket(tmp_path: Path) -> Iterator[NotifySocket]:
    sock = NotifySocket(tmp_path / "notify.sock")
    yield sock
    sock.close()


def has(key: str, value: str | None = None) -> Callable[[Message], bool]:
    return lambda message: key in message.fields and (value is None or message.fields[key] == value)


@pytest.mark.parametrize(("concurrency", "busy"), [("1", "running batch"), ("5", "running 1 of 5 slots")])
def test_ready_status_watchdog_stopping_come_from_the_main_pid(qdb: QueueDB, notify_socket: NotifySocket,
                                                               concurrency: str, busy: str) -> None:
    env = qdb.env(NOTIFY_SOCKET=str(notify_socket.path), WATCHDOG_USEC="1000000")
    proc = qdb.worker("--name", "notify-1", "--batch-size", "5", "--concurrency", concurrency, env=env)

    ready = notify_socket.wait_for(has("READY", "1"), "READY=1")
    assert ready.pid == proc.pid
    assert ready.fields["STATUS"].startswith("idle; 0 done, 0 failed")
    assert notify_socket.wait_for(has("WATCHDOG", "1"), "WATCHDOG=1").pid == proc.pid

    with qdb.producer() as producer:
        producer.enqueue("test.record", {"tag": "a"})
    running = notify_socket.wait_for(lambda m: m.fields.get("STATUS", "").startswith(busy), "busy STATUS")
    assert "(1 jobs)" in running.fields["STATUS"] or concurrency != "1"
    idle = notify_socket.wait_for(lambda m: m.fields.get("STATUS", "").startswith("idle; 1 done"), "idle STATUS")
    assert idle.pid == proc.pid

    proc.send_signal(signal.SIGTERM)
    stopping = notify_socket.wait_for(has("STOPPING", "1"), "STOPPING=1")
    assert stopping.pid == proc.pid and stopping.fields["STATUS"].startswith("stopping")
    assert notify_socket.wait_exit(proc) == 0
    assert {m.pid for m in notify_socket.messages} == {proc.pid}


def test_watchdog_is_kept_alive_while_a_job_runs_within_its_time_limit(
    qdb: QueueDB, notify_socket: NotifySocket
) -> None:
    """The main loop is busy for the whole job, so the keep-alive thread pings; systemd sees the main pid."""
    env = qdb.env(NOTIFY_SOCKET=str(notify_socket.path), WATCHDOG_USEC="400000")
    proc = qdb.worker("--name", "notify-2", env=env)
    notify_socket.wait_for(has("READY", "1"), "READY=1")
    with qdb.producer() as producer:
        job_id = producer.enqueue("test.sleep", {"seconds": 3})
    qdb.wait_for(lambda: [str(job_id), "1", "start"] in [r[:3] for r in qdb.records()], what="the job to start")
    notify_socket.messages.clear()
    # Five pings (each at most a quarter of the 0.4 s period apart) while the job is still in hand.
    for _ in range(5):
        assert notify_socket.wait_for(has("WATCHDOG", "1"), "WATCHDOG=1 during the job", timeout=2).pid == proc.pid
    assert [str(job_id), "1", "end"] not in [r[:3] for r in qdb.records()]
    proc.send_signal(signal.SIGTERM)
    assert notify_socket.wait_exit(proc) == 0
    assert qdb.scalar(f"SELECT status FROM {EVERY_JOB} WHERE id = %s", (job_id,)) == "done"


def test_no_keep_alive_pings_once_the_job_is_past_its_time_limit(
    notify_socket: NotifySocket, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A handler stuck beyond its limit must let the watchdog fire: the keep-alive thread goes quiet."""
    monkeypatch.setenv("NOTIFY_SOCKET", str(notify_socket.path))
    monkeypatch.setenv("WATCHDOG_USEC", "200000")
    monkeypatch.delenv("WATCHDOG_PID", raising=False)
    notifier = Notifier()
    notifier.ready("test")
    notify_socket.wait_for(has("READY", "1"), "READY=1")
    deadline = time.monotonic() + 1.0  # a job on the main thread with a limit of 1 s
    try:
        notifier.job_deadline = lambda: deadline  # as the worker points it at its runner's alarm
        notify_socket.messages.clear()
        while time.monotonic() < deadline:  # within the limit, pings keep coming (a quarter of the period apart)
            notify_socket.drain(quiet=0.2)
        assert len([m for m in notify_socket.messages if has("WATCHDOG", "1")(m)]) >= 5
        notify_socket.drain(quiet=0.15)  # a ping sent just as the limit passed
        notify_socket.messages.clear()
        with pytest.raises(AssertionError, match="waiting for WATCHDOG"):
            notify_socket.wait_for(has("WATCHDOG", "1"), "WATCHDOG=1 past the limit", timeout=0.5)
    finally:
        notifier.close()
    assert {m.pid for m in notify_socket.messages} <= {os.getpid()}


def test_notifier_is_silent_without_notify_socket_and_ignores_a_watchdog_for_another_pid(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    for name in ("NOTIFY_SOCKET", "WATCHDOG_USEC", "WATCHDOG_PID"):
        monkeypatch.delenv(name, raising=False)
    assert not Notifier().enabled
    monkeypatch.setenv("WATCHDOG_USEC", "1000000")
    assert Notifier().watchdog_interval is None  # no socket to ping
    monkeypatch.setenv("NOTIFY_SOCKET", "/nonexistent/notify")
    monkeypatch.setenv("WATCHDOG_PID", str(os.getpid() + 1))
    assert Notifier().watchdog_interval is None  # the watchdog is someone else's
    monkeypatch.setenv("WATCHDOG_PID", str(os.getpid()))
    assert Notifier().watchdog_interval == 0.5
