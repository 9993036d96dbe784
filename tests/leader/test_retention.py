"""Retention: ended jobs older than their status's age are deleted, in small batches, by the workers
themselves (one turn at a time across workers) or by hand with `mysqlq purge`."""

from __future__ import annotations

import pytest
import structlog

from mysqlq import ConfigError, Settings
from mysqlq.core.durations import format_duration, parse_duration, parse_retention
from mysqlq.leader.retention import Retention, policies
from mysqlq.store import execute_in
from mysqlq.store import ops as store
from mysqlq.store.db import Database

from ..conftest import QueueDB
from ..ops_fixtures import count, plant

DAY = 86400.0


@pytest.mark.parametrize(("text", "seconds"), [
    ("90", 90), ("90s", 90), ("15m", 900), ("12h", 43200), ("7d", 7 * DAY), ("2w", 14 * DAY), ("1.5h", 5400),
    (" 7D ", 7 * DAY), ("0", 0), (".5s", 0.5),
])
def test_durations_are_a_number_and_an_optional_unit(text: str, seconds: float) -> None:
    assert parse_duration(text) == seconds


@pytest.mark.parametrize("text", ["", "7x", "d", "-1d", "7 days", "1h30m", "nan", "1e3"])
def test_anything_else_is_not_a_duration_and_says_how_to_write_one(text: str) -> None:
    with pytest.raises(ConfigError, match="is not a duration: use a number with s, m, h, d or w"):
        parse_duration(text, "--retain-done")


def test_retention_can_be_switched_off() -> None:
    assert [parse_retention(text) for text in ["off", "0", "never", "none", "OFF", "12h"]] == [0, 0, 0, 0, 0, 43200]
    assert [format_duration(s) for s in [7 * DAY, 36 * 3600, 90, 1.5, 0, None]] == ["7d", "36h", "90s", "1.5s",
                                                                                      "off", "off"]


def test_defaults_keep_done_jobs_a_week_and_dead_jobs_thirty_days() -> None:
    settings = Settings()
    assert (settings.retain_done, settings.retain_dead) == (7 * DAY, 30 * DAY)
    assert policies(settings.retain_done, settings.retain_dead) == [
        ("done", 7 * DAY), ("cancelled", 7 * DAY), ("dead", 30 * DAY)]
    assert policies(0, None) == []
    with pytest.raises(ConfigError, match="retain-dead must be 0"):
        Settings(retain_dead=-1)


def plant_history(qdb: QueueDB, queue: str = "default") -> dict[str, list[int]]:
    return {
        "old done": plant(qdb, "done", 5, queue=queue, ended_ago=8 * DAY),
        "young done": plant(qdb, "done", 3, queue=queue, ended_ago=6 * DAY),
        "old cancelled": plant(qdb, "cancelled", 2, queue=queue, ended_ago=8 * DAY),
        "dead 8d": plant(qdb, "dead", 2, queue=queue, ended_ago=8 * DAY),
        "old dead": plant(qdb, "dead", 4, queue=queue, ended_ago=31 * DAY),
        "ready": plant(qdb, "ready", 1, queue=queue),
    }


def remaining(qdb: QueueDB, ids: list[int]) -> int:
    marks = ", ".join(["%s"] * len(ids))
    return count(qdb, f"id IN ({marks})", ids)


def test_purge_deletes_done_and_cancelled_jobs_older_than_the_age_and_nothing_else(qdb: QueueDB) -> None:
    history = plant_history(qdb)
    result = qdb.cli("purge", "--done-older-than", "7d", check=True)
    assert result.stdout.strip() == "deleted 5 done and 2 cancelled jobs that ended more than 7d ago"
    assert "purging" in result.stderr  # the progress bar
    assert remaining(qdb, history["old done"] + history["old cancelled"]) == 0
    assert count(qdb) == 3 + 2 + 4 + 1


def test_purge_dead_jobs_by_their_own_age(qdb: QueueDB) -> None:
    history = plant_history(qdb)
    result = qdb.cli("purge", "--dead-older-than", "30d", "--done-older-than", "7d", check=True)
    assert result.stdout.strip() == ("deleted 5 done and 2 cancelled jobs that ended more than 7d ago; "
                                      "4 dead jobs that ended more than 30d ago")
    assert remaining(qdb, history["dead 8d"]) == 2
    assert remaining(qdb, history["old dead"]) == 0


def test_purge_of_one_queue_leaves_the_others_alone(qdb: QueueDB) -> None:
    mine, theirs = plant_history(qdb, "mine"), plant_history(qdb, "theirs")
    qdb.cli("purge", "--done-older-than", "7d", "--dead-older-than", "30d", "--queue", "mine", check=True)
    assert remaining(qdb, mine["old done"] + mine["old dead"]) == 0
    assert remaining(qdb, theirs["old done"] + theirs["old dead"]) == 9


def test_purge_dry_run_counts_and_deletes_nothing(qdb: QueueDB) -> None:
    plant_history(qdb)
    result = qdb.cli("purge", "--done-older-than", "7d", "--dead-older-than", "7d", "--dry-run", check=True)
    assert result.stdout.strip() == "would delete 5 done and 2 cancelled and 6 dead jobs that ended more than 7d ago"
    assert count(qdb) == 17


def test_purge_zero_deletes_every_ended_job_of_that_kind(qdb: QueueDB) -> None:
    plant_history(qdb)
    plant(qdb, "done", 2, ended_ago=1)
    assert "deleted 10 done" in qdb.cli("purge", "--done-older-than", "0", check=True).stdout
    assert qdb.statuses() == {"dead": 6, "ready": 1}


def test_purge_works_through_thousands_in_batches(qdb: QueueDB) -> None:
    plant(qdb, "done", 1, ended_ago=10 * DAY)
    for _ in range(12):  # 4096 old done jobs, and one young one that stays
        qdb.query("INSERT INTO mysqlq_jobs (queue, handler, payload, status, run_at, max_attempts, enqueued_at, "
                  "finished_at) SELECT queue, handler, payload, status, run_at, max_attempts, enqueued_at, "
                  "finished_at FROM mysqlq_jobs")
    plant(qdb, "done", 1, ended_ago=DAY)
    assert "deleted 4096 done" in qdb.cli("purge", "--done-older-than", "2d", check=True).stdout
    assert qdb.statuses() == {"done": 1}


def test_the_delete_rechecks_each_row_so_a_job_retried_meanwhile_survives(qdb: QueueDB) -> None:
    (job_id,) = plant(qdb, "dead", ended_ago=31 * DAY)
    qdb.cli("retry", str(job_id), check=True)  # between the retention read and its delete
    conn = qdb.connect()
    with conn.cursor() as cur:
        cutoff = store.cutoff(cur, 30 * DAY)
        assert execute_in(cur, "delete_jobs", [job_id], "dead", cutoff) == 0
    conn.close()
    assert count(qdb) == 1


def retention(qdb: QueueDB, **changes: object) -> Retention:
    settings = qdb.settings(**changes)
    return Retention(settings, Database(settings.dsn), structlog.get_logger("test"))


def test_one_retention_turn_per_interval_across_all_workers(qdb: QueueDB) -> None:
    history = plant_history(qdb)
    first, second = retention(qdb), retention(qdb)
    assert first.run() == 60.0  # finished: come back in retention_interval
    assert remaining(qdb, history["old done"] + history["old cancelled"] + history["old dead"]) == 0
    assert count(qdb) == 3 + 2 + 1
    late = plant(qdb, "done", 2, ended_ago=8 * DAY)
    second.run()  # another worker, within the interval: not its turn
    assert remaining(qdb, late) == 2
    qdb.query("UPDATE mysqlq_maintenance SET next_run_at = NOW(6) - INTERVAL 1 SECOND")  # the interval passed
    second.run()
    assert remaining(qdb, late) == 0


def test_a_turn_that_runs_out_of_time_leaves_the_rest_to_the_next_turn_of_any_worker(qdb: QueueDB) -> None:
    plant(qdb, "done", 25, ended_ago=8 * DAY)
    first, second = retention(qdb, retention_batch=10), retention(qdb, retention_batch=10)
    first.budget = second.budget = 0  # one batch per turn
    assert first.run() < 60  # behind: come back soon
    assert count(qdb) == 15
    assert second.run() < 60  # the task is due again at once, whoever leads
    assert count(qdb) == 5
    turns = 1
    while second.run() < 60:
        turns += 1
        assert turns < 5
    assert count(qdb) == 0


def test_a_retention_turn_forgets_the_dedupe_keys_whose_period_ended(qdb: QueueDB) -> None:
    with qdb.producer() as producer:
        for n in range(25):
            producer.enqueue("test.record", dedupe_key=f"old{n}", dedupe_scope="1h")
        kept = producer.enqueue("test.record", dedupe_key="young", dedupe_scope="1h")
    qdb.query("UPDATE mysqlq_dedupe_periods SET expires_at = UTC_TIMESTAMP(6) - INTERVAL 1 MICROSECOND "
              "WHERE dedupe_key LIKE 'old%'")
    turn = retention(qdb, retention_batch=10)
    assert turn.run() < 60  # a full batch of keys: more may be left, come back soon
    assert qdb.scalar("SELECT COUNT(*) FROM mysqlq_dedupe_periods") == 16
    while turn.run() < 60:
        pass
    assert qdb.query("SELECT dedupe_key, job_id FROM mysqlq_dedupe_periods") == [("young", kept)]
    assert count(qdb) == 26  # the jobs are not retention's to delete: they are not old


def test_retention_switched_off_keeps_everything(qdb: QueueDB) -> None:
    plant_history(qdb)
    retention(qdb, retain_done=0, retain_dead=None).run()
    assert count(qdb) == 17


def test_workers_delete_old_jobs_themselves_with_ages_from_options_or_environment(qdb: QueueDB) -> None:
    old_done = plant(qdb, "done", 3, ended_ago=3 * 3600)
    young_done = plant(qdb, "done", 2, ended_ago=3600)
    old_dead = plant(qdb, "dead", 2, ended_ago=40 * DAY)
    qdb.worker("--heartbeat-interval", "0.1", "--lease", "5", "--retain-dead", "off",
               env=qdb.env(MYSQLQ_RETAIN_DONE="2h"))
    qdb.wait_for(lambda: remaining(qdb, old_done) == 0, what="the worker's retention turn")
    assert remaining(qdb, young_done) == 2
    assert remaining(qdb, old_dead) == 2
    assert qdb.scalar("SELECT COUNT(*) FROM mysqlq_maintenance WHERE task = 'retention'") == 1


def test_a_worker_with_a_bad_retention_age_says_so_in_one_line(qdb: QueueDB) -> None:
    result = qdb.cli("worker", "--burst", "--retain-done", "a week")
    assert result.returncode == 1
    assert result.stderr.strip() == ("mysqlq: error: --retain-done 'a week' is not a duration: "
                                     "use a number with s, m, h, d or w (90s, 15m, 12h, 7d)")
    result = qdb.cli("worker", "--burst", env=qdb.env(MYSQLQ_RETAIN_DEAD="forever"))
    assert result.returncode == 1
    assert "--retain-dead 'forever' is not a duration" in result.stderr
