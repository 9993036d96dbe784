"""MySQL Group Replication: a private single-primary group of three members (mysqlq_harness.group_replication).

Workers name every member in their DSN, their own first: on a secondary (super_read_only) they go
on to the primary. Their lease (the default, 60 s) must outlast the group's failover: a primary
killed with kill -9 is replaced only once the others have suspected and expelled it (about 20 s
here with the group's default timeouts), and no worker can write a heartbeat meanwhile. The
primary killed with kill -9 mid-drain and rejoined, then a switch of the primary: every job done,
none lost, one effect per transactional job, every plain job run once, no live worker taken for dead.

A reap by lease expiry is allowed; a lapsed claim of a live worker is not. A statement the group
commits while its worker loses the connection to the killed primary (an ambiguous commit) is retried
and is harmless when fenced by its claim token, but a claim of which no worker read a job back (a
retried claim that found nothing left to take) stays running until its lease lapses, and the
leader's sweep gives it back: its jobs never ran under that claim, so nothing runs twice. That is
the designed recovery. What must not happen is a claim lapsing while its worker holds it: then a job
in its hands runs again elsewhere (a plain job runs twice) and its worker says so (job.claim_lost,
batch.abandoned). The test tells the two apart by what ran, not by whether the leader reaped.
Runs in the MySQL lane (make test-mysql) only.
"""

from __future__ import annotations

import pathlib
import re
import subprocess
from collections import Counter
from collections.abc import Iterator

import pytest
from mysqlq_harness.group_replication import PrivateGroup
from mysqlq_harness.jobs import EVERY_JOB, every_job
from mysqlq_harness.lifecycle import child_env
from mysqlq_harness.waiting import stop_processes, wait_done, wait_for

from mysqlq import Dsn, Job, Producer, Settings
from mysqlq.store.db import connect

from ..conftest import MYSQLQ, fresh_database, query_once, throwaway

pytestmark = pytest.mark.mysql_only


@pytest.fixture(scope="module")
def group(tmp_path_factory: pytest.TempPathFactory) -> Iterator[PrivateGroup]:
    """A private 3-member group for this module."""
    with throwaway(PrivateGroup(tmp_path_factory.mktemp("group"), die_with_parent=True),
                   "a private Group Replication group") as found:
        yield found


def member_dsn(group: PrivateGroup, database: str, first: int) -> str:
    order = [first, *(n for n in (1, 2, 3) if n != first)]
    hosts = ",".join(f"127.0.0.1:{group.member(n).port}" for n in order)
    return f"mysql://root@{hosts}/{database}"


def scalar(dsn: str, sql: str) -> object:
    rows = query_once(connect(Dsn.parse(dsn)), sql)
    return rows[0][0] if rows else None


def test_a_drain_survives_a_member_killed_and_a_primary_switch(group: PrivateGroup, tmp_path: pathlib.Path) -> None:
    with fresh_database(group.dsn, "mysqlq_gr_", migrated=False) as database:
        dsn = member_dsn(group, database, 1)
        env = child_env({"MYSQLQ_DSN": dsn, "MYSQLQ_LOG_FORMAT": "console"})
        migrated = subprocess.run([MYSQLQ, "migrate"], env=env, capture_output=True, text=True, timeout=120)
        assert migrated.returncode == 0, migrated.stderr
        query_once(connect(Dsn.parse(dsn)), "CREATE TABLE test_effects (id BIGINT AUTO_INCREMENT PRIMARY KEY, "
                   "job_id BIGINT NOT NULL, attempt INT NOT NULL, KEY (job_id))")
        total = 3000
        jobs = [Job("test.record" if i % 2 else "test.effect", {"sleep": 0.002} if i % 2 else None)
                for i in range(total)]
        with Producer(Settings(dsn=Dsn.parse(dsn), hint=False)) as producer:
            producer.enqueue_many(jobs)
        procs = []
        for member in (1, 2, 3):
            worker_env = child_env({"MYSQLQ_DSN": member_dsn(group, database, member), "MYSQLQ_LOG_FORMAT": "console",
                                    "MYSQLQ_HINT_DIR": str(tmp_path / f"hints{member}"),
                                    "MYSQLQ_TEST_RECORD": str(tmp_path / "record.txt")})
            with open(tmp_path / f"worker-{member}.log", "ab") as out:
                procs.append(subprocess.Popen([MYSQLQ, "worker", "--name", f"m{member}", "--poll-interval", "0.5",
                                               "--retry-base", "0.05", "--batch-size", "20",
                                               "--heartbeat-interval", "1"],  # the default lease, 60 s
                                              env=worker_env, stdout=out, stderr=subprocess.STDOUT))
        try:
            conn = connect(Dsn.parse(dsn))
            cur = conn.cursor()
            wait_done(cur, total // 4, timeout=120, interval=0.2)
            victim = group.primary()  # the member every worker writes to
            group.member(victim).kill()
            conn.close()
            wait_for(lambda: _done(group, database) >= total // 2, "the drain to go on under a new primary", 120)
            group.rejoin(victim)
            target = next(n for n in (1, 2, 3) if n != group.primary())
            group.switch_primary(target)
            wait_for(lambda: _done(group, database) == total, "every job done", 240, 0.5)
            assert all(proc.poll() is None for proc in procs), "a worker exited"
        finally:
            stop_processes(procs, timeout=60)
        logs = "\n".join(p.read_text(errors="replace") for p in sorted(tmp_path.glob("worker-*.log")))
        dsn = member_dsn(group, database, group.primary())
        # The jobs the leader gave back: the reap writes their last error, which their completion keeps.
        reaped = query_once(connect(Dsn.parse(dsn)), f"SELECT id, handler, attempts, last_error FROM {EVERY_JOB} "
                            "WHERE last_error LIKE 'worker % was lost while running attempt %' ORDER BY id")
        seen = f"reaped jobs (id, handler, attempts, last error): {reaped}\n{_around(logs, _LAPSE_SIGNS)}"
        assert scalar(dsn, "SELECT COUNT(*) FROM mysqlq_jobs WHERE status <> 'done'") == 0, seen
        assert scalar(dsn, "SELECT COUNT(*) FROM test_effects") == total // 2, seen
        assert scalar(dsn, "SELECT COUNT(DISTINCT job_id) FROM test_effects") == total // 2, seen
        lines = (tmp_path / "record.txt").read_text().split("\n")
        plain_runs = Counter(line.split()[0] for line in lines if line.strip() and line.split()[2] == "default")
        assert len(plain_runs) == total // 2, seen
        # A plain job is only ever run again when a claim on it lapsed while its worker ran it.
        twice = {job_id: runs for job_id, runs in plain_runs.items() if runs > 1}
        assert not twice, f"a live worker's claim lapsed: plain jobs run more than once {twice}\n{seen}"
        assert not re.search(r"job\.claim_lost|batch\.abandoned|worker\.registration_lost", logs), \
            f"a live worker's claim lapsed or its registration was lost\n{seen}"
        dead = [line for line in logs.splitlines() if "reaper.reaped" in line and not _DEAD_NONE.search(line)]
        assert not dead, f"a live worker was taken for dead: {dead}\n{seen}"


def _done(group: PrivateGroup, database: str) -> int:
    for member in group.members:
        if member.running:
            try:
                rows = member.query(f"SELECT COUNT(*) FROM {every_job('status', database)} WHERE status = 'done'")
                return int(rows[0][0])
            except Exception:  # a member restarting: ask the next
                continue
    return 0


_DEAD_NONE = re.compile(r"dead_workers=(''|\"\"|$|\s)")
_LAPSE_SIGNS = ("reaper.reaped", "job.claim_lost", "batch.abandoned", "worker.registration_lost")


def _around(logs: str, signs: tuple[str, ...], context: int = 25) -> str:
    """The workers' log lines (in time order, without the job.done ones) around each line with one of
    ``signs``, for a failure message; empty when there is none."""
    lines = sorted((line for line in logs.splitlines() if line.strip() and "job.done" not in line),
                   key=lambda line: line[:19])
    hits = [index for index, line in enumerate(lines) if any(sign in line for sign in signs)]
    shown = sorted({i for hit in hits for i in range(max(0, hit - context), min(len(lines), hit + 5))})
    return "\n".join(lines[i] for i in shown)
