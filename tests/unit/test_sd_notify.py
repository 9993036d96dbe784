"""systemd's notifications through its own binding (``systemd.daemon.notify``, libsystemd's
``sd_notify``): a datagram to $NOTIFY_SOCKET, a path or an abstract name (``@…``), carrying the sender's
pid for systemd's ``NotifyAccess=main``; nothing at all without the variable. (The worker's
READY/STATUS/WATCHDOG/STOPPING story is tests/systemd/test_systemd_notify.py.)"""

from __future__ import annotations

import os
import socket
import struct
from pathlib import Path

import pytest

from mysqlq.core.systemd import Notifier
from systemd import daemon

CREDENTIALS = struct.Struct("3i")  # struct ucred: pid, uid, gid


def listening(address: str) -> socket.socket:
    sock = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_PASSCRED, 1)
    sock.bind(address)
    sock.settimeout(5)
    return sock


def received(sock: socket.socket) -> tuple[int, str]:
    data, ancillary, _, _ = sock.recvmsg(4096, socket.CMSG_SPACE(CREDENTIALS.size))
    [(_, _, payload)] = [item for item in ancillary if item[:2] == (socket.SOL_SOCKET, socket.SCM_CREDENTIALS)]
    return CREDENTIALS.unpack(payload[: CREDENTIALS.size])[0], data.decode()


def test_a_path_and_an_abstract_name_both_receive_the_state(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    with listening(str(tmp_path / "notify")) as on_path:
        monkeypatch.setenv("NOTIFY_SOCKET", str(tmp_path / "notify"))
        Notifier().ready("idle")
        assert received(on_path) == (os.getpid(), f"READY=1\nSTATUS=idle\nMAINPID={os.getpid()}")
    name = f"mysqlq-test-{os.getpid()}-{tmp_path.name}"
    with listening("\0" + name) as abstract:
        monkeypatch.setenv("NOTIFY_SOCKET", "@" + name)
        notifier = Notifier()
        notifier.status("running batch 7 (3 jobs)")
        notifier.stopping("draining")
        assert received(abstract) == (os.getpid(), "STATUS=running batch 7 (3 jobs)")
        assert received(abstract) == (os.getpid(), "STOPPING=1\nSTATUS=draining")


def test_each_notification_is_the_bindings_notify(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    sent: list[str] = []
    monkeypatch.setattr(daemon, "notify", lambda state: sent.append(state) or True)
    monkeypatch.setenv("NOTIFY_SOCKET", str(tmp_path / "notify"))
    monkeypatch.setenv("WATCHDOG_USEC", "2000000")
    monkeypatch.delenv("WATCHDOG_PID", raising=False)
    notifier = Notifier()
    notifier.watchdog()
    notifier.extend_start(1.5, "waiting for the migration")
    assert sent == ["WATCHDOG=1", "EXTEND_TIMEOUT_USEC=1500000\nSTATUS=waiting for the migration"]


def test_without_notify_socket_nothing_is_sent(monkeypatch: pytest.MonkeyPatch) -> None:
    sent: list[str] = []
    monkeypatch.setattr(daemon, "notify", lambda state: sent.append(state) or True)
    monkeypatch.delenv("NOTIFY_SOCKET", raising=False)
    notifier = Notifier()
    notifier.ready("idle")
    notifier.stopping("bye")
    assert not notifier.enabled and sent == []


def test_a_socket_that_is_gone_is_an_error(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("NOTIFY_SOCKET", str(tmp_path / "gone"))
    with pytest.raises(FileNotFoundError):
        Notifier().status("anyone there?")
