"""Many jobs at once in one worker: slots that overlap N-wide, async and plain handlers side by side,
time limits off the main thread, a stuck handler, SIGTERM with jobs in flight, claims that give back
what they cannot start soon, a claim in doubt, handlers that call sys.exit(), and a stop while the
server is unreachable."""

from __future__ import annotations

import collections
import os
import random
import signal
import subprocess
import threading
import time
from typing import Any

import pytest
from mysqlq_harness.jobs import EVERY_JOB

from mysqlq import Job
from mysqlq.core import logs
from mysqlq.core.handlers import Registry
from mysqlq.core.jobs import ClaimedJob
from mysqlq.store.db import Database
from mysqlq.worker.batches import Batches
from mysqlq.worker.dispatcher import Dispatcher, StopFlag
from mysqlq.worker.intake.claimer import Claim
from mysqlq.worker.intake.claimsize import HORIZON, Durations, InlineDurations, claim_limit, surplus
from mysqlq.worker.intake.concurrency_admission import Limits
from mysqlq.worker.running.cancels import Cancels
from mysqlq.worker.running.job_runner import Prepared, Runner
from mysqlq.worker.running.slots import Running, Slots
from mysqlq.worker.settling.leases import Leases
from mysqlq.worker.settling.report import Report
from mysqlq.worker.settling.worker_metrics import NoMetrics

from ..conftest import MYSQLQ, QueueDB


def spans(qdb: QueueDB, kinds: tuple[str, ...] = ("span", "aspan")) -> list[tuple[float, float, str]]:
    return [(float(r[2]), float(r[3]), r[1]) for r in qdb.records() if r[1] in kinds]


def widest_overlap(intervals: list[tuple[float, float, str]]) -> int:
    events = sorted([(start, 1) for start, _, _ in intervals] + [(end, -1) for _, end, _ in intervals])
    width = best = 0
    for _, step in events:  # an end sorts before a start at the same instant
        width += step
        best = max(best, width)
    return best


def burst(qdb: QueueDB, *args: str, timeout: float = 120) -> None:
    proc = qdb.worker("--burst", *args)
    assert proc.wait(timeout=timeout) == 0, qdb.logs()


def test_n_slots_overlap_n_wide_and_never_wider(qdb: QueueDB) -> None:
    with qdb.producer() as producer:
        producer.enqueue_many([Job("test.span", {"seconds": 0.3}) for _ in range(16)])
    burst(qdb, "--concurrency", "4")
    assert qdb.statuses() == {"done": 16}
    assert widest_overlap(spans(qdb)) == 4
    assert len({r[4] for r in qdb.records()}) == 4  # four threads took part


def test_async_and_plain_handlers_share_one_worker(qdb: QueueDB) -> None:
    with qdb.producer() as producer:
        producer.enqueue_many([Job("test.span" if i % 2 else "test.aspan", {"seconds": 0.3}) for i in range(12)])
    burst(qdb, "--concurrency", "4")
    assert qdb.statuses() == {"done": 12}
    found = spans(qdb)
    assert collections.Counter(kind for _, _, kind in found) == {"span": 6, "aspan": 6}
    assert widest_overlap(found) == 4
    # A coroutine ran while a thread did: they share the slots, not take turns.
    assert any(a_start < t_end and t_start < a_end
               for a_start, a_end, a_kind in found if a_kind == "aspan"
               for t_start, t_end, t_kind in found if t_kind == "span")
    # Every coroutine ran on the one event loop's thread.
    assert len({r[4] for r in qdb.records() if r[1] == "aspan"}) == 1


def test_a_thread_past_its_time_limit_fails_its_job_and_the_worker_goes_on(qdb: QueueDB) -> None:
    with qdb.producer() as producer:
        slow = producer.enqueue("test.sleep", {"seconds": 1.2}, max_attempts=1)
        after = [producer.enqueue("test.record") for _ in range(3)]
    burst(qdb, "--concurrency", "2", "--time-limit", "0.5")
    error = qdb.scalar("SELECT last_error FROM mysqlq_jobs WHERE id = %s", (slow,))
    assert qdb.scalar("SELECT status FROM mysqlq_jobs WHERE id = %s", (slow,)) == "dead"
    assert error.startswith("JobTimeout: ran past its time limit of 0.5s")
    assert all(qdb.scalar(f"SELECT status FROM {EVERY_JOB} WHERE id = %s", (i,)) == "done" for i in after)
    assert "job.returned_late" in qdb.logs()  # the thread came back later; its result was not used


@pytest.mark.parametrize("concurrency", ["1", "3"])
def test_a_coroutine_past_its_time_limit_is_cancelled(qdb: QueueDB, concurrency: str) -> None:
    with qdb.producer() as producer:
        job_id = producer.enqueue("test.asleep", {"seconds": 30}, max_attempts=1)
    burst(qdb, "--concurrency", concurrency, "--time-limit", "0.5", timeout=20)
    assert qdb.query(f"SELECT status FROM {EVERY_JOB}") == [("dead",)]
    assert "time limit of 0.5s" in qdb.scalar("SELECT last_error FROM mysqlq_jobs WHERE id = %s", (job_id,))
    assert [r[2] for r in qdb.records()] == ["start"]  # cancelled: it never reached its end


def test_a_stuck_thread_makes_the_worker_exit_non_zero_losing_nothing(qdb: QueueDB) -> None:
    with qdb.producer() as producer:
        stuck = producer.enqueue("test.stuck", max_attempts=5)
        others = [producer.enqueue("test.span", {"seconds": 0.5}) for _ in range(20)]
    worker = qdb.worker("--concurrency", "3", "--time-limit", "1.5")
    code = worker.wait(timeout=60)
    assert code == 70, qdb.logs()  # so that systemd's Restart=on-failure starts a fresh process
    logs = qdb.logs()
    assert "worker.stuck" in logs and "worker.stopped" in logs
    # The stuck job was recorded failed (its retry waits); nothing else is left running or lost.
    status, error = qdb.query("SELECT status, last_error FROM mysqlq_jobs WHERE id = %s", (stuck,))[0]
    assert status == "scheduled" and error.startswith("JobTimeout")
    rows = dict(qdb.query(f"SELECT id, status FROM {EVERY_JOB} WHERE id <> %s", (stuck,)))
    assert set(rows.values()) <= {"done", "ready"} and "done" in rows.values()
    ended = {int(r[0]) for r in qdb.records() if r[1] == "span"}
    assert {i for i in others if rows[i] == "done"} == ended  # every job it started, it finished
    assert qdb.scalar("SELECT SUM(attempts) FROM mysqlq_jobs WHERE status = 'ready'") in (0, None)
    # A fresh worker takes the rest (the stuck job set aside, or it would get stuck again).
    qdb.query("DELETE FROM mysqlq_jobs WHERE id = %s", (stuck,))
    burst(qdb, "--concurrency", "3")
    assert all(status == "done" for _, status in qdb.query(f"SELECT id, status FROM {EVERY_JOB} WHERE id <> %s",
                                                           (stuck,)))


def test_sigterm_finishes_every_job_in_flight_and_releases_the_rest(qdb: QueueDB) -> None:
    with qdb.producer() as producer:
        producer.enqueue_many([Job("test.sleep", {"seconds": 1}) for _ in range(10)])
    worker = qdb.worker("--concurrency", "3")
    qdb.wait_for(lambda: sum(r[2] == "start" for r in qdb.records()) == 3, what="three jobs in flight")
    worker.send_signal(signal.SIGTERM)
    assert worker.wait(timeout=30) == 0
    started = {r[0] for r in qdb.records() if r[2] == "start"}
    ended = {r[0] for r in qdb.records() if r[2] == "end"}
    assert len(started) == 3 and started == ended  # all three finished
    rows = qdb.query(f"SELECT id, status, attempts, batch_id FROM {EVERY_JOB}")
    assert {str(i) for i, status, _, _ in rows if status == "done"} == started
    assert all((status, attempts, batch) == ("ready", 0, 0) for i, status, attempts, batch in rows
               if str(i) not in started)


def test_slow_jobs_are_not_hoarded_a_blind_full_claim_gives_back_what_it_cannot_start_soon(qdb: QueueDB) -> None:
    """Before a queue's durations are known a worker claims a full batch; once its first jobs have run
    past the claim horizon it gives back what its slots cannot start soon and wakes the other worker."""
    a = qdb.worker("--concurrency", "2", "--name", "a")
    b = qdb.worker("--concurrency", "2", "--name", "b")
    qdb.wait_for(lambda: qdb.scalar("SELECT COUNT(*) FROM mysqlq_workers") == 2, what="two workers")
    with qdb.producer() as producer:
        producer.enqueue_many([Job("test.sleep", {"seconds": 0.5}) for _ in range(8)])
    qdb.wait_for(lambda: qdb.statuses() == {"done": 8}, timeout=60, what="the jobs to be done")
    assert a.poll() is None and b.poll() is None
    rows = qdb.query(f"SELECT id, worker, attempts FROM {EVERY_JOB}")
    assert {attempts for _, _, attempts in rows} == {1}  # given back unspent: no attempt counted twice
    per_worker = collections.Counter(worker for _, worker, _ in rows)
    assert set(per_worker) == {"a", "b"} and min(per_worker.values()) >= 2, per_worker  # (4 and 4 when idle)
    released = [line for line in qdb.logs().splitlines() if "batch.released" in line]
    assert released and all("left for other workers" in line for line in released), released
    starts = [int(r[0]) for r in qdb.records() if r[2] == "start"]
    assert sorted(starts) == sorted(job_id for job_id, _, _ in rows)  # each ran once


def test_a_blind_claim_is_looked_at_even_when_the_loop_comes_back_after_the_horizon(qdb: QueueDB) -> None:
    """A worker busy elsewhere (its first leader chores, say) may come to wait only after its first
    slow job has passed the claim horizon: the look that gives back what its slots cannot start soon
    is then due at once, not when the job finishes (until then the other workers would sit idle);
    and once looked at, the batch is not looked at again and again (no busy loop)."""
    settings = qdb.settings(concurrency=2)
    seen: dict[str, Any] = {}

    def run() -> None:  # off the main thread: the dispatcher's time-limit alarm is not installed
        log = logs.get_logger("test")
        db = Database(settings.dsn)
        runner, cancels = Runner(settings, Registry(), log, Cancels()), Cancels()
        leases = Leases(settings.lease, settings.heartbeat_interval)
        batches = Batches(settings, db, log, leases, cancels, Limits(Registry(), db, log), Report(NoMetrics()),
                          lambda queues: None)
        dispatcher = Dispatcher(settings, runner, batches, Slots(settings.concurrency, settings, runner), leases,
                        StopFlag(), log, lambda queues: None)
        try:
            jobs = [ClaimedJob(i, "default", "test.sleep", b"{}", 1, 5, None) for i in range(1, 6)]
            batches.add(Claim(1, jobs, False, time.monotonic()), unsized=True)
            job = dispatcher.batches.by_id[1].jobs.popleft()  # in a slot for 0.2 s, not finished
            started = time.monotonic() - 0.2
            prepared = Prepared(job, lambda payload, ctx: None, None, 60.0, False, False, started)
            slot = dispatcher.slots.free.pop()
            dispatcher.slots.running[slot] = Running(job, 1, slot, prepared, started + 60.0)
            seen["due"], seen["now"] = dispatcher.deadline(), time.monotonic()
            dispatcher.shrink(time.monotonic())
            seen["kept"], seen["after"] = len(dispatcher.batches.by_id[1].jobs), dispatcher.deadline()
        finally:
            dispatcher.slots.running.clear()
            dispatcher.close()
            db.close()

    thread = threading.Thread(target=run)
    thread.start()
    thread.join(30)
    assert seen["due"] is not None and seen["due"] <= seen["now"] - 0.2 + HORIZON + 0.01  # due at once
    assert seen["kept"] == 1  # the free slot's one; the other three went back
    assert seen["after"] > seen["now"] + 30  # looked at: only the running job's time limit is left


@pytest.mark.parametrize("concurrency", ["1", "3"])
def test_a_worker_frozen_past_its_lease_runs_nothing_more_of_the_stale_claim(qdb: QueueDB, concurrency: str) -> None:
    with qdb.producer() as producer:
        producer.enqueue_many([Job("test.record", {"sleep": 0.02}) for _ in range(300)])
    worker = qdb.worker("--concurrency", concurrency, "--lease", "3", "--heartbeat-interval", "0.5",
                        "--no-processlist-check", "--name", "frozen")
    qdb.wait_for(lambda: len(qdb.records()) >= 20, what="the drain to be under way")
    stolen: set[int] = set()
    for _ in range(50):  # freeze it at a moment it holds claimed jobs it has not started yet
        os.kill(worker.pid, signal.SIGSTOP)
        try:
            time.sleep(0.2)  # let a statement in flight land
            held = {row[0] for row in qdb.query(
                "SELECT id FROM mysqlq_jobs WHERE status = 'running'"
                " AND worker_id = (SELECT id FROM mysqlq_workers WHERE name = 'frozen')")}
            records_before = qdb.records()  # a job's record is written as it starts
            ran_before = {int(r[0]) for r in records_before}
            if held - ran_before:
                # Its claims are taken over while it is frozen, as another worker's claim after the reaper
                # gave them back would hold them: a live worker's, under a fresh lease, so that the reaper
                # (this worker, its leader, once it runs again) has nothing to give back.
                stolen = held
                qdb.query("INSERT INTO mysqlq_workers (name, host, pid, connection_id, queues, started_at,"
                          " heartbeat_at, lease_us) VALUES ('thief', 'elsewhere', 1, 0, 'default', NOW(6), NOW(6),"
                          " 86400000000)")
                qdb.query("UPDATE mysqlq_jobs SET batch_id = 999, running_batch = 999,"
                          " worker_id = (SELECT id FROM mysqlq_workers WHERE name = 'thief'),"
                          " lease_until = NOW(6) + INTERVAL 1 HOUR"
                          " WHERE id IN ({})".format(",".join(map(str, held))))
                time.sleep(3.5)  # past its lease
        finally:
            os.kill(worker.pid, signal.SIGCONT)
        if stolen:
            break
        time.sleep(0.01 * random.random())
    time.sleep(2)
    worker.send_signal(signal.SIGTERM)
    assert worker.wait(timeout=30) == 0
    assert stolen, "the worker never held an unstarted claimed job when frozen"
    ran_after = [int(r[0]) for r in qdb.records()[len(records_before):]]
    assert not set(ran_after) & stolen  # none of the stale batch ran again
    logs = qdb.logs()
    assert logs.count("batch.abandoned") >= 1
    assert not any(f"job.done job_id={job_id} " in logs for job_id in stolen - ran_before)
    for job_id in stolen & ran_before:  # in hand when frozen: finished, but fenced out, so not "done"
        assert f"job.done job_id={job_id} " not in logs
    holders = qdb.query("SELECT DISTINCT w.name FROM mysqlq_jobs j JOIN mysqlq_workers w ON w.id = j.worker_id"
                        " WHERE j.status = 'running' AND j.id IN ({})".format(",".join(map(str, stolen))))
    assert set(holders) == {("thief",)}


@pytest.mark.parametrize("concurrency", ["1", "3"])
@pytest.mark.parametrize("how", ["exit", "systemexit", "interrupt"])
def test_a_handler_that_exits_fails_its_job_and_the_worker_goes_on(qdb: QueueDB, how: str, concurrency: str) -> None:
    with qdb.producer() as producer:
        bad = producer.enqueue("test.exits", {"how": how}, max_attempts=1)
        good = producer.enqueue("test.record")
    burst(qdb, "--concurrency", concurrency)
    status, error = qdb.query("SELECT status, last_error FROM mysqlq_jobs WHERE id = %s", (bad,))[0]
    assert status == "dead"
    assert error.split(":")[0] in ("SystemExit", "KeyboardInterrupt") and "Traceback" in error
    assert qdb.scalar(f"SELECT status FROM {EVERY_JOB} WHERE id = %s", (good,)) == "done"


def test_sigterm_ends_the_wait_for_an_unreachable_server(qdb: QueueDB) -> None:
    env = qdb.env(MYSQLQ_DSN="mysql://root@127.0.0.1:1/nowhere")  # nothing listens on port 1
    log = qdb.tmp / "worker-unreachable.log"
    with log.open("wb") as out:
        worker = subprocess.Popen([MYSQLQ, "worker"], env=env, stdout=out, stderr=subprocess.STDOUT)
    qdb.procs.append(worker)
    qdb.wait_for(lambda: log.read_text().count("db.retry") >= 2, timeout=30, what="the worker to be retrying")
    worker.send_signal(signal.SIGTERM)
    assert worker.wait(timeout=2) == 0
    text = log.read_text()
    assert "worker.stopped_waiting" in text and "worker.stopped" in text


def test_claims_are_sized_from_free_slots_and_recent_durations() -> None:
    # No duration known yet: a full claim, as for short jobs (the dispatcher gives back the surplus).
    assert claim_limit(slots=5, free=5, stock=0, average=None, batch_size=100) == 100
    assert claim_limit(slots=5, free=0, stock=99, average=None, batch_size=100) == 0
    # No-op jobs still come in batches of the full size; half-slow ones, one per slot plus what starts soon.
    assert claim_limit(slots=5, free=5, stock=0, average=0.0001, batch_size=100) == 100
    assert claim_limit(slots=5, free=5, stock=0, average=0.5, batch_size=100) == 5
    assert claim_limit(slots=5, free=1, stock=0, average=0.05, batch_size=100) == 6
    # Busy slots and a stock in hand: wait until it runs low, then top it up in one claim.
    assert claim_limit(slots=5, free=0, stock=4, average=0.05, batch_size=100) == 0
    assert claim_limit(slots=5, free=0, stock=2, average=0.05, batch_size=100) == 3
    assert claim_limit(slots=5, free=0, stock=0, average=0.5, batch_size=100) == 0
    # One slot: a whole batch once the last one is used up, whatever the durations.
    assert claim_limit(slots=1, free=1, stock=0, average=None, batch_size=100) == 100
    assert claim_limit(slots=1, free=1, stock=0, average=5.0, batch_size=100) == 100
    assert claim_limit(slots=1, free=1, stock=3, average=0.0001, batch_size=100) == 0


def test_a_blind_claim_keeps_what_its_slots_start_soon() -> None:
    # Jobs of 0.5 s on 5 busy slots: none starts within the horizon, so all 95 unstarted go back.
    assert surplus(slots=5, free=0, stock=95, average=0.5, batch_size=100) == 95
    # A lower bound of 50 ms (the horizon): one per slot is kept.
    assert surplus(slots=5, free=0, stock=15, average=0.05, batch_size=100) == 10
    # Jobs of 10 ms: 25 start within the horizon, and the free slots take one each at once.
    assert surplus(slots=5, free=2, stock=90, average=0.01, batch_size=100) == 63
    # No-op jobs: the whole batch starts soon, nothing goes back.
    assert surplus(slots=5, free=5, stock=99, average=0.00002, batch_size=100) == 0


def test_durations_of_a_run_of_jobs_count_as_each_job_observed_in_turn() -> None:
    one_by_one, at_once = Durations(), Durations()
    for average in (one_by_one, at_once):
        average.observe("q", 1.0)
    for _ in range(10):
        one_by_one.observe("q", 0.5)
    at_once.observe_many("q", 5.0, 10)  # ten jobs of 0.5 s
    assert at_once.get("q") == pytest.approx(one_by_one.get("q"))
    at_once.observe_many("new", 3.0, 2)  # nothing known before: the run's mean
    assert at_once.get("new") == pytest.approx(1.5)


def test_a_tally_observes_each_run_of_one_queue_and_handler() -> None:
    def job(queue: str, handler: str) -> ClaimedJob:
        return ClaimedJob(1, queue, handler, b"null", 1, 5, None)

    tally, by_queue, by_handler = InlineDurations(), Durations(), Durations()
    for queue, handler, seconds in [("a", "h", 0.1), ("a", "h", 0.3), ("b", "h", 1.0), ("a", "g", 2.0)]:
        tally.add(job(queue, handler), seconds)
    tally.observe(by_queue, by_handler)
    expected_queue, expected_handler = Durations(), Durations()
    for key, total, count in [("a", 0.4, 2), ("b", 1.0, 1), ("a", 2.0, 1)]:
        expected_queue.observe_many(key, total, count)
    for key, total, count in [("h", 0.4, 2), ("h", 1.0, 1), ("g", 2.0, 1)]:
        expected_handler.observe_many(key, total, count)
    for key in ("a", "b"):
        assert by_queue.get(key) == pytest.approx(expected_queue.get(key))
    for key in ("h", "g"):
        assert by_handler.get(key) == pytest.approx(expected_handler.get(key))
    tally.observe(by_queue, by_handler)  # it started over: nothing more is observed
    assert by_queue.get("a") == pytest.approx(expected_queue.get("a"))


def test_the_heartbeat_extends_the_lease_of_every_batch_in_hand(qdb: QueueDB) -> None:
    fast = ("--lease", "2", "--heartbeat-interval", "0.3", "--no-processlist-check")
    qdb.worker("--concurrency", "3", "--name", "holder", *fast)
    qdb.worker("--queue", "elsewhere", "--name", "reaper", *fast)  # reaps for everyone, claims nothing here
    ids = []
    with qdb.producer() as producer:
        for n in range(3):  # one at a time: three claims, three batches in one worker's hands
            ids.append(producer.enqueue("test.sleep", {"seconds": 4}))
            qdb.wait_for(lambda n=n: sum(r[2] == "start" for r in qdb.records()) == n + 1, what="the job to start")
    time.sleep(2.3)  # past the first claims' own 2 s lease: only extensions can keep them leased
    leased = qdb.query("SELECT id FROM mysqlq_jobs WHERE status = 'running' AND lease_until > NOW(6)")
    assert sorted(row[0] for row in leased) == sorted(ids)
    qdb.wait_for(lambda: qdb.statuses() == {"done": 3}, timeout=60, what="the long jobs to finish")
    rows = qdb.query(f"SELECT batch_id, worker, attempts FROM {EVERY_JOB}")
    assert len({batch for batch, _, _ in rows}) == 3
    assert {(worker, attempts) for _, worker, attempts in rows} == {("holder", 1)}  # none taken over
    assert sorted(r[2] for r in qdb.records()) == ["end"] * 3 + ["start"] * 3
    assert "batch.abandoned" not in qdb.logs()
