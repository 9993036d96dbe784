"""Leadership of the reaper in a lease row: it lapses when the leader stops making progress, a
leader that lost it changes nothing, each worker is judged by its own lease, and a second live
worker with a taken name is refused."""

from __future__ import annotations

import json
import os
import re
import signal
import time

from mysqlq_harness.jobs import EVERY_JOB
from mysqlq_harness.waiting import wait_for

from mysqlq import Job
from mysqlq.store import claims
from mysqlq.store import leadership as leaders
from mysqlq.store import workers as registry

from ..conftest import QueueDB

ROLE = "reaper"


def leader_name(qdb: QueueDB) -> str | None:
    listing = json.loads(qdb.cli("workers", "--json", check=True).stdout)
    names = [worker["name"] for worker in listing if worker["leader"]]
    assert len(names) <= 1, listing
    return names[0] if names else None


def log_of(qdb: QueueDB, index: int) -> str:
    return (qdb.tmp / f"worker-{index}.log").read_text(errors="replace")


def test_a_lapsed_leader_is_replaced_under_a_new_epoch_and_its_writes_are_fenced(qdb: QueueDB) -> None:
    with qdb.producer() as producer:
        job_id = producer.enqueue("test.record")
    conn = qdb.connect()
    with conn.cursor() as cur:
        old = registry.register(cur, "old", "h", 1, ["default"], 1.0, 5.0)
        new = registry.register(cur, "new", "h", 2, ["default"], 1.0, 5.0)
        first = leaders.acquire(cur, ROLE, old, lease=60, steal=False)
        assert first is not None
        assert leaders.acquire(cur, ROLE, new, lease=60, steal=False) is None  # held, and its holder is alive
        # The old leader freezes: its lease lapses and the other worker takes the role over.
        cur.execute("UPDATE mysqlq_leaders SET lease_until = NOW(6) - INTERVAL 1 SECOND")
        second = leaders.acquire(cur, ROLE, new, lease=60, steal=False)
        assert second == first + 1
        assert leaders.state(cur, ROLE).worker_id == new
        # The old leader wakes: it cannot renew, and what it writes in its old epoch changes nothing.
        assert not leaders.renew(cur, ROLE, old, first, lease=60)
        assert claims.claim_update(cur, "default", 7, new, 60, 10) == 1
        stale = registry.Fence(old, first)
        assert registry.reap(cur, [new], False, stale) == 0
        assert registry.forget(cur, [new], stale) == 0
        assert qdb.scalar("SELECT status FROM mysqlq_jobs WHERE id = %s", (job_id,)) == "running"
        # The leader of the current epoch can.
        assert leaders.renew(cur, ROLE, new, second, lease=60)
        assert registry.reap(cur, [new], False, registry.Fence(new, second)) == 1
        leaders.release(cur, ROLE, new, second)
        assert leaders.state(cur, ROLE).remaining < 0
    conn.close()


def test_a_killed_leaders_role_is_taken_over_through_its_vanished_connection(qdb: QueueDB) -> None:
    conn = qdb.connect()
    victim = qdb.connect()
    with conn.cursor() as cur:
        a = registry.register(cur, "a", "h", 1, ["default"], 1.0, 5.0)
        b = registry.register(cur, "b", "h", 2, ["default"], 1.0, 5.0)
        vcur = victim.cursor()
        assert leaders.acquire(vcur, ROLE, a, lease=600, steal=False) is not None
        vcur.close()
        assert leaders.acquire(cur, ROLE, b, lease=600, steal=True) is None  # its connection is alive
        victim.close()
        epoch = wait_for(lambda: leaders.acquire(cur, ROLE, b, lease=600, steal=True),
                         "the closed connection to leave the process list", 10, interval=0.1)
        assert leaders.state(cur, ROLE).worker_id == b and epoch >= 2
    conn.close()


def test_a_frozen_leader_loses_the_role_and_the_jobs_it_held(qdb: QueueDB) -> None:
    """SIGSTOP the leader while it holds a batch: within its lease plus a few seconds another worker
    leads, takes its jobs and another worker's lapsed claim over; woken up, it reaps nothing."""
    lease = 5
    fast = ("--lease", str(lease), "--heartbeat-interval", "1", "--batch-size", "10")
    with qdb.producer() as producer:
        producer.enqueue_many([Job("test.sleep", {"seconds": 0.5}) for _ in range(10)])
    frozen = qdb.worker("--name", "frozen", "--concurrency", "1", *fast)  # one job in hand, nine unstarted
    qdb.wait_for(lambda: leader_name(qdb) == "frozen", timeout=30, what="the first worker to lead")
    qdb.wait_for(lambda: qdb.records(), what="the leader to start its batch")
    frozen_id = qdb.scalar("SELECT id FROM mysqlq_workers WHERE name = 'frozen'")
    os.kill(frozen.pid, signal.SIGSTOP)
    stopped_at = time.monotonic()
    try:
        # Another worker's claim whose lease lapsed, with a registration that still looks alive.
        qdb.query("""INSERT INTO mysqlq_workers (name, host, pid, connection_id, queues, started_at, heartbeat_at)
                     VALUES ('ghost', 'elsewhere', 1, CONNECTION_ID(), 'default', NOW(6), NOW(6))""")
        ghost_id = qdb.scalar("SELECT id FROM mysqlq_workers WHERE name = 'ghost'")
        with qdb.producer() as producer:
            lapsed = producer.enqueue("test.record", queue="ghostly")
        qdb.query("""UPDATE mysqlq_jobs SET status = 'running', batch_id = 5, running_batch = 5, worker_id = %s,
                            attempts = 1, lease_until = NOW(6) - INTERVAL 1 SECOND WHERE id = %s""",
                  (ghost_id, lapsed))
        qdb.worker("--name", "rescuer", "--queue", "default,ghostly", *fast)

        def taken_over() -> bool:
            return qdb.scalar("""SELECT COUNT(*) FROM mysqlq_jobs
                                  WHERE status = 'running' AND worker_id IN (%s, %s)""", (frozen_id, ghost_id)) == 0

        # Within its lease plus 5 s (the bound; this test waits that long and no longer).
        qdb.wait_for(taken_over, timeout=lease + 5, what="the frozen leader's jobs and the lapsed claim")
        print(f"taken over {time.monotonic() - stopped_at:.1f}s after SIGSTOP")
        assert leader_name(qdb) == "rescuer"
        woken_from = len(log_of(qdb, 0))
    finally:
        os.kill(frozen.pid, signal.SIGCONT)
    qdb.wait_for(lambda: "reaper.leadership_lost" in log_of(qdb, 0)[woken_from:], timeout=20,
                 what="the woken leader to see it lost the role")
    time.sleep(3)  # a few of its old reaper rounds would have come by now
    woken = log_of(qdb, 0)[woken_from:]
    assert "reaper.reaped" not in woken
    # Nor does it run the rest of its batch, whose claim it can no longer be sure of (jobs it claims
    # afresh afterwards are its own again).
    (stale,) = re.findall(r"batch\.abandoned worker=frozen batch_id=(\d+)", woken)
    assert not [line for line in woken.splitlines() if "job.done" in line and f"batch_id={stale} " in line]
    assert leader_name(qdb) == "rescuer"
    qdb.wait_for(lambda: qdb.scalar("SELECT COUNT(*) FROM mysqlq_jobs WHERE status <> 'done'") == 0, timeout=60,
                 what="every job to be done")


def test_each_worker_is_judged_by_its_own_lease(qdb: QueueDB) -> None:
    """A leader with a 5 s lease and a worker with the default 60 s lease and 10 s heartbeat side by
    side: nobody is reaped, no claim is lost."""
    qdb.worker("--name", "quick", "--queue", "elsewhere", "--lease", "5", "--heartbeat-interval", "1")
    qdb.wait_for(lambda: leader_name(qdb) == "quick", timeout=30, what="the short-lease worker to lead")
    with qdb.producer() as producer:
        for _ in range(40):
            producer.enqueue("test.sleep", {"seconds": 0.6})
    qdb.worker("--name", "patient", "--batch-size", "1")  # the defaults: lease 60 s, heartbeat 10 s
    time.sleep(25)  # the fault showed every ~10 s: more than two heartbeat intervals of the patient one
    logs = qdb.logs()
    assert "reaper.reaped" not in logs
    assert "job.claim_lost" not in logs and "worker.registration_lost" not in logs
    assert leader_name(qdb) == "quick"
    assert qdb.scalar(f"SELECT COUNT(*) FROM {EVERY_JOB} WHERE status = 'done'") > 10
    assert qdb.scalar(f"SELECT MAX(attempts) FROM {EVERY_JOB}") == 1


def test_a_second_live_worker_with_the_same_name_is_refused_and_takes_nothing(qdb: QueueDB) -> None:
    with qdb.producer() as producer:
        job_id = producer.enqueue("test.sleep", {"seconds": 3})
    first = qdb.worker("--name", "1")
    qdb.wait_for(lambda: qdb.records(), what="the first worker to start the job")
    second = qdb.worker("--name", "1")
    assert second.wait(timeout=30) == 1
    assert "a worker named '1' is already running" in log_of(qdb, 1)
    assert len(log_of(qdb, 1).strip().splitlines()) == 1
    qdb.wait_for(lambda: qdb.scalar(f"SELECT status FROM {EVERY_JOB} WHERE id = %s", (job_id,)) == "done",
                 timeout=30, what="the first worker to finish its job")
    assert first.poll() is None
    assert [r[2] for r in qdb.records()] == ["start", "end"]
    assert qdb.query("SELECT name, pid FROM mysqlq_workers") == [("1", first.pid)]
    assert "claim_lost" not in qdb.logs()


def test_a_leader_that_stops_hands_the_role_on_at_once(qdb: QueueDB) -> None:
    leader = qdb.worker("--name", "a")
    qdb.wait_for(lambda: leader_name(qdb) == "a", timeout=30, what="the first worker to lead")
    qdb.worker("--name", "b")
    qdb.wait_for(lambda: qdb.scalar("SELECT COUNT(*) FROM mysqlq_workers") == 2, what="the second worker")
    leader.send_signal(signal.SIGTERM)
    assert leader.wait(timeout=30) == 0
    # The lease was released, not left to lapse: the next look of the other worker takes it.
    qdb.wait_for(lambda: leader_name(qdb) == "b", timeout=15, what="the other worker to lead")
