"""Cancelling a running job: `mysqlq cancel` (or the dashboard) ends it cancelled at once, the worker
holding it asks its handler to stop within a second, and the job is never retried."""

from __future__ import annotations

import pytest
from mysqlq_harness.jobs import EVERY_JOB

from ..conftest import QueueDB


def started(qdb: QueueDB, job_id: int) -> bool:
    return [str(job_id), "1", "start"] in [record[:3] for record in qdb.records()]


def steps_of(qdb: QueueDB, job_id: int) -> list[str]:
    return [record[2] for record in qdb.records() if record[0] == str(job_id)]


def row_of(qdb: QueueDB, job_id: int) -> tuple[object, ...]:
    (row,) = qdb.query("SELECT status, attempts, running_batch, finished_at IS NOT NULL FROM mysqlq_jobs "
                       "WHERE id = %s", (job_id,))
    return tuple(row)


@pytest.mark.parametrize(("handler", "concurrency"), [
    ("test.cooperative", "5"),  # a def handler on a slot's thread
    ("test.cooperative", "1"),  # a def handler on the main thread
    ("test.acooperative", "5"),  # an async def handler, on the worker's event loop
])
def test_a_running_job_is_asked_to_stop_and_ends_cancelled(qdb: QueueDB, handler: str, concurrency: str) -> None:
    qdb.worker("--concurrency", concurrency)
    with qdb.producer() as producer:
        job_id = producer.enqueue(handler, {"seconds": 60})
    qdb.wait_for(lambda: started(qdb, job_id), what="the job to start")
    result = qdb.cli("cancel", str(job_id), check=True)
    assert result.stdout.strip() == "cancelled 1 job (1 job running: asked to stop)"
    assert row_of(qdb, job_id) == ("cancelled", 1, 0, 1)  # final at once
    qdb.wait_for(lambda: "cancelled" in steps_of(qdb, job_id), timeout=10, what="the handler to see it")
    qdb.wait_for(lambda: "job.cancelled worker=" in qdb.logs() and f"job_id={job_id} " in qdb.logs(),
                 what="the worker to log it")
    assert "end" not in steps_of(qdb, job_id)
    # The worker goes on with other jobs; the cancelled one is never retried.
    with qdb.producer() as producer:
        after = producer.enqueue("test.record")
    qdb.wait_for(lambda: qdb.scalar(f"SELECT status FROM {EVERY_JOB} WHERE id = %s", (after,)) == "done",
                 what="the next job")
    assert row_of(qdb, job_id) == ("cancelled", 1, 0, 1)
    assert steps_of(qdb, job_id).count("start") == 1


def test_a_handler_that_ignores_the_request_keeps_its_time_limit_and_stays_cancelled(qdb: QueueDB) -> None:
    qdb.worker("--time-limit", "3")
    with qdb.producer() as producer:
        job_id = producer.enqueue("test.sleep", {"seconds": 60})
    qdb.wait_for(lambda: started(qdb, job_id), what="the job to start")
    qdb.cli("cancel", str(job_id), check=True)
    qdb.wait_for(lambda: "job.cancelled" in qdb.logs(), timeout=20, what="the limit to end it")
    assert "job.failed" not in qdb.logs()
    assert row_of(qdb, job_id) == ("cancelled", 1, 0, 1)
    assert steps_of(qdb, job_id) == ["start"]


def test_the_dashboard_cancels_a_running_job(qdb: QueueDB) -> None:
    from ..web.test_web_pages import client, csrf_of

    qdb.worker()
    with qdb.producer() as producer:
        job_id = producer.enqueue("test.cooperative", {"seconds": 60})
    qdb.wait_for(lambda: started(qdb, job_id), what="the job to start")
    web = client(qdb)
    page = web.get(f"/jobs/{job_id}").get_data(as_text=True)
    assert f"/jobs/{job_id}/cancel" in page  # the button is offered for a running job
    response = web.post(f"/jobs/{job_id}/cancel", data={"csrf": csrf_of(page)}, follow_redirects=True)
    assert f"job {job_id} is cancelled (its handler is asked to stop)" in response.get_data(as_text=True)
    qdb.wait_for(lambda: "cancelled" in steps_of(qdb, job_id), timeout=10, what="the handler to see it")
