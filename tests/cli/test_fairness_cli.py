"""Seeing and steering fair queues from the command line: `mysqlq fairness weight` sets a key's share
(bad input is one line and writes nothing), `mysqlq fairness list` shows the keys with ready jobs,
largest backlog first, with their weights, and `mysqlq stats` the largest backlogs of each queue
that has keyed ready jobs, without asking the others."""

from __future__ import annotations

import itertools
import json
from typing import Any

import pytest

from mysqlq import Job
from mysqlq.store import fairness, stats

from ..conftest import QueueDB
from ..cost.test_ops_hot_path import reads_of
from ..ops_fixtures import assert_one_line_error


def enqueue_keyed(qdb: QueueDB, queue: str, backlog: dict[str, int], **options: Any) -> None:
    """``backlog[key]`` jobs of each key in ``queue`` (ready unless ``options`` say otherwise)."""
    with qdb.producer() as producer:
        producer.enqueue_many([Job("test.record", {"n": n}, queue=queue, fairness_key=key, **options)
                               for key, count in backlog.items() for n in range(count)])


def steps(qdb: QueueDB) -> dict[tuple[str, str], int]:
    return {(queue, key): int(step) for queue, key, step in
            qdb.query("SELECT queue, fairness_key, step FROM mysqlq_fair_keys")}


def table(text: str) -> list[dict[str, str]]:
    """A table the CLI printed, as rows by column name (cells hold no spaces here)."""
    header, *lines = text.splitlines()
    return [dict(zip(header.split(), line.split(), strict=True)) for line in lines]


# ---------------------------------------------------------------------------- weight


def test_weight_sets_the_keys_share_and_says_so_in_one_line(qdb: QueueDB) -> None:
    result = qdb.cli("fairness", "weight", "default", "customer-gold", "2", check=True)
    assert result.stdout.splitlines() == [
        "queue 'default', key 'customer-gold': weight 2, for the jobs it enqueues from now on"]
    assert steps(qdb) == {("default", "customer-gold"): 500}  # two turns for another key's one
    qdb.cli("fairness", "weight", "default", "customer-gold", "0.5", check=True)
    qdb.cli("fairness", "weight", "mail", "customer-gold", "1e2", check=True)
    assert steps(qdb) == {("default", "customer-gold"): 2000, ("mail", "customer-gold"): 10}
    # The key's next jobs take turns at its new step.
    enqueue_keyed(qdb, "default", {"customer-gold": 3})
    turns = [int(turn) for (turn,) in qdb.query("SELECT turn FROM mysqlq_jobs ORDER BY id")]
    assert [b - a for a, b in itertools.pairwise(turns)] == [2000, 2000]


@pytest.mark.parametrize("queue, key, weight, message", [
    ("default", "gold", "0", "a fairness weight must be a number from 0.01 to 1000, got 0.0"),
    ("default", "gold", "1001", "a fairness weight must be a number from 0.01 to 1000"),
    ("default", "gold", "heavy", "a fairness weight must be a number from 0.01 to 1000, got 'heavy'"),
    ("default", "gold", "nan", "a fairness weight must be a number from 0.01 to 1000"),
    ("default", "gold", "inf", "a fairness weight must be a number from 0.01 to 1000"),
    ("", "gold", "2", "queue name must not be empty"),
    ("q" * 101, "gold", "2", "queue name is 101 characters long"),
    ("default", "k" * 101, "2", "got 101 characters"),
    ("default", "tab\there", "2", "fairness key must be a string"),
])
def test_a_bad_weight_queue_or_key_is_refused_in_one_line_and_writes_nothing(
        qdb: QueueDB, queue: str, key: str, weight: str, message: str) -> None:
    result = qdb.cli("fairness", "weight", queue, key, weight)
    assert_one_line_error(result, message)
    assert result.returncode == 1  # as `limits set` refuses a bad rate: a user error, not a usage error
    assert result.stdout == ""
    assert steps(qdb) == {}


# ---------------------------------------------------------------------------- list


def test_list_shows_the_keys_with_ready_jobs_largest_backlog_first_with_their_weights(qdb: QueueDB) -> None:
    qdb.cli("fairness", "weight", "default", "gold", "2", check=True)
    qdb.cli("fairness", "weight", "default", "idle", "0.5", check=True)  # weighted, nothing waiting
    enqueue_keyed(qdb, "default", {"big": 5, "gold": 2, "small": 1})
    enqueue_keyed(qdb, "other", {"tenant": 3})
    enqueue_keyed(qdb, "default", {"later": 4}, delay=3600)  # scheduled, not ready: not waiting
    with qdb.producer() as producer:
        producer.enqueue_many([Job("test.record") for _ in range(9)])  # no key: no line of their own
    expected = [{"queue": "default", "key": "big", "ready": 5, "weight": 1},
                {"queue": "other", "key": "tenant", "ready": 3, "weight": 1},
                {"queue": "default", "key": "gold", "ready": 2, "weight": 2},
                {"queue": "default", "key": "small", "ready": 1, "weight": 1},
                {"queue": "default", "key": "idle", "ready": 0, "weight": 0.5}]
    assert json.loads(qdb.cli("fairness", "list", "--json", check=True).stdout) == expected
    assert table(qdb.cli("fairness", "list", check=True).stdout) == [
        {key: str(value) for key, value in row.items()} for row in expected]

    only_default = json.loads(qdb.cli("fairness", "list", "--queue", "default", "--json", check=True).stdout)
    assert only_default == [row for row in expected if row["queue"] == "default"]
    limited = qdb.cli("fairness", "list", "--limit", "2", "--json", check=True)
    assert json.loads(limited.stdout) == expected[:2]
    assert "note: the first 2 keys are shown; --limit shows more" in limited.stderr
    # Jobs that ended leave the backlog; their key's other jobs stay listed.
    qdb.query("UPDATE mysqlq_jobs SET status = 'done', finished_at = NOW(6) WHERE fairness_key = 'big' LIMIT 4")
    assert json.loads(qdb.cli("fairness", "list", "--limit", "2", "--json", check=True).stdout)[1] == \
        {"queue": "default", "key": "gold", "ready": 2, "weight": 2}


def test_list_without_keys_says_so_and_refuses_a_bad_filter_in_one_line(qdb: QueueDB) -> None:
    with qdb.producer() as producer:
        producer.enqueue("test.record")
    assert qdb.cli("fairness", "list", check=True).stdout == "no fairness key has ready jobs or a weight\n"
    assert json.loads(qdb.cli("fairness", "list", "--json", check=True).stdout) == []
    assert_one_line_error(qdb.cli("fairness", "list", "--limit", "none"), "--limit must be a whole number")
    assert_one_line_error(qdb.cli("fairness", "list", "--queue", " x"), "queue name ' x' has whitespace")


# ---------------------------------------------------------------------------- stats


def test_stats_shows_each_queues_largest_backlogs_by_key(qdb: QueueDB) -> None:
    enqueue_keyed(qdb, "fair", {"a": 4, "b": 3, "c": 2, "d": 1})
    enqueue_keyed(qdb, "fair", {"e": 6}, delay=3600)  # scheduled: not a ready backlog
    enqueue_keyed(qdb, "two", {"x": 1, "y": 1})
    with qdb.producer() as producer:
        producer.enqueue_many([Job("test.record", queue=queue) for queue in ("fair", "plain", "plain")])
    by_queue = {entry["queue"]: entry for entry in json.loads(qdb.cli("stats", "--json", check=True).stdout)}
    assert by_queue["fair"]["top_keys"] == [{"key": "a", "ready": 4}, {"key": "b", "ready": 3},
                                            {"key": "c", "ready": 2}]
    assert by_queue["fair"]["keys_waiting"] == 4 and by_queue["fair"]["counts"]["ready"] == 11
    assert by_queue["two"]["top_keys"] == [{"key": "x", "ready": 1}, {"key": "y", "ready": 1}]
    assert (by_queue["plain"]["top_keys"], by_queue["plain"]["keys_waiting"]) == ([], 0)

    lines = qdb.cli("stats", check=True).stdout.splitlines()
    header = lines[0].split()
    assert header[-2:] == ["top_keys", "state"]
    start = lines[0].index("top_keys")
    rows = {line.split()[0]: line for line in lines[1:]}
    assert rows["fair"][start:].startswith("a=4, b=3, c=2 (+1 more key)  ")
    assert rows["two"][start:].startswith("x=1, y=1  ")
    assert rows["plain"][start:].split() == ["-", "active"]


def test_stats_without_keyed_ready_jobs_has_no_column_for_them(qdb: QueueDB) -> None:
    enqueue_keyed(qdb, "fair", {"a": 2}, delay=3600)
    with qdb.producer() as producer:
        producer.enqueue("test.record")
    assert "top_keys" not in qdb.cli("stats", check=True).stdout
    assert {entry["queue"]: entry["top_keys"] for entry in json.loads(qdb.cli("stats", "--json").stdout)} == \
        {"default": [], "fair": []}


def test_stats_reads_the_keys_of_the_queues_with_keyed_ready_jobs_only(qdb: QueueDB,
                                                                       monkeypatch: pytest.MonkeyPatch) -> None:
    enqueue_keyed(qdb, "fair", {"a": 2, "b": 1})
    enqueue_keyed(qdb, "later", {"a": 2}, delay=3600)

    def add_jobs_without_a_key(count: int) -> None:
        with qdb.producer() as producer:
            producer.enqueue_many([Job("test.record", queue=queue) for queue in ("fair", "plain")
                                   for _ in range(count)])

    add_jobs_without_a_key(10)
    asked: list[str] = []
    backlog = fairness.backlog

    def spy(cur: Any, queue: str, limit: int) -> fairness.Backlog:
        asked.append(queue)
        return backlog(cur, queue, limit)

    monkeypatch.setattr(fairness, "backlog", spy)
    conn = qdb.connect()
    try:
        with conn.cursor() as cur:
            found = {row["queue"]: row for row in stats.queue_stats(cur)}
        # The statement reads the queue's keyed ready jobs, and passes its jobs without a key over on
        # the index: neither they nor other queues' jobs cost a read each.
        few = reads_of(conn, lambda cur: backlog(cur, "fair", stats.TOP_KEYS))
        add_jobs_without_a_key(500)
        many = reads_of(conn, lambda cur: backlog(cur, "fair", stats.TOP_KEYS))
    finally:
        conn.close()
    assert asked == ["fair"]  # the one queue with keyed ready jobs
    assert found["fair"]["keys_waiting"] == 2 and found["later"]["top_keys"] == found["plain"]["top_keys"] == []
    assert many == few and few <= 2 * 3 + 40, (few, many)
