"""sd_notify without systemd's C library: a datagram to $NOTIFY_SOCKET, a path or an abstract name
(``@…``), with the sender's pid for systemd's ``NotifyAccess=main``; nothing at all without the variable.
(The worker's READY/STATUS/WATCHDOG/STOPPING story is tests/test_systemd_notify.py.)"""

from __future__ import annotations

import os
import socket
import struct
from pathlib import Path

import pytest

from mysqlq.core.systemd import Notifier, notify

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
        assert notify("READY=1\nSTATUS=idle")
        assert received(on_path) == (os.getpid(), "READY=1\nSTATUS=idle")
    name = f"mysqlq-test-{os.getpid()}-{tmp_path.name}"
    with listening("\0" + name) as abstract:
        monkeypatch.setenv("NOTIFY_SOCKET", "@" + name)
        notifier = Notifier()
        notifier.status("running batch 7 (3 jobs)")
        assert received(abstract) == (os.getpid(), "STATUS=running batch 7 (3 jobs)")


def test_without_notify_socket_nothing_is_sent(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("NOTIFY_SOCKET", raising=False)
    assert notify("READY=1") is False
    Notifier().ready("idle")  # silent: no socket, no error
    assert notify("READY=1", "vsock:2:999") is False  # an address of a kind mysqlq does not speak


def test_a_socket_that_is_gone_is_an_error(tmp_path: Path) -> None:
    with pytest.raises(FileNotFoundError):
        notify("WATCHDOG=1", str(tmp_path / "gone"))
