"""Inspecting a queue: `jobs list`, `jobs show`, and `stats` with throughput, paused queues and --watch."""

from __future__ import annotations

import json
import signal
import subprocess

from ..conftest import MYSQLQ, QueueDB
from ..ops_fixtures import plant


def test_jobs_list_shows_the_newest_jobs_first_fifty_by_default(qdb: QueueDB) -> None:
    ids = plant(qdb, "ready", 60)
    rows = json.loads(qdb.cli("jobs", "list", "--json", check=True).stdout)
    assert [row["id"] for row in rows] == sorted(ids, reverse=True)[:50]
    assert [row["id"] for row in json.loads(qdb.cli("jobs", "list", "--limit", "3", "--json", check=True).stdout)] \
        == sorted(ids, reverse=True)[:3]


def test_jobs_list_filters_by_queue_status_and_handler(qdb: QueueDB) -> None:
    ready_a = plant(qdb, "ready", 2, queue="a")
    dead_a = plant(qdb, "dead", 1, queue="a", ended_ago=5, error="KeyError: 'x'\n\nTraceback ...")
    plant(qdb, "ready", 2, queue="b")
    flaky_b = plant(qdb, "ready", 1, queue="b", handler="test.flaky")

    def ids(*args: str) -> list[int]:
        return [row["id"] for row in json.loads(qdb.cli("jobs", "list", "--json", *args, check=True).stdout)]

    assert ids("--queue", "a") == sorted(ready_a + dead_a, reverse=True)
    assert ids("--queue", "a", "--status", "ready") == sorted(ready_a, reverse=True)
    assert ids("--status", "dead") == dead_a
    assert ids("--handler", "test.flaky") == flaky_b
    assert ids("--queue", "nothing-here") == []


def test_jobs_list_table_has_one_line_per_job_with_the_errors_first_line(qdb: QueueDB) -> None:
    error = "ValueError: boom\n\nTraceback (most recent call last):"
    (dead,) = plant(qdb, "dead", ended_ago=5, attempts=5, error=error)
    lines = qdb.cli("jobs", "list", check=True).stdout.splitlines()
    assert lines[0].split()[:4] == ["id", "queue", "handler", "status"]
    assert len(lines) == 2
    assert lines[1].split()[:5] == [str(dead), "default", "test.record", "dead", "5/5"]
    assert lines[1].endswith("ValueError: boom")
    assert qdb.cli("jobs", "list", "--status", "cancelled", check=True).stdout.strip() == "no jobs match"


def test_jobs_show_tells_everything_about_a_dead_job_including_its_traceback(qdb: QueueDB) -> None:
    with qdb.producer() as producer:
        job_id = producer.enqueue("test.fail", {"order": 7, "note": "für"}, queue="mail", max_attempts=1)
    qdb.worker("--burst", "--queue", "mail").wait(timeout=60)
    text = qdb.cli("jobs", "show", str(job_id), check=True).stdout
    assert text.startswith(f"job {job_id}\n")
    for expected in ["queue       mail", "handler     test.fail", "status      dead", "attempts    1 of 1",
                     '"order": 7', '"note": "für"', "ValueError: boom on attempt 1",
                     "Traceback (most recent call last):", 'raise ValueError(f"boom on attempt {ctx.attempt}")']:
        assert expected in text, text
    assert "finished    -" not in text  # a dead job has ended
    assert "worker      -" not in text  # and names the worker that ran it


def test_jobs_show_json_has_every_field_and_the_payload_as_json(qdb: QueueDB) -> None:
    with qdb.producer() as producer:
        job_id = producer.enqueue("test.record", {"tag": "x"}, queue="q", delay=60, dedupe_key="k1")
    shown = json.loads(qdb.cli("jobs", "show", str(job_id), "--json", check=True).stdout)
    assert shown["payload"] == {"tag": "x"}
    assert (shown["id"], shown["queue"], shown["status"], shown["dedupe_key"]) == (job_id, "q", "scheduled", "k1")
    assert (shown["attempts"], shown["max_attempts"], shown["last_error"]) == (0, 5, None)
    assert shown["run_at"] > shown["enqueued_at"]
    assert shown["run_at"].endswith("Z")
    for key in ["batch_id", "worker", "started_at", "finished_at", "lease_until", "priority", "time_limit"]:
        assert key in shown
    assert shown["dedupe_scope"] == "forever"
    assert "dedupe key  k1 (held until purged)" in qdb.cli("jobs", "show", str(job_id), check=True).stdout
    assert shown["concurrency_key"] is None and "  concurrency -\n" in qdb.cli("jobs", "show", str(job_id)).stdout


def test_jobs_show_names_the_concurrency_key(qdb: QueueDB) -> None:
    with qdb.producer() as producer:
        job_id = producer.enqueue("test.limited", concurrency_key="account-7")
    assert "  concurrency key account-7\n" in qdb.cli("jobs", "show", str(job_id), check=True).stdout
    shown = json.loads(qdb.cli("jobs", "show", str(job_id), "--json", check=True).stdout)
    assert shown["concurrency_key"] == "account-7"
    from ..web.test_web_pages import client

    page = client(qdb).get(f"/jobs/{job_id}").get_data(as_text=True)
    assert "<th>concurrency key</th><td>account-7</td>" in page


def test_jobs_show_prints_a_payload_that_is_not_json_as_it_is(qdb: QueueDB) -> None:
    (job_id,) = plant(qdb, "ready")
    qdb.query("UPDATE mysqlq_jobs SET payload = 'not {json' WHERE id = %s", (job_id,))
    assert "payload:\n  not {json\n" in qdb.cli("jobs", "show", str(job_id), check=True).stdout
    assert json.loads(qdb.cli("jobs", "show", str(job_id), "--json", check=True).stdout)["payload"] == "not {json"


def test_stats_shows_jobs_done_per_minute_over_the_last_five_minutes(qdb: QueueDB) -> None:
    plant(qdb, "done", 30, queue="a", ended_ago=60)
    plant(qdb, "dead", 2, queue="a", ended_ago=10)
    plant(qdb, "done", 500, queue="a", ended_ago=3600)  # too old to count
    plant(qdb, "done", 500, queue="b", ended_ago=3600)
    by_queue = {entry["queue"]: entry for entry in json.loads(qdb.cli("stats", "--json", check=True).stdout)}
    assert by_queue["a"]["throughput"] == {"window_s": 300.0, "done": 30, "dead": 2, "done_per_min": 6.0}
    assert by_queue["a"]["counts"]["done"] == 530
    assert by_queue["b"]["throughput"]["done_per_min"] == 0
    lines = qdb.cli("stats", check=True).stdout.splitlines()
    header = lines[0].split()
    row_a = dict(zip(header, lines[1].split(), strict=True))
    assert (row_a["queue"], row_a["done/min"], row_a["state"]) == ("a", "6", "active")


def test_stats_marks_paused_queues_even_without_jobs(qdb: QueueDB) -> None:
    plant(qdb, "ready", 3, queue="mail")
    qdb.cli("pause", "mail", check=True)
    qdb.cli("pause", "reports", check=True)
    by_queue = {entry["queue"]: entry for entry in json.loads(qdb.cli("stats", "--json", check=True).stdout)}
    assert by_queue["mail"]["paused"] and by_queue["mail"]["counts"]["ready"] == 3
    assert by_queue["reports"]["paused"] and sum(by_queue["reports"]["counts"].values()) == 0
    states = {line.split()[0]: line.split()[-1] for line in qdb.cli("stats", check=True).stdout.splitlines()[1:]}
    assert states == {"mail": "paused", "reports": "paused"}
    qdb.cli("resume", "mail", check=True)
    assert not {e["queue"]: e for e in json.loads(qdb.cli("stats", "--json", check=True).stdout)}["mail"]["paused"]


def test_stats_watch_refreshes_until_ctrl_c_then_exits_zero(qdb: QueueDB) -> None:
    plant(qdb, "ready", 1, queue="watched")
    out = qdb.tmp / "watch.out"
    with out.open("w") as sink:
        proc = subprocess.Popen([MYSQLQ, "stats", "--watch", "0.1"], env=qdb.env(), stdout=sink,
                                stderr=subprocess.PIPE, text=True)
    try:
        qdb.wait_for(lambda: out.read_text().count("mysqlq stats, every") >= 3, what="three refreshes")
        proc.send_signal(signal.SIGINT)
        _, stderr = proc.communicate(timeout=30)
    finally:
        if proc.poll() is None:
            proc.kill()
    assert proc.returncode == 0
    assert "Traceback" not in stderr
    assert "watched" in out.read_text()


def test_stats_watch_with_json_prints_one_document_per_refresh(qdb: QueueDB) -> None:
    plant(qdb, "ready", 1, queue="watched")
    out = qdb.tmp / "watch.jsonl"
    with out.open("w") as sink:
        proc = subprocess.Popen([MYSQLQ, "stats", "--watch", "0.1", "--json"], env=qdb.env(),
                                stdout=sink, stderr=subprocess.DEVNULL)
    try:
        qdb.wait_for(lambda: len(out.read_text().splitlines()) >= 2, what="two refreshes")
        proc.send_signal(signal.SIGINT)
        proc.wait(timeout=30)
    finally:
        if proc.poll() is None:
            proc.kill()
    documents = [json.loads(line) for line in out.read_text().splitlines() if line.endswith("]")]
    assert documents and all(doc[0]["queue"] == "watched" for doc in documents)
    assert proc.returncode == 0
