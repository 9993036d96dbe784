"""Where systemd's binding (systemd-python) cannot be imported (macOS, an install with ``--no-deps``, a
musl image; here, a sitecustomize hides it): a producer, the CLI and a worker in the foreground work as
anywhere; a worker started by systemd (NOTIFY_SOCKET set, or a JOURNAL_STREAM naming its stderr) stops
at once, before it tells systemd anything, with one line naming what to install; ``mysqlq
install-systemd`` refuses with the same line before it writes a unit."""

from __future__ import annotations

import os
import socket
import subprocess
import sys
import time
from pathlib import Path

import pytest
from mysqlq_harness.lifecycle import child_env

from mysqlq.core.systemdbinding import MISSING

from ..conftest import MYSQLQ, QueueDB

HIDE = "import sys\nsys.modules['systemd'] = None  # `import systemd` fails, as where it is not installed\n"
LINE = f"mysqlq: error: {MISSING}"
PRODUCE = "import mysqlq\nwith mysqlq.Producer() as p:\n    print(p.enqueue('test.record', {'tag': 'producer'}))\n"
AVAILABLE = "from mysqlq.core import systemdbinding\nprint(systemdbinding.available())"


@pytest.fixture
def hidden(tmp_path: Path) -> dict[str, str]:
    """The environment entries that hide the binding from a child process."""
    site = tmp_path / "no-systemd"
    site.mkdir()
    (site / "sitecustomize.py").write_text(HIDE)
    return {"PYTHONPATH": str(site)}


def run(argv: list[str], env: dict[str, str]) -> subprocess.CompletedProcess[str]:
    return subprocess.run(argv, env=env, capture_output=True, text=True, timeout=60, check=False)


def test_the_binding_is_hidden_and_only_then(qdb: QueueDB, hidden: dict[str, str]) -> None:
    assert run([sys.executable, "-c", AVAILABLE], qdb.env()).stdout == "True\n"
    assert run([sys.executable, "-c", AVAILABLE], qdb.env(**hidden)).stdout == "False\n"


def test_a_producer_and_the_cli_work_without_it(qdb: QueueDB, hidden: dict[str, str], tmp_path: Path) -> None:
    env = qdb.env(**hidden)
    produced = run([sys.executable, "-c", PRODUCE], env)
    assert produced.returncode == 0, produced.stderr
    enqueued = run([MYSQLQ, "enqueue", "test.record", '{"tag": "cli"}'], env)
    assert enqueued.returncode == 0, enqueued.stderr
    assert qdb.statuses() == {"ready": 2}
    with (tmp_path / "stderr").open("w") as err:  # a command run by a unit: stderr is its journal stream
        info = os.fstat(err.fileno())
        stats = subprocess.run([MYSQLQ, "stats"], env={**env, "MYSQLQ_LOG_FORMAT": "auto",
                                                       "JOURNAL_STREAM": f"{info.st_dev}:{info.st_ino}"},
                               stdout=subprocess.PIPE, stderr=err, text=True, timeout=60, check=False)
    assert stats.returncode == 0 and "ready" in stats.stdout, (tmp_path / "stderr").read_text()
    asked = run([MYSQLQ, "--log-format", "journal", "stats"], env)  # journal entries asked for: not here
    assert (asked.returncode, asked.stderr.splitlines()) == (1, [LINE])


@pytest.mark.parametrize("inherited", [False, True])
def test_a_worker_in_the_foreground_runs_jobs_without_it(qdb: QueueDB, hidden: dict[str, str], inherited: bool) -> None:
    """Also with a JOURNAL_STREAM that names another stream than its stderr, as a shell inherits one
    from a terminal that runs as a systemd user service."""
    env = qdb.env(**hidden, MYSQLQ_LOG_FORMAT="auto", **({"JOURNAL_STREAM": "8:12345"} if inherited else {}))
    for tag in ("one", "two"):
        assert run([MYSQLQ, "enqueue", "test.record", f'{{"tag": "{tag}"}}'], env).returncode == 0
    worker = run([MYSQLQ, "worker", "--burst"], env)
    assert worker.returncode == 0, worker.stderr
    assert qdb.statuses() == {"done": 2}
    assert sorted(record[-1] for record in qdb.records()) == ["one", "two"]


@pytest.mark.parametrize("started_by", ["NOTIFY_SOCKET", "JOURNAL_STREAM"])
def test_a_worker_under_systemd_without_it_stops_at_once_with_one_line(
        qdb: QueueDB, hidden: dict[str, str], tmp_path: Path, started_by: str) -> None:
    assert run([MYSQLQ, "enqueue", "test.record", "{}"], qdb.env(**hidden)).returncode == 0
    notify = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM)
    notify.bind(str(tmp_path / "notify"))
    notify.setblocking(False)
    with notify, (tmp_path / "stderr").open("w") as err:
        info = os.fstat(err.fileno())
        given = {"NOTIFY_SOCKET": str(tmp_path / "notify")} if started_by == "NOTIFY_SOCKET" else \
            {"JOURNAL_STREAM": f"{info.st_dev}:{info.st_ino}"}
        started = time.monotonic()
        # Not --burst: a worker that went on would run until the timeout.
        code = subprocess.run([MYSQLQ, "worker"], env=qdb.env(**hidden, **given, MYSQLQ_LOG_FORMAT="auto"),
                              stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=err, timeout=30,
                              check=False).returncode
        took = time.monotonic() - started
        with pytest.raises(BlockingIOError):
            notify.recv(4096)  # not a word to systemd: no READY=1, no STATUS=
    assert code == 1 and took < 10
    prefix = "<3>" if started_by == "JOURNAL_STREAM" else ""  # journald files it at error priority
    assert (tmp_path / "stderr").read_text().splitlines() == [prefix + LINE]
    assert qdb.statuses() == {"ready": 1}


def test_install_systemd_refuses_without_it_before_writing_a_unit(hidden: dict[str, str], tmp_path: Path) -> None:
    args = [MYSQLQ, "install-systemd", "--root", str(tmp_path / "root"), "--no-reload", "--name", "worker"]
    refused = run(args, child_env(hidden))
    assert (refused.returncode, refused.stderr.splitlines()) == (1, [LINE])
    assert not (tmp_path / "root").exists()
    installed = run(args, child_env())  # with the binding, the same command writes the unit
    assert installed.returncode == 0, installed.stderr
    assert (tmp_path / "root" / "etc" / "systemd" / "system" / "worker@.service").is_file()
