"""Hints on one host: where the sockets live, and saying so when producers and workers cannot meet."""

from __future__ import annotations

import os
import pathlib
import stat
import subprocess

from ..conftest import MYSQLQ, QueueDB

PYTHON = str(pathlib.Path(MYSQLQ).parent / "python")
# A worker's unix socket set up as `mysqlq worker` does, with /run/mysqlq replaced by argv[1].
BIND = """\
import pathlib, sys
import mysqlq.hint.local as local
from mysqlq import Dsn, Settings
from mysqlq.core import logs
local.RUN_DIR = pathlib.Path(sys.argv[1])
logs.configure("console")
listener = local.LocalListener(Settings(dsn=Dsn()))
print(listener.path)
listener.close()
logs.flush()
"""


def bind(run_dir: pathlib.Path, tmp: pathlib.Path) -> subprocess.CompletedProcess[str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("MYSQLQ_")}
    env["TMPDIR"] = str(tmp)
    return subprocess.run([PYTHON, "-c", BIND, str(run_dir)], env=env, capture_output=True, text=True, check=True)


def test_a_worker_creates_the_run_dir_world_writable_and_sticky(tmp_path: pathlib.Path) -> None:
    run_dir = tmp_path / "run" / "mysqlq"
    run_dir.parent.mkdir()
    result = bind(run_dir, tmp_path)
    assert pathlib.Path(result.stdout.strip()).parent == run_dir
    assert stat.S_IMODE(run_dir.stat().st_mode) == 0o1777  # like the unit's ExecStartPre, whatever the umask
    assert "hint.private_dir" not in result.stderr


def test_a_worker_that_must_fall_back_says_what_to_do(tmp_path: pathlib.Path) -> None:
    (tmp_path / "run").write_text("")  # /run/mysqlq cannot be made under a file
    result = bind(tmp_path / "run" / "mysqlq", tmp_path)
    assert pathlib.Path(result.stdout.strip()).parent == tmp_path / f"mysqlq-{os.getuid()}"
    assert result.stderr.count("hint.private_dir") == 1
    assert "mkdir -m 1777" in result.stderr and "MYSQLQ_HINT_DIR" in result.stderr


def test_a_producer_that_finds_no_worker_socket_says_so_once(qdb: QueueDB) -> None:
    worker_dir = qdb.tmp / "worker-hints"
    qdb.worker("--poll-interval", "0.5", env=qdb.env(MYSQLQ_HINT_DIR=str(worker_dir)))
    qdb.wait_for(lambda: qdb.scalar("SELECT COUNT(*) FROM mysqlq_workers"), what="the worker to register")
    result = qdb.cli("enqueue", "test.record", check=True)  # its hint directory is another one
    assert result.stderr.count("hint.no_worker_reached") == 1, result.stderr
    assert "MYSQLQ_HINT_DIR" in result.stderr
    qdb.wait_for(lambda: qdb.records(), what="the job to run at the next poll anyway")


def test_a_producer_that_reaches_the_workers_says_nothing(qdb: QueueDB) -> None:
    qdb.worker("--poll-interval", "60")
    qdb.wait_for(lambda: qdb.scalar("SELECT COUNT(*) FROM mysqlq_workers"), what="the worker to register")
    qdb.wait_for(lambda: list((qdb.tmp / "hints").iterdir()), what="the worker's socket")
    result = qdb.cli("enqueue", "test.record", check=True)
    assert "hint." not in result.stderr
    qdb.wait_for(lambda: qdb.records(), timeout=30, what="the hinted job to run (the next poll is a minute away)")
