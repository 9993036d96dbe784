"""Results: what a handler returns is stored as JSON with its job, read back by Producer.job(),
`mysqlq jobs show` and the dashboard, and purged with the job. A return value that cannot be stored
fails the job with a clear error; a handler that returns nothing stores nothing."""

from __future__ import annotations

import json
from typing import Any

import pytest
from mysqlq_harness.jobs import EVERY_JOB

from mysqlq.web import WebSettings, create_app

from ..conftest import QueueDB

VALUE = {"rows": 3, "name": "é <b>", "ok": True, "list": [1, 2.5, None]}


def run_all(qdb: QueueDB, *jobs: tuple[str, Any], worker: tuple[str, ...] = ()) -> list[int]:
    """Enqueue ``jobs`` (handler, payload), drain them with a burst worker, return their ids."""
    with qdb.producer() as producer:
        ids = [producer.enqueue(handler, payload, max_attempts=1) for handler, payload in jobs]
    result = qdb.cli("worker", "--burst", *worker)
    assert result.returncode == 0, result.stderr
    return ids


@pytest.mark.parametrize("concurrency", ["1", "5"])
def test_what_each_kind_of_handler_returns_is_stored_and_read_back(qdb: QueueDB, concurrency: str) -> None:
    qdb.query("CREATE TABLE test_effects (job_id BIGINT NOT NULL, attempt INT NOT NULL, KEY (job_id))")
    ids = run_all(qdb, ("test.echo", {"value": VALUE}), ("test.aecho", {"value": [1, "two"]}),
                  ("test.techo", {"value": 42}), ("test.echo", {}), ("test.record", {}),
                  worker=("--concurrency", concurrency))
    with qdb.producer() as producer:
        states = [producer.job(job_id) for job_id in ids]
        assert producer.job(max(ids) + 1000) is None
    assert [state.status for state in states if state] == ["done"] * 5
    assert [state.result for state in states if state] == [VALUE, [1, "two"], 42, None, None]
    # Nothing is stored for a handler that returns nothing: the column stays NULL.
    assert [row[0] for row in qdb.query(f"SELECT result IS NULL FROM {EVERY_JOB} ORDER BY id")] == [0, 0, 0, 1, 1]
    assert qdb.scalar("SELECT COUNT(*) FROM test_effects") == 1


def test_a_return_value_that_cannot_be_stored_fails_the_job_and_says_why(qdb: QueueDB) -> None:
    qdb.query("CREATE TABLE test_effects (job_id BIGINT NOT NULL, attempt INT NOT NULL, KEY (job_id))")
    ids = run_all(qdb, ("test.echo", {"unstorable": True}), ("test.echo", {"bytes": 200}),
                  ("test.techo", {"unstorable": True}), ("test.aecho", {"bytes": 200}),
                  worker=("--result-max-bytes", "100"))
    with qdb.producer() as producer:
        states = [producer.job(job_id) for job_id in ids]
    assert [state.status for state in states if state] == ["dead"] * 4
    errors = [(state.error or "").splitlines()[0] for state in states if state]
    assert errors[0] == errors[2] == ("ResultNotStored: the handler's return value cannot be stored as JSON: "
                                      "Object of type object is not JSON serializable")
    assert errors[1] == errors[3] == ("ResultNotStored: the handler's return value is 202 bytes as JSON; "
                                      "the limit is 100 (--result-max-bytes)")
    assert all(state.result is None for state in states if state)
    # The transactional handler's effect was rolled back with its completion.
    assert qdb.scalar("SELECT COUNT(*) FROM test_effects") == 0


def test_jobs_show_and_the_dashboard_show_the_result_and_purge_removes_it(qdb: QueueDB) -> None:
    [job_id] = run_all(qdb, ("test.echo", {"value": VALUE}))
    shown = qdb.cli("jobs", "show", str(job_id), check=True).stdout
    assert "result:\n  {\n    \"rows\": 3,\n    \"name\": \"é <b>\"," in shown
    as_json = json.loads(qdb.cli("jobs", "show", str(job_id), "--json", check=True).stdout)
    assert as_json["result"] == VALUE
    page = create_app(WebSettings(qdb.settings())).test_client().get(f"/jobs/{job_id}").get_data(as_text=True)
    assert "<h2>Result</h2>" in page and "&#34;name&#34;: &#34;é &lt;b&gt;&#34;" in page
    qdb.cli("purge", "--done-older-than", "0", check=True)
    with qdb.producer() as producer:
        assert producer.job(job_id) is None
    [other] = run_all(qdb, ("test.record", {}))
    assert "result: -" in qdb.cli("jobs", "show", str(other), check=True).stdout


def test_an_async_application_reads_a_result_without_blocking(qdb: QueueDB) -> None:
    import asyncio

    [job_id] = run_all(qdb, ("test.aecho", {"value": "fine"}))

    async def read() -> Any:
        with qdb.producer() as producer:
            state = await producer.ajob(job_id)
            assert state is not None
            return state.result

    assert asyncio.run(read()) == "fine"
