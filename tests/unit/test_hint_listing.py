"""A producer lists the hint directory only when it changed, and still finds every worker socket."""

from __future__ import annotations

import os
import pathlib
import time

import pytest

from mysqlq import Dsn, Settings
from mysqlq.hint import local


def settings(folder: pathlib.Path) -> Settings:
    return Settings(dsn=Dsn.parse("mysql://u@db.example/app"), hint_dir=str(folder))


def counting_scandir(monkeypatch: pytest.MonkeyPatch) -> list[str]:
    listed: list[str] = []
    real = os.scandir

    def scandir(path: str) -> object:
        listed.append(str(path))
        return real(path)

    monkeypatch.setattr(local.os, "scandir", scandir)
    return listed


def settle(folder: pathlib.Path) -> None:
    """Date the directory's last change a second back, as if nothing had changed lately."""
    stamp = time.time_ns() - 1_000_000_000
    os.utime(folder, ns=(stamp, stamp))


def test_an_unchanged_directory_is_listed_once(tmp_path: pathlib.Path, monkeypatch: pytest.MonkeyPatch) -> None:
    listener = local.LocalListener(settings(tmp_path))
    settle(tmp_path)
    listed = counting_scandir(monkeypatch)
    sender = local.LocalSender(settings(tmp_path))
    try:
        reached = []
        for _ in range(50):
            reached.append(sender.send({"default"}, 0.0))
            assert [hint.queue for hint in listener.drain()] == ["default"]
        assert reached == [{os.getpid()}] * 50
        assert len(listed) == 1
    finally:
        sender.close()
        listener.close()


def test_a_worker_socket_bound_after_a_listing_is_hinted_at_once(tmp_path: pathlib.Path) -> None:
    sender = local.LocalSender(settings(tmp_path))
    settle(tmp_path)
    try:
        assert sender.send({"default"}, 0.0) == set()  # nobody there yet: the empty listing is kept
        listener = local.LocalListener(settings(tmp_path))
        assert sender.send({"default"}, 0.0) == {os.getpid()}
        assert [hint.queue for hint in listener.drain()] == ["default"]
    finally:
        sender.close()
    listener.close()
    assert sender.send({"default"}, 0.0) == set()  # its socket is gone


def test_a_change_within_the_same_clock_tick_is_not_missed(tmp_path: pathlib.Path) -> None:
    """The kernel may stamp two changes a few ms apart with the same mtime: a listing read right
    after a change is not trusted, so a socket bound in the same tick is found by the next send."""
    sender = local.LocalSender(settings(tmp_path))
    try:
        (tmp_path / "unrelated").write_text("")  # a change just now
        stamp = tmp_path.stat().st_mtime_ns
        assert sender.send({"default"}, 0.0) == set()
        listener = local.LocalListener(settings(tmp_path))
        os.utime(tmp_path, ns=(stamp, stamp))  # as if the bind fell in the same tick
        assert sender.send({"default"}, 0.0) == {os.getpid()}
        listener.close()
    finally:
        sender.close()
