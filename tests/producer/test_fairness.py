"""Fair queues against the real server: a job's fairness key and its turn, given at enqueue by every
way of enqueueing; the claim's order across keys (a late key's jobs start before a big key's backlog
drains, on several workers with default slots); jobs without a key served as one key of their own
where keyed jobs wait; a job keeps its key and turn when retried; weights; what a job without a key
pays (nothing); bad keys refused in one line, writing nothing."""

from __future__ import annotations

import datetime as dt
import itertools
import json

import pytest
from mysqlq_harness.jobs import EVERY_JOB, every_job

from mysqlq import InvalidJob, Job, enqueue_on
from mysqlq.leader.schedule_file import parse
from mysqlq.store import claims, fairness
from mysqlq.store.db import Database

from ..conftest import QueueDB
from ..cost.test_enqueue_cost import session_counters
from ..limits.test_rate_limits import most_in_a_window, starts
from ..ops_fixtures import assert_one_line_error


def keyed(qdb: QueueDB) -> list[tuple[int, str | None, int]]:
    """Every live job's (id, fairness key, turn), by id."""
    return [(int(i), k, int(t)) for i, k, t in qdb.query("SELECT id, fairness_key, turn FROM mysqlq_jobs ORDER BY id")]


def claim_order(qdb: QueueDB, limit: int, queue: str = "default", batch: int = 77) -> list[int]:
    """The ids one claim of ``limit`` jobs takes, in the order the worker reads them back."""
    db = Database(qdb.settings().dsn)
    try:
        def claim(cur: object) -> list[int]:
            claims.claim_update(cur, queue, batch, 1, 60, limit)  # type: ignore[arg-type]
            cur.execute("SELECT id FROM mysqlq_jobs WHERE running_batch = %s ORDER BY priority, turn, id",  # type: ignore[attr-defined]
                        (batch,))
            return [int(row[0]) for row in cur.fetchall()]  # type: ignore[attr-defined]

        return db.run(claim)
    finally:
        db.close()


@pytest.mark.parametrize("key, message", [
    ("", "1 to 100 printable characters, got ''"),
    ("x" * 101, "got 101 characters"),
    ("tab\there", "printable"),
    (7, "got 7"),
])
def test_a_bad_fairness_key_is_refused_in_one_line_and_nothing_is_written(qdb: QueueDB, key: object,
                                                                           message: str) -> None:
    with qdb.producer() as producer:
        with pytest.raises(InvalidJob, match=message):
            producer.enqueue("test.record", fairness_key=key)
        with pytest.raises(InvalidJob, match=f"item 1: fairness key .*{message}"):
            producer.enqueue_many([Job("test.record", fairness_key="fine"), Job("test.record", fairness_key=key)])
    conn = qdb.connect()
    try:
        with pytest.raises(InvalidJob, match=message):
            enqueue_on(conn, Job("test.record", fairness_key=key))  # type: ignore[arg-type]
    finally:
        conn.close()
    if isinstance(key, str) and "\t" not in key:
        result = qdb.cli("enqueue", "test.record", "--fairness-key", key)
        assert_one_line_error(result, "fairness key must be a string")
    assert qdb.scalar("SELECT COUNT(*) FROM mysqlq_jobs") == 0
    assert qdb.scalar("SELECT COUNT(*) FROM mysqlq_fair_keys") == 0


def test_every_way_of_enqueueing_gives_the_key_and_a_turn(qdb: QueueDB) -> None:
    with qdb.producer() as producer:
        one = producer.enqueue("test.record", fairness_key="t1")
        many = producer.enqueue_many([Job("test.record", fairness_key="t1"), Job("test.record", fairness_key="t2")])
        with producer.transaction() as tx:
            in_tx = tx.enqueue("test.record", fairness_key="t2")
        tagged = producer.enqueue("test.record", fairness_key="t3", tags=["x"])
        after = producer.enqueue("test.record", fairness_key="t3", after=[one])
        group = producer.group([Job("test.record", fairness_key="t4")], then=Job("test.record", fairness_key="t4"))
        plain = producer.enqueue("test.record")
    assert many == 2
    cli = int(qdb.cli("enqueue", "test.record", "--fairness-key", "t5", check=True).stdout)
    rows = {job_id: (key, turn) for job_id, key, turn in keyed(qdb)}
    assert rows[plain] == (None, fairness.UNTURNED)
    for job_id in (one, in_tx, tagged, after, group.callback, *group.members, cli):
        key, turn = rows[job_id]
        assert key is not None and turn > 0, (job_id, key, turn)
    assert rows[one][0] == "t1" and rows[in_tx][0] == "t2" and rows[cli][0] == "t5"
    assert qdb.scalar("SELECT COUNT(*) FROM mysqlq_job_tags WHERE job_id = %s", (tagged,)) == 1
    # A key's own jobs are a step apart, in the order enqueued.
    t1 = sorted(turn for key, turn in rows.values() if key == "t1")
    assert t1 == [t1[0], t1[0] + fairness.STEP]
    # A schedule entry carries the key to each tick's job.
    (entry,) = parse('[digest]\nhandler = "test.record"\nevery = "1h"\nfairness_key = "t6"\n')
    assert entry.job(dt.datetime(2026, 1, 1, tzinfo=dt.UTC)).fairness_key == "t6"


def test_a_late_key_is_claimed_before_a_big_keys_backlog(qdb: QueueDB) -> None:
    """200 jobs of one key in one enqueue_many, then three other keys enqueue 5 jobs each, one at a
    time: the next claim of 21 takes every one of the 15 (in id order it would take none)."""
    with qdb.producer() as producer:
        producer.enqueue_many([Job("test.record", {"n": n}, fairness_key="big") for n in range(200)])
        late = [producer.enqueue("test.record", {"n": n}, fairness_key=key) for n in range(5)
                for key in ("a", "b", "c")]
    taken = claim_order(qdb, 21)
    assert set(late) <= set(taken), (late, taken)
    # Within the claim, turn by turn: each key's first job before any key's third.
    position = {job_id: n for n, job_id in enumerate(taken)}
    firsts = [position[job_id] for job_id in late[:3]]
    thirds = [position[job_id] for job_id in late[6:9]]
    assert max(firsts) < min(thirds)


def test_a_queue_without_keys_is_claimed_in_id_order_and_a_keyless_job_pays_nothing(qdb: QueueDB) -> None:
    with qdb.producer() as producer:
        producer.enqueue("test.record")  # connects and checks the schema once
        before = session_counters(producer)
        ids = [producer.enqueue("test.record", {"n": n}, priority=n % 2) for n in range(10)]
        middle = session_counters(producer)
        producer.enqueue("test.record", fairness_key="t")
        after = session_counters(producer)
    assert middle["Questions"] - before["Questions"] == 10  # one INSERT each
    assert middle["Com_select"] == before["Com_select"]
    # A keyed job: its turn read (one SELECT), its key's row and the job (two INSERTs), in a transaction.
    assert after["Com_select"] - middle["Com_select"] == 1
    assert after["Com_insert"] - middle["Com_insert"] == 2
    assert qdb.scalar("SELECT COUNT(*) FROM mysqlq_jobs WHERE turn <> %s AND fairness_key IS NULL",
                      (fairness.UNTURNED,)) == 0
    # Priority first; within one, the keyed jobs, then those without a key (no turn given) in id order.
    first, keyed_id = ids[0] - 1, ids[-1] + 1
    taken = claim_order(qdb, 12)
    assert taken == [keyed_id, first, *ids[0::2], *ids[1::2]]


def test_a_weighted_key_takes_turns_closer_together(qdb: QueueDB) -> None:
    db = Database(qdb.settings().dsn)
    try:
        db.run(lambda cur: fairness.set_weight(cur, "default", "gold", 2))
        with pytest.raises(InvalidJob, match=r"weight must be a number from 0\.01 to 1000"):
            db.run(lambda cur: fairness.set_weight(cur, "default", "gold", 0))
    finally:
        db.close()
    with qdb.producer() as producer:
        producer.enqueue_many([Job("test.record", fairness_key=key) for key in ("gold", "free") for _ in range(4)])
    turns = {key: sorted(turn for _, k, turn in keyed(qdb) if k == key) for key in ("gold", "free")}
    assert [b - a for a, b in itertools.pairwise(turns["gold"])] == [fairness.STEP // 2] * 3
    assert [b - a for a, b in itertools.pairwise(turns["free"])] == [fairness.STEP] * 3
    # Gold's four jobs are claimed within the first six: two of its turns for one of free's.
    taken = claim_order(qdb, 6)
    gold = {job_id for job_id, key, _ in keyed(qdb) if key == "gold"}
    assert gold <= set(taken), keyed(qdb)


def test_a_retried_job_keeps_its_key_and_its_turn(qdb: QueueDB) -> None:
    with qdb.producer() as producer:
        producer.enqueue_many([Job("test.record", fairness_key="t9") for _ in range(3)])
        job_id = producer.enqueue("test.fail", {"why": "not yet"}, fairness_key="t9", max_attempts=3)
    (before,) = [row for row in keyed(qdb) if row[0] == job_id]
    proc = qdb.worker("--burst", "--retry-base", "600")  # its retry is ten minutes away: the burst leaves it
    assert proc.wait(timeout=60) == 0, qdb.logs()
    status, attempts, key, turn = qdb.query("SELECT status, attempts, fairness_key, turn FROM mysqlq_jobs "
                                            "WHERE id = %s", (job_id,))[0]
    assert (status, int(attempts)) == ("scheduled", 1)
    assert (key, int(turn)) == (before[1], before[2])


def test_a_tenants_concurrency_limit_holds_with_fair_turns(qdb: QueueDB) -> None:
    """Three tenants' jobs of a handler limited to one job per key, each job keyed by its tenant for
    both: two workers of default slots never run two jobs of one tenant at once, and run them all."""
    tenants = ["a", "b", "c"]
    with qdb.producer() as producer:
        producer.enqueue_many([Job("test.limited", {"seconds": 0.05}, concurrency_key=tenant, fairness_key=tenant)
                               for _ in range(6) for tenant in tenants])
    for _ in range(2):
        qdb.worker("--burst")
    qdb.wait_done(18)
    qdb.stop_workers()
    tenant_of = {int(job_id): key for job_id, key in qdb.query("SELECT id, concurrency_key FROM "
                                                                f"{every_job('id, concurrency_key')}")}
    spans = [(float(r[2]), float(r[3]), tenant_of[int(r[0])]) for r in qdb.records() if r[1] == "lspan"]
    assert len(spans) == 18
    for tenant in tenants:
        mine = sorted((start, end) for start, end, key in spans if key == tenant)
        assert all(end <= next_start for (_, end), (next_start, _) in itertools.pairwise(mine)), tenant


def test_late_keys_start_before_a_big_keys_backlog_on_four_workers(qdb: QueueDB) -> None:
    """The headline promise with realistic settings: 3,000 jobs of one key, each sleeping 20 ms,
    draining on four workers with their default slots; once 300 are done, five other keys enqueue
    10 jobs each, one at a time. The big key starts few jobs between the first late enqueue and the
    last late start (in id order it would start nearly all of its remaining 2,700 first)."""
    between, remaining = late_after_backlog(qdb, "big", ["k0", "k1", "k2", "k3", "k4"] * 10)
    assert remaining > 1500  # the big key still had most of its backlog when the late keys came
    assert between < 400, (between, remaining)


def late_after_backlog(qdb: QueueDB, big_key: str | None, late_keys: list[str | None]) -> tuple[int, int]:
    """3,000 jobs of ``big_key``, each sleeping 20 ms, drain on four workers with their default
    slots; once 300 are done, one job of each of ``late_keys`` (None: without a key) is enqueued, one
    at a time. Then :func:`started_between` of the backlog, once every job is done."""
    big = 3000
    with qdb.producer() as producer:
        producer.enqueue_many([Job("test.sleep", {"seconds": 0.02}, fairness_key=big_key) for _ in range(big)])
        last_big = int(qdb.scalar("SELECT MAX(id) FROM mysqlq_jobs"))
        for _ in range(4):
            qdb.worker()
        qdb.wait_for(lambda: int(qdb.scalar(f"SELECT COUNT(*) FROM {EVERY_JOB} WHERE status = 'done'")) >= 300,
                     what="300 jobs done")
        for key in late_keys:
            producer.enqueue("test.sleep", {"seconds": 0.02}, fairness_key=key)
    qdb.wait_done(big + len(late_keys), timeout=180)
    qdb.stop_workers()
    return started_between(qdb, last_big)


def started_between(qdb: QueueDB, last_big: int) -> tuple[int, int]:
    """Of the jobs up to ``last_big`` (the backlog), how many started between the first later
    enqueue and the last later start, and how many had not started at that first later enqueue."""
    first_enqueued, last_started = qdb.query(
        f"SELECT MIN(enqueued_at), MAX(started_at) FROM {EVERY_JOB} WHERE id > %s", (last_big,))[0]
    between = int(qdb.scalar(f"SELECT COUNT(*) FROM {EVERY_JOB} WHERE id <= %s AND started_at >= %s "
                             "AND started_at <= %s", (last_big, first_enqueued, last_started)))
    remaining = int(qdb.scalar(f"SELECT COUNT(*) FROM {EVERY_JOB} WHERE id <= %s AND started_at >= %s",
                               (last_big, first_enqueued)))
    return between, remaining


def test_enqueue_many_takes_each_keys_turns_once_however_many_chunks(qdb: QueueDB) -> None:
    jobs = [Job("test.record", {"n": n}, fairness_key=f"t{n % 3}") for n in range(2500)]  # three chunks
    with qdb.producer() as producer:
        producer.enqueue("test.record")
        before = session_counters(producer)
        assert producer.enqueue_many(jobs) == 2500
        after = session_counters(producer)
    assert after["Com_select"] - before["Com_select"] == 3  # where the queue stands, once per key
    assert after["Com_insert"] - before["Com_insert"] == 3 + 3  # each key's row, then the chunks
    for key in ("t0", "t1", "t2"):  # each key's jobs one step apart, in the order given
        turns = [int(t) for (t,) in qdb.query("SELECT turn FROM mysqlq_jobs WHERE fairness_key = %s ORDER BY id",
                                              (key,))]
        assert turns == list(range(turns[0], turns[0] + fairness.STEP * len(turns), fairness.STEP))


def without_key(qdb: QueueDB) -> list[int]:
    """The ids of the live jobs without a key, in order."""
    return [int(i) for (i,) in qdb.query("SELECT id FROM mysqlq_jobs WHERE fairness_key IS NULL ORDER BY id")]


def give_turns(qdb: QueueDB, ahead: int, queue: str = "default") -> int:
    """What a worker that claimed keyed jobs of ``queue`` lately does before its claim of ``ahead``."""
    db = Database(qdb.settings().dsn)
    try:
        return db.run(lambda cur: fairness.give_keyless_turns(cur, queue, ahead))
    finally:
        db.close()


def test_jobs_without_a_key_take_turns_as_one_key_of_their_own(qdb: QueueDB) -> None:
    """200 jobs without a key, then 200 of one key: given turns, those without a key alternate with
    the keyed ones (in id order they would all go first; with no turn, all last); weighted 2, they
    take two turns for one; a late key still starts at once. Nothing is given in a queue without a
    keyed job, nor where enough were given already."""
    with qdb.producer() as producer:
        producer.enqueue_many([Job("test.record", {"n": n}) for n in range(200)])
        plain = without_key(qdb)
        assert give_turns(qdb, 20) == 0  # no keyed job waits: nothing to do
        producer.enqueue_many([Job("test.record", {"n": n}, fairness_key="big") for n in range(200)])
    assert give_turns(qdb, 20) == 40  # a claim of 20 could reach past them: twice that given
    assert give_turns(qdb, 20) == 0  # enough given for the next claim
    given = [int(t) for (t,) in qdb.query("SELECT turn FROM mysqlq_jobs WHERE fairness_key IS NULL "
                                          "AND turn <> %s ORDER BY id", (fairness.UNTURNED,))]
    assert len(given) == 40 and given == sorted(given)  # the oldest, in id order, a step apart
    assert [b - a for a, b in itertools.pairwise(given)] == [fairness.STEP] * 39
    taken = claim_order(qdb, 20)
    without = [job_id for job_id in taken if job_id in set(plain)]
    assert without == plain[:10], taken  # every other job, the oldest first
    assert [job_id in set(plain) for job_id in taken] == [n % 2 == 1 for n in range(20)] or \
        [job_id in set(plain) for job_id in taken] == [n % 2 == 0 for n in range(20)], taken
    # A late key is served at the turn being served, before both backlogs.
    with qdb.producer() as producer:
        late = [producer.enqueue("test.record", fairness_key=key) for key in ("a", "b", "c")]
    assert set(late) <= set(claim_order(qdb, 6, batch=78))


def test_weighted_jobs_without_a_key_take_two_turns_for_one(qdb: QueueDB) -> None:
    assert qdb.cli("fairness", "weight", "default", "", "2", check=True).stdout.startswith(
        "queue 'default', jobs without a key: weight 2")
    with qdb.producer() as producer:
        producer.enqueue_many([Job("test.record") for _ in range(60)])
        plain = set(without_key(qdb))
        producer.enqueue_many([Job("test.record", fairness_key="big") for _ in range(60)])
    give_turns(qdb, 30)
    taken = claim_order(qdb, 30)
    assert sum(job_id in plain for job_id in taken) == 20, taken
    listed = json.loads(qdb.cli("fairness", "list", "--json", check=True).stdout)
    assert {"queue": "default", "key": None, "ready": 0, "weight": 2} in listed, listed


def test_jobs_without_a_key_are_not_held_back_by_a_big_key_on_four_workers(qdb: QueueDB) -> None:
    """The big key's 3,000 jobs drain on four workers with default slots; once 300 are done, 50 jobs
    without a key are enqueued one at a time: they start within the big key's next few turns (with
    no turn given they would wait for its whole backlog), and nothing is lost."""
    between, remaining = late_after_backlog(qdb, "big", [None] * 50)
    assert remaining > 1500  # the big key still had most of its backlog when the late jobs came
    assert between < 400, (between, remaining)


def test_late_keys_are_not_held_back_by_jobs_without_a_key_on_four_workers(qdb: QueueDB) -> None:
    """The other way round: 3,000 jobs without a key drain on four workers with default slots; once
    300 are done, five keys enqueue 10 jobs each, one at a time: they start within a few turns (in id
    order, the jobs without a key would all go first)."""
    between, remaining = late_after_backlog(qdb, None, ["k0", "k1", "k2", "k3", "k4"] * 10)
    assert remaining > 1500
    assert between < 400, (between, remaining)


def test_a_tenants_rate_limit_holds_with_fair_turns(qdb: QueueDB) -> None:
    """Ten tenants' jobs of a handler limited to 5 starts a second per key, each job keyed by its
    tenant for both, beside jobs without a key: two workers never start more than 5 of a tenant's
    jobs in any second, and run them all."""
    keys, each = 10, 12
    with qdb.producer() as producer:
        producer.enqueue_many([Job("test.rated_key", {"key": f"k{k}"}, fairness_key=f"k{k}")
                               for _ in range(each) for k in range(keys)])
        producer.enqueue_many([Job("test.record") for _ in range(100)])
    for index in range(2):
        qdb.worker("--name", f"r{index}")
    qdb.wait_done(keys * each + 100, timeout=120)
    qdb.stop_workers()
    by_key = starts(qdb, "test.rated_key")
    assert len(by_key) == keys and all(len(times) == each for times in by_key.values())
    assert max(most_in_a_window(times, 1.0) for times in by_key.values()) == 5
