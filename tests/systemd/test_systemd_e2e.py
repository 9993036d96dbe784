"""End to end under a real (private) systemd: install as a user would, `systemctl start worker@1
worker@2`, jobs done, `journalctl -u 'worker@*' JOB_ID=N`, kill -9 → restart, a stopped worker trips
the watchdog, `systemctl stop 'worker@*'` releases claimed-but-unstarted jobs. Nothing is left behind."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from mysqlq_harness.jobs import EVERY_JOB
from mysqlq_harness.systemd import PrivateSystemd
from mysqlq_harness.waiting import wait_for

from ..conftest import MYSQLQ, MariaDBServer, QueueDB, private_systemd, with_database

pytestmark = pytest.mark.slow

PYTHON = str(Path(MYSQLQ).parent / "python")
NOBODY = ("setpriv", "--reuid=65534", "--regid=65534", "--clear-groups", "--")
# A producer on the host: enqueue jobs in one transaction (its commit sends the has-task hint),
# then report how many workers' hint sockets one more hint reaches.
PRODUCE = """\
import json, sys
import mysqlq
settings = mysqlq.Settings(dsn=mysqlq.Dsn.parse(sys.argv[1]))
jobs = [mysqlq.Job(handler, payload, queue=queue) for handler, payload, queue in json.loads(sys.argv[2])]
with mysqlq.Producer(settings) as producer:
    producer.enqueue_many(jobs)
print(mysqlq.notify(settings, [job.queue for job in jobs]))
"""


class Deployment:
    """The private systemd plus the test's view of the queue database."""

    def __init__(self, systemd: PrivateSystemd, qdb: QueueDB, dsn: str) -> None:
        self.systemd = systemd
        self.qdb = qdb
        self.dsn = dsn

    def produce(self, *jobs: tuple[str, dict[str, object], str]) -> list[int]:
        """Enqueue as user nobody inside the namespace; returns the new jobs' ids."""
        before = self.qdb.scalar(f"SELECT COALESCE(MAX(id), 0) FROM {EVERY_JOB}")
        result = self.systemd.run(*NOBODY, PYTHON, "-c", PRODUCE, self.dsn, json.dumps(jobs), env={"HOME": "/"})
        assert result.stdout.strip() == "2", f"hints reached {result.stdout.strip()} workers, not 2"
        return [row[0] for row in self.qdb.query(f"SELECT id FROM {EVERY_JOB} WHERE id > %s ORDER BY id", (before,))]

    def statuses(self, ids: list[int]) -> dict[int, tuple[str, int, str | None]]:
        marks = ",".join("%s" for _ in ids)
        # A running job's worker is the registered worker of its worker_id (a claim writes no name).
        rows = self.qdb.query("SELECT id, status, attempts, COALESCE(IF(status = 'running', (SELECT w.name FROM"
                              " mysqlq_workers w WHERE w.id = every_job.worker_id), NULL), worker)"
                              f" FROM {EVERY_JOB} WHERE id IN ({marks})", tuple(ids))
        return {row[0]: (row[1], row[2], row[3]) for row in rows}

    def wait_status(self, ids: list[int], status: str, worker: str | None = None, timeout: float = 30) -> None:
        def reached() -> bool:
            found = self.statuses(ids).values()
            return all(s == status and (worker is None or w == worker) for s, _, w in found)

        wait_for(reached, f"jobs {ids} to be {status}" + (f" by worker {worker}" if worker else ""), timeout)

    def unit(self, name: str) -> dict[str, str]:
        return self.systemd.show(name, "ActiveState", "SubState", "Result", "StatusText", "MainPID", "NRestarts",
                                 "ExecMainStatus", "User", "WatchdogUSec")


@pytest.fixture
def deployment(qdb: QueueDB, mariadb: MariaDBServer, tmp_path: Path) -> Deployment:
    systemd = private_systemd(mariadb, tmp_path / "systemd")
    assert mariadb.tcp_dsn is not None
    return Deployment(systemd, qdb, with_database(mariadb.tcp_dsn, qdb.name))


def test_workers_under_systemd(deployment: Deployment) -> None:
    with deployment.systemd as systemd:
        run_scenario(systemd, deployment)
    assert systemd.leftovers() == []


def run_scenario(systemd: PrivateSystemd, d: Deployment) -> None:
    # Install as a user would, then configure: shared settings, and a queue of its own per instance.
    installed = systemd.run(MYSQLQ, "install-systemd", "--name", "worker")
    assert "daemon-reload: done" in installed.stdout
    warnings = [line for line in installed.stdout.splitlines() if line.startswith("warning")]
    # A checkout under /tmp (a CI clone may be) is the one case where a warning is due.
    under_tmp = Path(MYSQLQ).resolve().is_relative_to("/tmp")
    assert warnings == ([w for w in warnings if "PrivateTmp is off" in w] if under_tmp else []), warnings
    systemd.write("/etc/mysqlq/mysqlq.env", f"MYSQLQ_DSN={d.dsn}\nMYSQLQ_QUEUES=e2e\nMYSQLQ_BATCH_SIZE=10\n"
                  "MYSQLQ_POLL_INTERVAL=30\n")  # idle workers wake on hints, not by polling
    # worker@1 runs one job at a time (its stop releases a batch it has started); worker@2 has 5 slots.
    systemd.write("/etc/mysqlq/1.env", "MYSQLQ_QUEUES=e2e-1,e2e\nMYSQLQ_CONCURRENCY=1\n")
    systemd.write("/etc/mysqlq/2.env", "MYSQLQ_QUEUES=e2e-2,e2e\n")

    systemd.systemctl("start", "worker@1", "worker@2")  # returns once both sent READY=1
    for name in ("worker@1", "worker@2"):
        unit = d.unit(name)
        user = "" if under_tmp else "mysqlq"  # the dynamic user, unless installed under /tmp (root then)
        assert (unit["ActiveState"], unit["SubState"], unit["User"]) == ("active", "running", user), unit
        assert unit["StatusText"].startswith("idle; 0 done, 0 failed; queues e2e-"), unit
    assert systemd.run("stat", "-c", "%a", "/run/mysqlq").stdout.strip() == "1777"

    # Jobs are done; one job's story is in the journal under its id, with its fields.
    ids = d.produce(*(("test.record", {"tag": str(n)}, "e2e") for n in range(6)))
    d.wait_status(ids, "done")
    assert {worker for _, _, worker in d.statuses(ids).values()} <= {"1", "2"}
    entries = wait_for(lambda: systemd.journal("-u", "worker@*", f"JOB_ID={ids[0]}"), "the job's journal entries", 30)
    [done] = [e for e in entries if e.get("MYSQLQ_EVENT") == "job.done"]
    assert done["_SYSTEMD_UNIT"] == f"worker@{done['WORKER']}.service"
    assert (done["JOB_ID"], done["QUEUE"], done["HANDLER"], done["ATTEMPT"]) == (str(ids[0]), "e2e", "test.record", "1")
    assert done["BATCH_ID"].isdigit() and done["PRIORITY"] == "6"
    assert done["MESSAGE"].startswith(f"job.done job_id={ids[0]} ")

    # kill -9 of a worker holding a batch: systemd restarts it, and the jobs of its earlier life finish.
    sleepers = d.produce(*(("test.sleep", {"seconds": 1}, "e2e-1") for _ in range(3)))
    d.wait_status(sleepers, "running", worker="1")
    killed = systemd.kill_main("worker@1", "KILL")
    wait_for(lambda: d.unit("worker@1")["NRestarts"] == "1" and d.unit("worker@1")["ActiveState"] == "active",
             "worker@1 to be restarted", 30)
    assert d.unit("worker@1")["MainPID"] != str(killed)
    d.wait_status(sleepers, "done")

    # A shorter watchdog for worker@2: a job longer than it still finishes (the keep-alive pings
    # while the job is within its time limit), but a SIGSTOPped worker trips it and is restarted.
    systemd.write("/etc/systemd/system/worker@2.service.d/watchdog.conf", "[Service]\nWatchdogSec=2\n")
    systemd.systemctl("daemon-reload")
    systemd.systemctl("restart", "worker@2")
    assert d.unit("worker@2")["WatchdogUSec"] == "2s"
    restarts = int(d.unit("worker@2")["NRestarts"])
    [long_job] = d.produce(("test.sleep", {"seconds": 4}, "e2e-2"))
    d.wait_status([long_job], "done")
    assert int(d.unit("worker@2")["NRestarts"]) == restarts
    stopped = systemd.kill_main("worker@2", "STOP")
    wait_for(lambda: int(d.unit("worker@2")["NRestarts"]) == restarts + 1 and d.unit("worker@2")["ActiveState"]
             == "active", "the watchdog to restart worker@2", 30)
    assert d.unit("worker@2")["MainPID"] != str(stopped)
    story = systemd.run("journalctl", "--no-pager", "-u", "worker@2", "-o", "cat").stdout
    assert "Watchdog timeout" in story
    assert "Fatal Python error: Aborted" in story  # PYTHONFAULTHANDLER: the stacks of the hung worker

    # Stop while worker@1 is mid-batch: the job in hand finishes, the rest go back unspent.
    batch = d.produce(*(("test.sleep", {"seconds": 2}, "e2e-1") for _ in range(5)))
    d.wait_status(batch, "running", worker="1")
    systemd.systemctl("stop", "worker@*")
    for name in ("worker@1", "worker@2"):
        unit = d.unit(name)
        assert (unit["ActiveState"], unit["Result"], unit["ExecMainStatus"]) == ("inactive", "success", "0"), unit
    outcome = d.statuses(batch)
    assert {status for status, _, _ in outcome.values()} <= {"done", "ready"}, outcome
    released = [job_id for job_id, (status, attempts, _) in outcome.items() if status == "ready"]
    assert released and all(outcome[job_id][1] == 0 for job_id in released), outcome
    assert d.qdb.scalar("SELECT COUNT(*) FROM mysqlq_jobs WHERE status = 'running'") == 0
    [release] = systemd.journal("-u", "worker@1", "MYSQLQ_EVENT=batch.released")
    assert release["JOBS"] == str(len(released))

    # The target starts the enabled instances together and stops them all.
    d.qdb.query("DELETE FROM mysqlq_jobs WHERE status = 'ready'")
    systemd.systemctl("enable", "worker@1", "worker@2")
    systemd.systemctl("start", "worker.target")
    wait_for(lambda: [d.unit(name)["ActiveState"] for name in ("worker@1", "worker@2")] == ["active", "active"],
             "the target to start both instances", 30)
    systemd.systemctl("stop", "worker.target")
    assert [d.unit(name)["ActiveState"] for name in ("worker@1", "worker@2")] == ["inactive", "inactive"]
