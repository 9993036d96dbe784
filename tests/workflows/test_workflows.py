"""Workflows: a job enqueued ``after`` others waits (status ``waiting``) until every one of them is
done, and is released in the transaction that records the last one's outcome; a group's callback
runs once with its members' ids and results; a chain's steps run in order, each with the result
of the one before. A parent that ends dead or cancelled cancels what waits for it, unless that
runs anyway."""

from __future__ import annotations

import json
from typing import Any

import pytest
from mysqlq_harness.jobs import EVERY_JOB

from mysqlq import InvalidJob, Job
from mysqlq.store import dependencies
from mysqlq.store.db import transaction
from mysqlq.store.workers import NO_FENCE

from ..conftest import QueueDB


def drain(qdb: QueueDB, *args: str) -> None:
    result = qdb.cli("worker", "--burst", *args)
    assert result.returncode == 0, result.stderr


def state(qdb: QueueDB, job_id: int) -> tuple[str, Any]:
    status, result, error = qdb.query(f"SELECT status, result, last_error FROM {EVERY_JOB} WHERE id = %s",
                                      (job_id,))[0]
    return str(status), (json.loads(result) if result is not None else error)


def order(qdb: QueueDB) -> list[int]:
    """Job ids in the order the test handlers ran them."""
    return [int(words[0]) for words in qdb.records()]


def test_a_job_waits_for_its_parents_and_runs_after_the_last(qdb: QueueDB) -> None:
    with qdb.producer() as producer:
        first = producer.enqueue("test.step", {"tag": "a"})
        second = producer.enqueue("test.step", {"tag": "b"})
        child = producer.enqueue("test.step", {"tag": "c"}, after=[first, second])
    assert qdb.query("SELECT status, waiting_for FROM mysqlq_jobs WHERE id = %s", (child,)) == [("waiting", 2)]
    stats = json.loads(qdb.cli("stats", "--json", check=True).stdout)
    assert stats[0]["counts"]["waiting"] == 1 and stats[0]["counts"]["ready"] == 2
    assert "waiting" in qdb.cli("jobs", "list", "--status", "waiting", check=True).stdout
    drain(qdb)
    assert order(qdb)[-1] == child and sorted(order(qdb)[:2]) == [first, second]
    assert [words[3] for words in qdb.records() if int(words[0]) == child] == [f"{first},{second}"]
    assert state(qdb, child) == ("done", ["c"])  # two parents: no single previous result


def test_a_chain_runs_in_order_each_step_with_the_result_before(qdb: QueueDB) -> None:
    with qdb.producer() as producer:
        ids = producer.chain(*[Job("test.step", {"tag": tag}) for tag in "abcd"])
    assert [state(qdb, job_id)[0] for job_id in ids] == ["ready", "waiting", "waiting", "waiting"]
    drain(qdb, "--concurrency", "4")
    assert order(qdb) == ids
    assert state(qdb, ids[-1]) == ("done", ["a", "b", "c", "d"])


def test_transactional_steps_release_the_next_in_their_own_transaction(qdb: QueueDB) -> None:
    qdb.query("CREATE TABLE test_effects (job_id BIGINT NOT NULL, attempt INT NOT NULL, KEY (job_id))")
    with qdb.producer() as producer:
        ids = producer.chain(*[Job("test.tstep", {"tag": tag}) for tag in "xyz"])
    drain(qdb, "--concurrency", "2")
    assert order(qdb) == ids
    assert state(qdb, ids[-1]) == ("done", ["x", "y", "z"])
    assert qdb.scalar("SELECT COUNT(*) FROM test_effects") == 3


def test_a_group_callback_runs_once_with_every_members_id_and_result(qdb: QueueDB) -> None:
    with qdb.producer() as producer:
        group = producer.group([Job("test.echo", {"value": n}) for n in range(50)], then=Job("test.gather"))
    assert state(qdb, group.callback)[0] == "waiting"
    drain(qdb, "--concurrency", "4")
    assert [words for words in qdb.records() if words[1] == "gather"] == [[str(group.callback), "gather", "50"]]
    status, result = state(qdb, group.callback)
    assert status == "done" and result == {"ids": group.members, "results": list(range(50)), "statuses": ["done"]}


def test_a_failed_parent_cancels_what_waits_unless_it_runs_anyway(qdb: QueueDB) -> None:
    with qdb.producer() as producer:
        chain = producer.chain(Job("test.step", {"tag": "a"}), Job("test.step", {"tag": "b", "fail": True},
                                                                      max_attempts=1),
                               Job("test.step", {"tag": "c"}), Job("test.step", {"tag": "d"}))
        anyway = producer.enqueue("test.step", {"tag": "e"}, after=[chain[1]], on_parent_failure="run")
    drain(qdb)
    assert [state(qdb, job_id)[0] for job_id in chain] == ["done", "dead", "cancelled", "cancelled"]
    assert state(qdb, chain[2])[1] == f"job {chain[1]} it waited for ended dead"
    assert state(qdb, chain[3])[1] == f"job {chain[2]} it waited for ended cancelled"
    assert state(qdb, anyway) == ("done", ["e"])  # its one parent's result: none, it died


def test_enqueued_after_jobs_that_already_ended(qdb: QueueDB) -> None:
    with qdb.producer() as producer:
        done = producer.enqueue("test.echo", {"value": 7})
        dead = producer.enqueue("test.fail", max_attempts=1)
    drain(qdb)
    with qdb.producer() as producer:
        ready = producer.enqueue("test.step", after=[done])
        cancelled = producer.enqueue("test.step", after=[done, dead])
        runs = producer.enqueue("test.step", after=[dead], on_parent_failure="run")
        with pytest.raises(InvalidJob, match=r"job 999999 to wait for does not exist \(never enqueued, or purged\)"):
            producer.enqueue("test.step", after=[done, 999999])
        with pytest.raises(InvalidJob, match="after must hold job ids"):
            producer.enqueue("test.step", after=["1"])
        with pytest.raises(InvalidJob, match="on_parent_failure must be 'cancel' or 'run'"):
            producer.enqueue("test.step", after=[done], on_parent_failure="ignore")
    assert qdb.scalar(f"SELECT MAX(id) FROM {EVERY_JOB}") == runs  # the refused ones left nothing behind
    assert state(qdb, ready)[0] == "ready" and state(qdb, runs)[0] == "ready"
    assert state(qdb, cancelled) == ("cancelled", f"job {dead} it waited for ended dead")


def test_cancelling_a_chains_first_step_cancels_the_chain(qdb: QueueDB) -> None:
    with qdb.producer() as producer:
        ids = producer.chain(*[Job("test.step", {"tag": tag}) for tag in "abc"])
    out = qdb.cli("cancel", str(ids[0]), check=True).stdout
    assert out.strip() == "cancelled 1 job"
    assert [state(qdb, job_id)[0] for job_id in ids] == ["cancelled"] * 3


def test_outbox_enqueue_many_and_dedupe_keys(qdb: QueueDB) -> None:
    with qdb.producer() as producer:
        parent = producer.enqueue("test.step", {"tag": "p"})
        with producer.transaction() as tx:
            steps = tx.chain(Job("test.step", {"tag": "x"}, after=[parent]), Job("test.step", {"tag": "y"}))
        added = producer.enqueue_many([Job("test.step", {"tag": "m"}, after=[steps[-1]], dedupe_key="m"),
                                       Job("test.record")])
        again = producer.enqueue("test.step", {"tag": "m2"}, after=[parent], dedupe_key="m")
        with pytest.raises(InvalidJob, match="item 0: after must hold job ids"):
            producer.enqueue_many([Job("test.step", after=[0])])
    assert added == 2
    keyed = qdb.scalar("SELECT id FROM mysqlq_jobs WHERE dedupe_key = 'm'")
    assert again == keyed  # the key's job stands: no second set of parents
    assert [row[0] for row in qdb.query("SELECT parent_id FROM mysqlq_dependencies WHERE child_id = %s",
                                        (keyed,))] == [steps[-1]]
    drain(qdb)
    assert state(qdb, keyed) == ("done", ["p", "x", "y", "m"])


def test_jobs_show_lists_parents_and_dependents(qdb: QueueDB) -> None:
    with qdb.producer() as producer:
        ids = producer.chain(Job("test.step"), Job("test.step"), Job("test.step"))
    shown = qdb.cli("jobs", "show", str(ids[1]), check=True).stdout
    assert f"waits for   {ids[0]} (ready)\n" in shown and f"dependents  {ids[2]} (waiting)\n" in shown
    as_json = json.loads(qdb.cli("jobs", "show", str(ids[1]), "--json", check=True).stdout)
    assert as_json["parents"] == [{"id": ids[0], "status": "ready"}]
    assert as_json["dependents"] == [{"id": ids[2], "status": "waiting"}]


def test_the_reaper_ends_a_lost_parent_on_its_last_attempt_and_cancels_its_dependents(qdb: QueueDB) -> None:
    with qdb.producer() as producer:
        parent = producer.enqueue("test.step", max_attempts=1)
        child = producer.enqueue("test.step", after=[parent])
    # The parent as a worker that died holding it leaves it: running, its lease lapsed, no worker row.
    qdb.query("UPDATE mysqlq_jobs SET status = 'running', running_batch = 77, batch_id = 77,"
              " worker_id = 12345, attempts = 1, lease_until = NOW(6) - INTERVAL 1 SECOND WHERE id = %s", (parent,))
    conn = qdb.connect()
    try:
        with conn.cursor() as cur:
            from mysqlq.store import workers

            assert workers.reap(cur, [], True, NO_FENCE) == 0  # left to the releasing path
            with transaction(conn):
                assert dependencies.reap_parents(cur, [], True, NO_FENCE) == 1
    finally:
        conn.close()
    assert state(qdb, parent)[0] == "dead"
    assert state(qdb, child) == ("cancelled", f"job {parent} it waited for ended dead")


def test_the_dashboard_shows_a_jobs_parents_and_dependents(qdb: QueueDB) -> None:
    from mysqlq.web import WebSettings, create_app

    with qdb.producer() as producer:
        group = producer.group([Job("test.step"), Job("test.step")], then=Job("test.gather"))
    client = create_app(WebSettings(qdb.settings())).test_client()
    page = client.get(f"/jobs/{group.callback}").get_data(as_text=True)
    first, second = group.members
    assert (f'<a href="/jobs/{first}">{first}</a> <span class="badge ready">ready</span>, '
            f'<a href="/jobs/{second}">{second}</a>') in page
    member = client.get(f"/jobs/{first}").get_data(as_text=True)
    assert f'<a href="/jobs/{group.callback}">{group.callback}</a> <span class="badge waiting">waiting</span>' in member
    dashboard = client.get("/").get_data(as_text=True)
    assert 'title="waiting for the jobs they were enqueued after">waiting</th>' in dashboard
    metrics = client.get("/metrics").get_data(as_text=True)
    assert 'mysqlq_jobs{queue="default",status="waiting"} 1.0' in metrics
    assert f'href="/jobs/{first}/workflow">Workflow</a>' in member
    flow = client.get(f"/jobs/{first}/workflow").get_data(as_text=True)
    assert "3 jobs:" in flow and '<span class="badge ready">ready</span> 2' in flow
    callback_row = flow[flow.index(f'<tr data-job="{group.callback}">'):].split("</tr>")[0]
    assert f'<a href="/jobs/{first}">{first}</a>, <a href="/jobs/{second}">{second}</a>' in callback_row
    assert client.get("/jobs/999999/workflow").status_code == 404


def test_the_cli_enqueues_after_other_jobs(qdb: QueueDB, tmp_path: Any) -> None:
    first = int(qdb.cli("enqueue", "test.step", '{"tag": "a"}', check=True).stdout)
    second = int(qdb.cli("enqueue", "test.step", '{"tag": "b"}', "--after", str(first), check=True).stdout)
    lines = tmp_path / "jobs.jsonl"
    lines.write_text(json.dumps({"handler": "test.step", "payload": {"tag": "c"}, "after": [second]}) + "\n"
                     + json.dumps({"handler": "test.step", "after": [first], "on_parent_failure": "run"}) + "\n")
    enqueued = qdb.cli("enqueue", "--file", str(lines), check=True).stdout.strip()
    assert enqueued == "enqueued 2 jobs (0 skipped by dedupe key)"
    refused = qdb.cli("enqueue", "test.step", "--after", "0")
    assert refused.returncode != 0 and "after must hold job ids (positive integers), got 0" in refused.stderr
    assert qdb.statuses() == {"ready": 1, "waiting": 3}
    drain(qdb)
    third = qdb.scalar(f"SELECT MAX(id) FROM {EVERY_JOB}") - 1
    assert state(qdb, third) == ("done", ["a", "b", "c"])


def test_a_group_of_ten_thousand_members(qdb: QueueDB) -> None:
    with qdb.producer() as producer:
        group = producer.group([Job("test.echo", {"value": n}) for n in range(10_000)], then=Job("test.gather"))
    assert qdb.scalar("SELECT waiting_for FROM mysqlq_jobs WHERE id = %s", (group.callback,)) == 10_000
    drain(qdb, "--concurrency", "4", "--result-max-bytes", "1000000")  # the callback returns every id and result
    assert [words for words in qdb.records() if words[1] == "gather"] == [[str(group.callback), "gather", "10000"]]
    status, result = state(qdb, group.callback)
    assert status == "done" and result["ids"] == group.members and result["results"] == list(range(10_000))


def test_cancelling_a_workflow_cancels_every_step_that_has_not_ended(qdb: QueueDB) -> None:
    from mysqlq.web import WebSettings, create_app

    from ..web_fixtures import csrf_of

    with qdb.producer() as producer:
        group = producer.group([Job("test.step", {"tag": n}, queue="first") for n in range(3)],
                               then=Job("test.gather"))
        chain = producer.chain(Job("test.step"), Job("test.step"))
        other = producer.chain(Job("test.step"), Job("test.step"))
        after = producer.enqueue("test.step", after=[group.callback, chain[-1]])
    drain(qdb, "--queue", "first")  # the members end done: only what waits is left to cancel
    out = qdb.cli("cancel", "--workflow", str(group.members[0]), check=True).stdout
    assert out.strip() == f"cancelled 4 jobs of the workflow of job {group.members[0]}"
    assert [state(qdb, job_id)[0] for job_id in group.members] == ["done"] * 3
    assert [state(qdb, job_id)[0] for job_id in [group.callback, *chain, after]] == ["cancelled"] * 4
    assert [state(qdb, job_id)[0] for job_id in other] == ["ready", "waiting"]  # not linked
    client = create_app(WebSettings(qdb.settings())).test_client()
    page = client.get(f"/jobs/{other[1]}").get_data(as_text=True)
    assert "Cancel workflow" in page
    token = csrf_of(page)
    answer = client.post(f"/jobs/{other[1]}/cancel-workflow", data={"csrf": token}, follow_redirects=True)
    assert f"cancelled 2 jobs of the workflow of job {other[1]}" in answer.get_data(as_text=True)
    assert [state(qdb, job_id)[0] for job_id in other] == ["cancelled", "cancelled"]
    refused = qdb.cli("cancel", "--workflow", "999999")
    assert refused.returncode != 0 and "no job with id 999999" in refused.stderr
