"""Bad input to every operations command: one clear line on stderr, a non-zero exit, no traceback,
and nothing changed."""

from __future__ import annotations

import pytest

from ..conftest import QueueDB
from ..ops_fixtures import assert_one_line_error, plant, status_of

DURATION_HELP = "is not a duration: use a number with s, m, h, d or w"


@pytest.mark.parametrize(
    ("args", "fragment"),
    [
        (["jobs", "show", "999"], "no job with id 999"),
        (["jobs", "show", "abc"], "job id must be a positive whole number, got 'abc'"),
        (["jobs", "show", "0"], "job id must be a positive whole number, got '0'"),
        (["jobs", "show", "--", "-3"], "job id must be a positive whole number, got '-3'"),
        (["jobs", "show"], "give the id of the job to show"),
        (["jobs", "list", "--status", "finished"], "there is no job status 'finished'; statuses are ready,"),
        (["jobs", "list", "--limit", "lots"], "--limit must be a whole number from 1 to 100000, got 'lots'"),
        (["jobs", "list", "--limit", "0"], "--limit must be a whole number from 1 to 100000"),
        (["jobs", "list", "--queue", " "], "queue name must not be empty"),
        (["retry", "999"], "no job with id 999"),
        (["retry", "998", "999"], "no jobs with ids 998, 999"),
        (["retry", "x1"], "job id must be a positive whole number, got 'x1'"),
        (["retry"], "give the ids of dead jobs, or --dead"),
        (["retry", "1", "--dead"], "give job ids or --dead, not both"),
        (["retry", "1", "--queue", "a"], "--queue goes with --dead"),
        (["retry", "--dead", "--queue", "x" * 101], "queue name is 101 characters long; the limit is 100"),
        (["cancel", "999"], "no job with id 999"),
        (["cancel", "1.5"], "job id must be a positive whole number, got '1.5'"),
        (["cancel"], "give the ids of the jobs to cancel"),
        (["pause"], "give the name of the queue to pause"),
        (["pause", "bad\tname"], "has whitespace at its ends or unprintable characters"),
        (["resume"], "give the name of the queue to resume"),
        (["resume", "x" * 101], "queue name is 101 characters long"),
        (["purge"], "give --done-older-than and/or --dead-older-than"),
        (["purge", "--done-older-than", "7x"], f"--done-older-than '7x' {DURATION_HELP}"),
        (["purge", "--dead-older-than", "-1d"], f"--dead-older-than '-1d' {DURATION_HELP}"),
        (["purge", "--done-older-than", "7d", "--queue", ""], "queue name must not be empty"),
        (["stats", "--watch", "soon"], f"--watch interval 'soon' {DURATION_HELP}"),
        (["stats", "--watch", "0"], "--watch interval must be more than 0 seconds"),
        (["worker", "--burst", "--retain-dead", "1 month"], f"--retain-dead '1 month' {DURATION_HELP}"),
    ],
)
def test_bad_input_gets_one_line_and_a_non_zero_exit(qdb: QueueDB, args: list[str], fragment: str) -> None:
    plant(qdb, "done", ended_ago=10 * 86400)  # something a mistaken purge could delete
    result = qdb.cli(*args)
    assert_one_line_error(result, fragment)
    assert result.stderr.startswith("mysqlq: error: ")
    assert qdb.statuses() == {"done": 1}
    assert qdb.scalar("SELECT COUNT(*) FROM mysqlq_queues") == 0


def test_an_unknown_id_among_good_ones_changes_none_of_them(qdb: QueueDB) -> None:
    (dead,) = plant(qdb, "dead", ended_ago=60)
    (ready,) = plant(qdb, "ready")
    assert_one_line_error(qdb.cli("retry", str(dead), "999"), "no job with id 999")
    assert_one_line_error(qdb.cli("cancel", str(ready), "999"), "no job with id 999")
    assert (status_of(qdb, dead), status_of(qdb, ready)) == ("dead", "ready")


def test_retry_of_a_job_that_is_not_dead_names_its_status(qdb: QueueDB) -> None:
    (done,) = plant(qdb, "done", ended_ago=60)
    assert_one_line_error(qdb.cli("retry", str(done)), f"job {done} is done: only dead jobs can be retried")


def test_cancel_of_a_finished_job_names_its_status(qdb: QueueDB) -> None:
    (done,) = plant(qdb, "done", ended_ago=5)
    assert_one_line_error(qdb.cli("cancel", str(done)), f"job {done} is done: only ready, scheduled, blocked, "
                          "waiting or running jobs can be cancelled")
    assert status_of(qdb, done) == "done"


@pytest.mark.parametrize("command", [["jobs", "list"], ["jobs", "show", "1"], ["retry", "1"], ["cancel", "1"],
                                     ["pause", "q"], ["resume", "q"], ["purge", "--done-older-than", "7d"]])
def test_a_database_without_the_schema_is_one_line_too(qdb: QueueDB, command: list[str]) -> None:
    qdb.query("DROP TABLE mysqlq_schema_version")
    assert_one_line_error(qdb.cli(*command), "the mysqlq schema is missing: run `mysqlq migrate`")
