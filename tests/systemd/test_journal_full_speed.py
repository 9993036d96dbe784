"""The journal keeps up at full speed: under a real (private) systemd, worker@1 and worker@2 installed by
`mysqlq install-systemd` drain 400,000 no-op jobs, and `journalctl -u 'worker@*' JOB_ID=N` finds the
outcome of every one of 200 jobs chosen at random; journald suppressed nothing."""

from __future__ import annotations

import random
import time
from pathlib import Path

import pytest
from mysqlq_harness.jobs import every_job
from mysqlq_harness.waiting import wait_for

import mysqlq

from ..conftest import MYSQLQ, MariaDBServer, QueueDB, private_systemd, with_database

pytestmark = pytest.mark.slow

JOBS = 400_000
SAMPLE = 200


def journald_cpu_ns(systemd: object) -> int:
    """journald's CPU time so far (its cgroup's accounting, user + system)."""
    shown = systemd.show("systemd-journald.service", "CPUUsageNSec")  # type: ignore[attr-defined]
    return int(shown["CPUUsageNSec"])


def test_every_job_outcome_reaches_the_journal_at_full_speed(
        qdb: QueueDB, mariadb: MariaDBServer, tmp_path: Path) -> None:
    systemd = private_systemd(mariadb, tmp_path / "systemd")
    assert mariadb.tcp_dsn is not None
    dsn = with_database(mariadb.tcp_dsn, qdb.name)
    with systemd:
        systemd.run(MYSQLQ, "install-systemd", "--name", "worker")
        systemd.write("/etc/mysqlq/mysqlq.env", f"MYSQLQ_DSN={dsn}\nMYSQLQ_QUEUES=flood\n")
        systemd.systemctl("start", "worker@1", "worker@2")

        with qdb.producer() as producer:  # one commit per 10,000 jobs, as fast as the server takes them
            for _ in range(0, JOBS, 10_000):
                producer.enqueue_many([mysqlq.Job("test.record", {}, queue="flood") for _ in range(10_000)])
        cpu_before = journald_cpu_ns(systemd)
        began = time.monotonic()
        wait_for(lambda: qdb.scalar(f"SELECT COUNT(*) FROM {every_job('status')} WHERE status = 'done'") == JOBS,
                 f"{JOBS} jobs to be done", 600, interval=0.5)
        drained = time.monotonic() - began
        ids = [row[0] for row in qdb.query(f"SELECT id FROM {every_job('id')}")]
        chosen = random.Random(24).sample(ids, SAMPLE)

        def logged() -> int:
            return len(systemd.journal("-u", "worker@*", "MYSQLQ_EVENT=job.done", "--output-fields=JOB_ID"))

        # Every entry has arrived once the count stops growing (journald may still be writing).
        seen = [-1]

        def settled() -> bool:
            now = logged()
            done, seen[0] = now == seen[0], now
            return done

        wait_for(settled, "journald to settle", 120, interval=2)
        cpu = journald_cpu_ns(systemd) - cpu_before
        # The figures for the README (pytest -s shows them): what journald's CPU costs per 1,000 jobs.
        print(f"\ndrained {JOBS} jobs in {drained:.1f}s; {seen[0]} job.done entries; journald "
              f"{cpu / 1e6:.0f} ms CPU, {cpu / 1e6 / (JOBS / 1000):.1f} ms per 1,000 jobs")
        # journald's own notes (_TRANSPORT=driver), such as "Suppressed N messages from worker@1.service".
        notes = systemd.run("journalctl", "--no-pager", "_TRANSPORT=driver", "-o", "cat").stdout
        suppressed = [line for line in notes.splitlines() if "uppressed" in line]
        missing = [job_id for job_id in chosen
                   if not systemd.journal("-u", "worker@*", f"JOB_ID={job_id}", "MYSQLQ_EVENT=job.done")]
        systemd.systemctl("stop", "worker@*")
    assert missing == [], f"{len(missing)} of {SAMPLE} jobs have no job.done entry, e.g. {missing[:5]}"
    assert seen[0] == JOBS
    assert suppressed == []
