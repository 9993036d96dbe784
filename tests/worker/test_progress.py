"""Progress of a long job: ctx.progress(fraction, note) as often as a handler likes, written by the
worker at most once a second per job, visible in `jobs show` and the dashboard while the job runs,
and kept when it ends."""

from __future__ import annotations

from mysqlq import Job

from ..conftest import QueueDB


def com_update(qdb: QueueDB) -> int:
    return int(qdb.query("SHOW GLOBAL STATUS LIKE 'Com_update'")[0][1])


def test_progress_is_shown_while_the_job_runs_and_kept_when_it_ends(qdb: QueueDB) -> None:
    with qdb.producer() as producer:
        job_id = producer.enqueue("test.progress", {"seconds": 3})
    qdb.worker()
    qdb.wait_for(lambda: qdb.scalar("SELECT progress FROM mysqlq_jobs WHERE id = %s", (job_id,)) is not None,
                 timeout=30, what="the first progress report to be written")
    before = com_update(qdb)
    shown = qdb.cli("jobs", "show", str(job_id), check=True).stdout
    assert "progress" in shown and "(step " in shown and qdb.statuses() == {"running": 1}
    qdb.wait_done(1, timeout=30)
    reports = int(qdb.records()[-1][3])
    assert reports > 500  # the handler reported in a tight loop ...
    assert com_update(qdb) - before <= 15  # ... and the worker wrote about once a second (and its outcome)
    assert qdb.statuses() == {"done": 1}
    qdb.wait_for(lambda: "100% (all done)" in qdb.cli("jobs", "show", str(job_id), check=True).stdout,
                 timeout=10, what="the last report, written within a second and kept once the job ended")


def test_a_bad_report_fails_the_job_with_the_reason(qdb: QueueDB) -> None:
    with qdb.producer() as producer:
        producer.enqueue_many([Job("test.progress", {"seconds": 0, "bad": 1.5}, max_attempts=1)])
    qdb.worker()
    qdb.wait_for(lambda: qdb.statuses() == {"dead": 1}, timeout=30, what="the job to fail")
    error = qdb.scalar("SELECT last_error FROM mysqlq_jobs")
    assert error.startswith("ValueError: progress takes a fraction from 0 to 1, got 1.5")
