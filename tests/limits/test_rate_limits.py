"""Rate limits: at most N jobs of one bucket start in any window of the period, across every worker,
through a worker's kill -9 and a restart of the database; a job over its limit waits for its turn
without spending an attempt; operators set, lift and reset limits at run time.

Starts are read from the jobs' started_at: a rate-limited job's is the server's time of its
admission, the time its start is counted at."""

from __future__ import annotations

import collections
import datetime
import json
import time

import pytest
from mysqlq_harness.jobs import EVERY_JOB

import mysqlq
from mysqlq import Job
from mysqlq.core.errors import ConfigError
from mysqlq.core.rates import RateLimit, parse_rate
from mysqlq.store import claims, rates
from mysqlq.store.db import transaction

from ..conftest import QueueDB

pytestmark = pytest.mark.slow


def starts(qdb: QueueDB, handler: str | None = None) -> dict[str, list[datetime.datetime]]:
    """Start times by bucket key (the payload's "key", or "" for none), in order."""
    where = "WHERE status = 'done'" + (" AND handler = %s" if handler else "")
    rows = qdb.query(f"SELECT payload, started_at FROM {EVERY_JOB} {where} ORDER BY started_at",
                     (handler,) if handler else None)
    found: dict[str, list[datetime.datetime]] = collections.defaultdict(list)
    for payload, started in rows:
        found[_field(payload, "key")].append(started)
    return found


def _field(payload: bytes, name: str) -> str:
    decoded = json.loads(payload)
    return str(decoded.get(name, "")) if isinstance(decoded, dict) else ""


def most_in_a_window(times: list[datetime.datetime], period: float) -> int:
    """The most starts any window of ``period`` seconds holds (sliding, over sorted times)."""
    most, first = 0, 0
    for last, at in enumerate(times):
        while (at - times[first]).total_seconds() >= period:
            first += 1
        most = max(most, last - first + 1)
    return most


def test_four_workers_hold_one_key_to_50_a_second_and_reach_it(qdb: QueueDB) -> None:
    jobs = 2000
    with qdb.producer() as producer:
        producer.enqueue_many([Job("test.rated") for _ in range(jobs)])
    for index in range(4):  # default slots: 5 each
        qdb.worker("--name", f"r{index}")
    qdb.wait_done(jobs, timeout=120)
    (times,) = starts(qdb).values()
    assert len(times) == jobs
    assert most_in_a_window(times, 1.0) <= 50
    rate = (jobs - 50) / (times[-1] - times[49]).total_seconds()  # past the first second's burst
    assert rate >= 0.9 * 50, rate
    assert qdb.scalar(f"SELECT MAX(attempts) FROM {EVERY_JOB}") == 1  # waiting spent no attempt
    assert "job.rate_limited" in qdb.logs()


def entries(qdb: QueueDB) -> list[float]:
    """When test.rated's handler was entered, by its own clock (time.time()), every run counted:
    a job run twice (its worker killed) called its API twice."""
    return sorted(float(words[4]) for words in qdb.records() if words[2:3] == ["rated"])


def most_entered_in_a_window(times: list[float], period: float) -> int:
    return most_in_a_window([datetime.datetime.fromtimestamp(at) for at in times], period)


def drain_at_the_handlers_clock(qdb: QueueDB, jobs: int, per_second: int, kills: int = 0) -> list[float]:
    """Four workers of default slots drain ``jobs`` of test.rated held to ``per_second``; ``kills``
    times meanwhile one of them is killed with -9 and another started. The handler's entry times."""
    if per_second != 50:  # its code says 50/s
        qdb.cli("limits", "set", "--handler", "test.rated", f"{per_second}/s", check=True)
    with qdb.producer() as producer:
        producer.enqueue_many([Job("test.rated") for _ in range(jobs)])
    options = ("--heartbeat-interval", "0.5", "--lease", "3") if kills else ()
    workers = [qdb.worker(*options, "--name", f"h{index}") for index in range(4)]
    for kill in range(kills):
        qdb.wait_for(lambda kill=kill: len(qdb.records()) > jobs * (kill + 1) // (kills + 2), timeout=120,
                     what="the drain to go on")
        workers.pop(0).kill()  # kill -9: its jobs in hand, admitted or running, go back by their lease
        workers.append(qdb.worker(*options, "--name", f"h{4 + kill}"))
    qdb.wait_done(jobs, timeout=180)
    return entries(qdb)


@pytest.mark.parametrize(("jobs", "per_second"), [(600, 50), (1200, 40)])
def test_the_handler_sees_at_most_the_limit_in_any_second_and_nearly_the_limit(
        qdb: QueueDB, jobs: int, per_second: int) -> None:
    # What a user limits is the calls their handler makes to someone else's API, which counts them
    # as they arrive: the handler's own clock at entry, not the admission's stamp, is the measure.
    times = drain_at_the_handlers_clock(qdb, jobs, per_second)
    assert len(times) == jobs
    assert most_entered_in_a_window(times, 1.0) <= per_second
    rate = (jobs - per_second) / (times[-1] - times[per_second - 1])  # past the first second's burst
    # Most drains reach 0.96-0.97 of the limit; some dip to 0.81-0.91 (measured alike with this code
    # and the code before its last change): a delay between a place freeing and the next admission,
    # not understood yet. The floor catches a limit that throttles a drain well under its rate.
    assert rate >= 0.85 * per_second, rate


def test_the_handler_sees_at_most_the_limit_while_workers_are_killed(qdb: QueueDB) -> None:
    times = drain_at_the_handlers_clock(qdb, 600, 50, kills=2)
    assert len(times) >= 600  # a job whose worker died while it ran ran again: both calls count
    assert most_entered_in_a_window(times, 1.0) <= 50


def test_a_hundred_keys_each_held_to_5_a_second(qdb: QueueDB) -> None:
    keys, each = 100, 12
    with qdb.producer() as producer:
        producer.enqueue_many([Job("test.rated_key", {"key": f"k{k}"}) for n in range(each) for k in range(keys)])
    for index in range(2):
        qdb.worker("--name", f"k{index}")
    qdb.wait_done(keys * each, timeout=120)
    by_key = starts(qdb)
    assert len(by_key) == keys and all(len(times) == each for times in by_key.values())
    assert max(most_in_a_window(times, 1.0) for times in by_key.values()) == 5


def test_one_worker_starts_a_keys_jobs_in_order_of_id(qdb: QueueDB) -> None:
    with qdb.producer() as producer:
        ids = [producer.enqueue("test.rated_key", {"key": "one"}) for _ in range(15)]
    qdb.worker("--concurrency", "1")
    qdb.wait_done(15, timeout=60)
    rows = qdb.query(f"SELECT id FROM {EVERY_JOB} ORDER BY started_at, id")
    assert [row[0] for row in rows] == ids


def test_jobs_set_aside_together_start_in_order_of_id_within_each_key(qdb: QueueDB) -> None:
    # One claim takes jobs of three keys; each key's jobs over its limit are set aside together (one
    # statement for all), come back one place apart, and still start in order of id within their key.
    with qdb.producer() as producer:
        ids = [producer.enqueue("test.rated_key", {"key": f"k{n % 3}"}) for n in range(36)]
    qdb.worker()  # default slots: claims of several jobs
    qdb.wait_done(36, timeout=60)
    rows = qdb.query(f"SELECT id, payload FROM {EVERY_JOB} ORDER BY started_at, id")
    for key in ("k0", "k1", "k2"):
        started = [job_id for job_id, payload in rows if _field(payload, "key") == key]
        assert started == [job_id for n, job_id in enumerate(ids) if f"k{n % 3}" == key]
    for times in starts(qdb).values():
        assert most_in_a_window(times, 1.0) == 5
    assert qdb.scalar(f"SELECT MAX(attempts) FROM {EVERY_JOB}") == 1


def test_the_limit_holds_through_a_kill_and_a_database_restart(qdb: QueueDB) -> None:
    jobs = 600
    with qdb.producer() as producer:
        producer.enqueue_many([Job("test.rated") for _ in range(jobs)])
    options = ("--heartbeat-interval", "0.5", "--lease", "5")
    first = qdb.worker(*options, "--name", "first")
    qdb.worker(*options, "--name", "second")
    qdb.wait_for(lambda: len(qdb.records()) > 100, timeout=60, what="the drain to be under way")
    first.kill()  # kill -9
    qdb.wait_for(lambda: len(qdb.records()) > 250, timeout=60, what="the drain to go on")
    qdb.server.kill()
    qdb.server.start()
    qdb.worker(*options, "--name", "third")
    qdb.wait_done(jobs, timeout=120)
    (times,) = starts(qdb).values()
    assert len(times) == jobs and most_in_a_window(times, 1.0) <= 50


def test_operators_set_lift_and_reset_limits_at_run_time(qdb: QueueDB) -> None:
    qdb.worker()
    qdb.wait_for(lambda: qdb.scalar("SELECT COUNT(*) FROM mysqlq_workers") == 1, what="the worker")
    result = qdb.cli("limits", "set", "--handler", "test.record", "5/s", check=True)
    assert result.stdout.strip() == "handler test.record: at most 5 jobs start in any 1 s"
    time.sleep(1.0)  # every worker reads it within a second (the change hints them to poll)
    with qdb.producer() as producer:
        producer.enqueue_many([Job("test.record") for _ in range(20)])
    qdb.wait_done(20, timeout=60)
    times = [row[0] for row in qdb.query(f"SELECT started_at FROM {EVERY_JOB} ORDER BY started_at")]
    assert most_in_a_window(times, 1.0) == 5
    listing = qdb.cli("limits", check=True).stdout
    assert "set by an operator: handler test.record: 5/s" in listing and "handler:test.record" in listing
    qdb.cli("limits", "lift", "--handler", "test.rated", check=True)  # its code says 50/s: lifted
    time.sleep(1.0)
    with qdb.producer() as producer:
        producer.enqueue_many([Job("test.rated") for _ in range(120)])
    qdb.wait_done(140, timeout=60)
    rated = [row[0] for row in qdb.query(f"SELECT started_at FROM {EVERY_JOB} WHERE handler = 'test.rated' "
                                         "ORDER BY started_at")]
    assert most_in_a_window(rated, 1.0) > 50  # lifted: a hundred and twenty at once
    # A queue's limit applies to its jobs whose handler has none: test.record's, once reset.
    qdb.cli("limits", "set", "--queue", "default", "2/s", check=True)
    qdb.cli("limits", "reset", "--handler", "test.record", check=True)
    time.sleep(1.0)
    with qdb.producer() as producer:
        producer.enqueue_many([Job("test.record", {"tag": "q"}) for _ in range(6)])
    qdb.wait_done(146, timeout=60)
    queue_times = [started for payload, started in qdb.query(f"SELECT payload, started_at FROM {EVERY_JOB} "
                                                             "ORDER BY started_at") if _field(payload, "tag") == "q"]
    assert most_in_a_window(queue_times, 1.0) == 2


def test_rate_limits_are_read_as_people_write_them() -> None:
    assert parse_rate("100/m") == RateLimit(100, 60.0)
    assert parse_rate("20/10s") == RateLimit(20, 10.0)
    assert str(parse_rate("5/s")) == "5/s"
    for bad in ("5", "0/s", "5/x", "5/0s", "5/8d", "-1/s"):
        with pytest.raises(ConfigError, match="rate limit"):
            parse_rate(bad)
    with pytest.raises(ConfigError, match="rate_key"):
        mysqlq.handler(rate_key=lambda payload: payload["customer"])


def test_a_bad_limit_on_the_command_line_is_one_line(qdb: QueueDB) -> None:
    result = qdb.cli("limits", "set", "--handler", "test.record", "fast")
    assert result.returncode == 1 and result.stderr.strip().count("\n") == 0 and "N/PERIOD" in result.stderr
    result = qdb.cli("limits", "set", "5/s")
    assert result.returncode == 1 and "give one of --handler NAME or --queue NAME" in result.stderr


def test_limits_in_use_are_listed_exported_and_shown(qdb: QueueDB) -> None:
    from mysqlq_harness.net import get

    from ..web_fixtures import scrape, web_server

    with qdb.producer() as producer:
        producer.enqueue_many([Job("test.rated_key", {"key": "a"}) for _ in range(40)])
    qdb.worker("--concurrency", "1")
    qdb.wait_for(lambda: qdb.statuses().get("done", 0) >= 5, timeout=30, what="the first jobs")
    listing = qdb.cli("limits", check=True).stdout
    assert "handler:test.rated_key:a  limit=5/s" in listing
    waiting = int(listing.split("waiting=")[1].split()[0])
    assert 0 < waiting < 40
    with web_server(qdb) as base:
        metrics = scrape(base + "/metrics")
        status, page = get(base + "/")
    limit = (("limit", "handler:test.rated_key"),)
    assert metrics["mysqlq_rate_limited_jobs_waiting"][limit] > 0
    assert metrics["mysqlq_rate_limited_starts_last_minute"][limit] >= 5
    assert metrics["mysqlq_rate_limit_keys"][limit] == 1
    assert status == 200 and "Rate limits in use" in page and 'data-limit="handler:test.rated_key"' in page


def test_a_job_whose_turn_comes_within_moments_stays_claimed_and_starts_then(qdb: QueueDB) -> None:
    # One start per half second: the second job's turn comes then. Within the hold (the worker's is
    # TURN_SPAN; a second here, so that a slow machine cannot make the test's point moot), it stays
    # claimed, in the bucket's waiting list, and starts when admitted again at its turn. Without a
    # hold (or past it) the third is set aside as a scheduled job.
    limit, bucket = RateLimit(1, 0.5), "handler:test.rated"
    with qdb.producer() as producer:
        first, second, third = (producer.enqueue("test.rated") for _ in range(3))
    conn = qdb.connect()
    try:
        with conn.cursor() as cur:
            assert claims.claim_update(cur, "default", 7, 1, 60, 2) == 2
            admitted = rates.admit(cur, 7, [rates.Limited(first, bucket, limit)], hold=1.0)
            assert admitted.admitted == {first}
            held = rates.admit(cur, 7, [rates.Limited(second, bucket, limit)], hold=1.0)
            assert not held.admitted and not held.deferred and set(held.held) == {second}
            assert 0 < held.held[second] <= limit.counted.period  # its period and the grace after the first
            assert qdb.query("SELECT status, running_batch FROM mysqlq_jobs WHERE id = %s", (second,)) == [
                ("running", 7)]
            waiting = "SELECT COUNT(*) FROM mysqlq_rate_waiting WHERE job_id = %s"
            assert qdb.scalar(waiting, (second,)) == 1  # jobs claimed later queue behind it
            time.sleep(held.held[second])
            again = rates.admit(cur, 7, [rates.Limited(second, bucket, limit)])
            assert again.admitted == {second} and not again.held and not again.deferred
            assert qdb.scalar(waiting, (second,)) == 0
            assert claims.claim_update(cur, "default", 8, 1, 60, 1) == 1
            set_aside = rates.admit(cur, 8, [rates.Limited(third, bucket, limit)])  # no hold
            assert not set_aside.admitted and set(set_aside.deferred) == {third} and not set_aside.held
    finally:
        conn.close()
    assert qdb.scalar("SELECT status FROM mysqlq_jobs WHERE id = %s", (third,)) == "scheduled"
    assert qdb.scalar("SELECT COUNT(*) FROM mysqlq_rate_starts") == 2


def test_a_worker_gives_back_the_jobs_it_could_not_start_in_time_uncounted(qdb: QueueDB) -> None:
    # One slot, and a handler that takes 100 ms: of the jobs one claim admits, the first runs and the
    # others pass their grace waiting for it, so they go back unrun (job.rate_late) and come round
    # again. The starts that stay counted are the runs', each at its job's started_at: the late ones'
    # were deleted as they went back, and took no place in the window.
    jobs = 6
    with qdb.producer() as producer:
        producer.enqueue_many([Job("test.rated", {"sleep": 0.1}) for _ in range(jobs)])
    qdb.worker("--concurrency", "1")
    qdb.wait_done(jobs, timeout=60)
    assert "job.rate_late" in qdb.logs()
    assert sorted(qdb.query("SELECT job_id, started_at FROM mysqlq_rate_starts")) == sorted(
        qdb.query(f"SELECT id, started_at FROM {EVERY_JOB}"))
    assert qdb.scalar(f"SELECT MAX(attempts) FROM {EVERY_JOB}") == 1


def test_a_claim_that_admits_holds_none_and_a_job_given_back_late_comes_back_first(qdb: QueueDB) -> None:
    # A job admitted has its handler entered within its grace, so its claim holds no other job for a
    # turn (that wait would use the grace up): the second is set aside although its turn is within
    # the hold. Given back late (not entered in time), the first waits in its bucket again and its
    # start no longer counts, so it comes back as a job that waited to the place its start left: at
    # once, ahead of the new third, which queues behind the second.
    limit, bucket = RateLimit(1, 0.5), "handler:test.rated"
    with qdb.producer() as producer:
        first, second, third = (producer.enqueue("test.rated") for _ in range(3))
    conn = qdb.connect()
    try:
        with conn.cursor() as cur:
            assert claims.claim_update(cur, "default", 7, 1, 60, 2) == 2
            mixed = rates.admit(cur, 7, [rates.Limited(job, bucket, limit) for job in (first, second)], hold=1.0)
            assert mixed.admitted == {first} and not mixed.held and set(mixed.deferred) == {second}
            with transaction(conn):
                rates.wait_again(cur, [rates.GivenBack(first, bucket, mixed.stamps[first])])
                assert claims.release(cur, 7, [first]) == 1
            assert claims.claim_update(cur, "default", 8, 1, 60, 2) == 2  # the first and the third
            again = rates.admit(cur, 8, [rates.Limited(job, bucket, limit) for job in (first, third)])
            assert again.admitted == {first} and set(again.deferred) == {third}
    finally:
        conn.close()
    run_at = dict(qdb.query("SELECT id, run_at FROM mysqlq_jobs WHERE id IN (%s, %s)", (second, third)))
    assert run_at[second] < run_at[third]
    assert qdb.query("SELECT job_id, started_at FROM mysqlq_rate_starts") == [(first, again.stamps[first])]


def test_a_job_given_back_late_no_longer_counts_its_start(qdb: QueueDB) -> None:
    # Its handler was never entered, so the start its admission recorded is deleted in the transaction
    # that gives it back: exactly that row (its bucket, its stamp to the microsecond as the server gave
    # it, its job), not another job's start at the same time nor another start of the same job. Its
    # place in the window is free again: claimed with the next job, both start.
    limit, bucket = RateLimit(4, 60.0), "handler:test.rated"
    with qdb.producer() as producer:
        first, second = (producer.enqueue("test.rated") for _ in range(2))
    conn = qdb.connect()
    try:
        with conn.cursor() as cur:
            assert claims.claim_update(cur, "default", 7, 1, 60, 1) == 1  # the first
            admitted = rates.admit(cur, 7, [rates.Limited(first, bucket, limit)])
            assert admitted.admitted == {first}
            stamp = admitted.stamps[first]
            starts = "SELECT bucket, started_at, job_id FROM mysqlq_rate_starts ORDER BY started_at, job_id"
            assert qdb.query(starts) == [(bucket, stamp, first)]
            other = stamp + datetime.timedelta(microseconds=1)
            cur.execute("INSERT INTO mysqlq_rate_starts (bucket, started_at, job_id) VALUES (%s, %s, %s), (%s, %s, %s)",
                        (bucket, stamp, second + 1000, bucket, other, first))  # 3 of the 4 places taken
            with transaction(conn):
                rates.wait_again(cur, [rates.GivenBack(first, bucket, stamp)])
                assert claims.release(cur, 7, [first]) == 1
            assert qdb.query(starts) == [(bucket, stamp, second + 1000), (bucket, other, first)]
            assert qdb.scalar("SELECT COUNT(*) FROM mysqlq_rate_waiting WHERE job_id = %s", (first,)) == 1
            assert claims.claim_update(cur, "default", 8, 1, 60, 2) == 2
            again = rates.admit(cur, 8, [rates.Limited(job, bucket, limit) for job in (first, second)])
            assert again.admitted == {first, second} and not again.deferred
    finally:
        conn.close()
