"""`mysqlq web`'s /metrics: parsed with prometheus_client's own parser, its counts equal to
`mysqlq stats --json`, and a scrape that reads live work and recent history only, never the rest."""

from __future__ import annotations

import urllib.parse
from collections.abc import Callable
from typing import Any

from mysqlq_harness.net import get

from mysqlq import Job
from mysqlq.store import expand
from mysqlq.store import web as web_store
from mysqlq.store.db import Connection
from mysqlq.store.sql import query
from mysqlq.web.metrics import QueueCollector

from ..conftest import QueueDB
from ..cost.test_ops_hot_path import DEAD, HISTORY_DOUBLINGS, READY, RECENT, big, handler_reads, rows_read  # noqa: F401
from ..cost.test_ops_hot_path import reads_of as reads_of_cursor
from ..ops_fixtures import plant
from ..plans import reads_per_updated_row
from ..web_fixtures import TOKEN, scrape, stats_json, web_server

LIVE = ("ready", "scheduled", "blocked", "running", "dead")


def labels(**values: str) -> tuple[tuple[str, str], ...]:
    return tuple(sorted(values.items()))


def test_metrics_count_what_stats_counts(qdb: QueueDB) -> None:
    with web_server(qdb) as base:
        first = scrape(base + "/metrics")  # the finished-jobs counters start counting here
        assert first["mysqlq_up"] == {(): 1.0}
        with qdb.producer() as producer:
            for i in range(7):
                producer.enqueue("test.record", {"i": i}, queue="mail")
            for i in range(3):
                producer.enqueue("test.fail", {"i": i}, queue="mail", max_attempts=1)
            for i in range(4):
                producer.enqueue("test.record", {"i": i}, queue="reports")
            producer.enqueue("test.record", {}, queue="reports", delay=3600)
            cancelled = producer.enqueue("test.record", {}, queue="reports", delay=3600)
        qdb.worker("--queue", "mail", "--burst").wait(timeout=60)
        qdb.cli("cancel", str(cancelled), check=True)
        qdb.cli("pause", "reports", check=True)

        def settled() -> Any:
            found = scrape(base + "/metrics")
            done = found["mysqlq_jobs_finished_total"].get(labels(queue="mail", status="done"))
            cancels = found["mysqlq_jobs_finished_total"].get(labels(queue="reports", status="cancelled"))
            return found if (done, cancels) == (7, 1) else None

        metrics = qdb.wait_for(settled, timeout=30, what="the finished counters to catch up")
        stats = stats_json(qdb)

    assert set(stats) == {"mail", "reports"}
    for queue, entry in stats.items():
        for status in LIVE:
            live = metrics["mysqlq_jobs"][labels(queue=queue, status=status)]
            assert live == entry["counts"][status], (queue, status)
        for status in ("done", "dead", "cancelled"):
            finished = metrics["mysqlq_jobs_finished_total"][labels(queue=queue, status=status)]
            assert finished == entry["counts"][status], (queue, status)
        paused = metrics["mysqlq_queue_paused"][labels(queue=queue)]
        assert paused == (1.0 if entry["paused"] else 0.0)
    assert stats["mail"]["counts"]["dead"] == 3 and stats["reports"]["counts"]["ready"] == 4
    # Scraped first, then stats: the oldest ready job can only have aged in between.
    age = metrics["mysqlq_oldest_ready_job_age_seconds"][labels(queue="reports")]
    assert 0 < age <= stats["reports"]["oldest_ready_age"]
    assert metrics["mysqlq_oldest_ready_job_age_seconds"][labels(queue="mail")] == 0
    assert metrics["mysqlq_workers_registered"] == {(): 0.0}  # the burst worker left the registry


def test_blocked_jobs_are_counted_on_the_dashboard_and_in_metrics(qdb: QueueDB) -> None:
    plant(qdb, "blocked", 2, queue="keyed")
    plant(qdb, "ready", 1, queue="keyed")
    with web_server(qdb) as base:
        metrics = scrape(base + "/metrics")
        status, page = get(base + "/")
    assert metrics["mysqlq_jobs"][labels(queue="keyed", status="blocked")] == 2
    assert metrics["mysqlq_jobs"][labels(queue="keyed", status="ready")] == 1
    assert status == 200 and ">blocked</th>" in page
    assert '/jobs?queue=keyed&amp;status=blocked">2</a>' in page
    assert stats_json(qdb)["keyed"]["counts"]["blocked"] == 2


def test_fairness_keys_waiting_counts_the_keys_with_ready_jobs_per_queue(qdb: QueueDB) -> None:
    with qdb.producer() as producer:
        producer.enqueue_many([Job("test.record", queue="fair", fairness_key=key)
                               for key, count in {"a": 3, "b": 1, "c": 1}.items() for _ in range(count)])
        producer.enqueue("test.record", queue="later", fairness_key="a", delay=3600)  # scheduled: not waiting
        producer.enqueue_many([Job("test.record", queue="plain") for _ in range(2)])
    with web_server(qdb) as base:
        metrics = scrape(base + "/metrics")
        assert metrics["mysqlq_fairness_keys_waiting"] == {
            labels(queue="fair"): 3, labels(queue="later"): 0, labels(queue="plain"): 0}
        assert stats_json(qdb)["fair"]["keys_waiting"] == 3
        qdb.worker("--queue", "fair", "--burst").wait(timeout=60)  # the keys' jobs are done: none waits
        assert scrape(base + "/metrics")["mysqlq_fairness_keys_waiting"][labels(queue="fair")] == 0


def test_workers_alive_and_the_jobs_they_hold(qdb: QueueDB) -> None:
    with qdb.producer() as producer:
        held = producer.enqueue("test.sleep", {"seconds": 30}, queue="slow")
    qdb.worker("--queue", "slow", "--name", "w-slow")
    qdb.wait_for(lambda: qdb.scalar("SELECT status FROM mysqlq_jobs WHERE id = %s", (held,)) == "running",
                 what="the job to run")
    with web_server(qdb) as base:
        metrics = scrape(base + "/metrics")
        status, page = get(base + "/workers")
    assert metrics["mysqlq_workers_alive"] == {(): 1.0}
    assert metrics["mysqlq_worker_jobs_running"] == {labels(worker="w-slow"): 1.0}
    assert metrics["mysqlq_jobs"][labels(queue="slow", status="running")] == 1
    assert status == 200 and "w-slow" in page and f"/jobs/{held}" in page


def test_a_token_guards_metrics_and_nothing_secret_is_served(qdb: QueueDB) -> None:
    plant(qdb, "dead", error="boom")
    user, password = f"web_{qdb.name[-8:]}", "pw-" + qdb.name[-8:] + "-secret"
    for host in ("localhost", "127.0.0.1"):
        qdb.query(f"CREATE USER '{user}'@'{host}' IDENTIFIED BY %s", (password,))
        qdb.query(f"GRANT ALL ON {qdb.name}.* TO '{user}'@'{host}'")
    url = urllib.parse.urlsplit(qdb.dsn)
    dsn = url._replace(netloc=f"{user}:{password}@{url.hostname or 'localhost'}"
                       + (f":{url.port}" if url.port else "")).geturl()
    try:
        with web_server(qdb, MYSQLQ_WEB_TOKEN=TOKEN, MYSQLQ_DSN=dsn) as base:
            assert get(base + "/metrics")[0] == 401
            assert get(base + "/metrics", {"Authorization": "Bearer wrong-token-0123456789"})[0] == 401
            found = scrape(base + "/metrics", {"Authorization": f"Bearer {TOKEN}"})
            assert found["mysqlq_up"] == {(): 1.0}
            auth = {"Authorization": f"Bearer {TOKEN}"}
            bodies = [get(base + path, auth)[1] for path in ("/", "/jobs", "/jobs/1", "/workers", "/nowhere")]
            qdb.query(f"DROP USER '{user}'@'localhost', '{user}'@'127.0.0.1'")  # reconnecting now fails
            for (connection,) in qdb.query("SELECT id FROM information_schema.PROCESSLIST WHERE user = %s", (user,)):
                qdb.query(f"KILL {int(connection)}")
            status, down = get(base + "/", auth)
            bodies += [down, get(base + "/metrics", auth)[1]]
    finally:
        qdb.query(f"DROP USER IF EXISTS '{user}'@'localhost', '{user}'@'127.0.0.1'")
    assert "boom" in bodies[2] and status == 503
    for body in bodies:
        assert TOKEN not in body and password not in body and user not in body
    log = "".join(path.read_text() for path in qdb.tmp.glob("web-*.log"))
    assert "web.database_error" in log and "access denied" in log  # the details go to the log...
    assert password not in log and TOKEN not in log  # ...without the secrets


def test_a_database_that_is_gone_gives_up_zero(qdb: QueueDB) -> None:
    with web_server(qdb) as base:
        qdb.query(f"DROP DATABASE {qdb.name}")  # every statement now fails (the fixture tolerates it)
        found = scrape(base + "/metrics")
        status, page = get(base + "/")
    assert found == {"mysqlq_up": {(): 0.0}}
    assert status == 503 and qdb.name not in page


# ------------------------------------------------------------------ a scrape never reads the history


def reads_of(conn: Connection, work: Callable[[], Any]) -> int:
    baseline = handler_reads(conn) - handler_reads(conn)
    before = handler_reads(conn)
    work()
    return handler_reads(conn) - before + baseline


def test_a_scrape_reads_the_live_jobs_and_recent_history_only(big: Connection) -> None:  # noqa: F811
    def run(unit: Callable[[Any], Any]) -> Any:
        with big.cursor() as cur:
            return unit(cur)

    collector = QueueCollector(run, settle=0)
    list(collector.collect())  # the first scrape: the counters start
    with big.cursor() as cur:  # a job ends after it: the next scrape counts it
        cur.execute("INSERT INTO mysqlq_jobs (queue, handler, payload, status, run_at, max_attempts, attempts, "
                    "enqueued_at, finished_at) VALUES ('hot', 't', '{}', 'done', NOW(6), 5, 1, NOW(6), NOW(6))")
        last_id = cur.lastrowid
    families: list[Any] = []
    try:
        reads = reads_of(big, lambda: families.extend(collector.collect()))
    finally:
        with big.cursor() as cur:
            cur.execute("DELETE FROM mysqlq_jobs WHERE id = %s", (last_id,))
    samples = {(s.name, tuple(sorted(s.labels.items()))): s.value for m in families for s in m.samples}
    assert samples[("mysqlq_jobs", labels(queue="hot", status="ready"))] == READY
    assert samples[("mysqlq_jobs_finished_total", labels(queue="hot", status="done"))] == 1
    # Live work: 2 queues × READY ready jobs, read once on the claim index for the counts, and on
    # (status, run_at) then by row for the oldest one's age; the 2**18 done jobs are never read
    # (1,826 when written), plus a few rows for the registry, the pause table and the new job.
    assert reads <= 4 * 2 * READY + 100, reads
    assert reads < 2**HISTORY_DOUBLINGS / 100


def test_the_dashboards_own_statements_read_no_history(big: Connection) -> None:  # noqa: F811
    # Each table's range of the window (and the ends of its ranges), then the temporary table that groups them.
    assert rows_read(big, expand("web_finished_per_minute", 2), ["hot", "other", 60] * 2) <= 3 * RECENT + 20
    assert rows_read(big, query("web_running_jobs"), {"limit": 1000}) <= 2
    per_page_row = reads_per_updated_row(big) - 1  # MySQL's counters show one more read per row of a page
    for filters in [{"queue": "hot", "status": "ready"},
                    {"queue": None, "status": "ready"}, {"queue": "hot", "status": None}]:
        for before in (None, 2**HISTORY_DOUBLINGS + 2 * READY):
            params = {**filters, "handler": None, "before": before, "limit": 50}

            def page(cur: Any, params: dict[str, Any] = params) -> Any:
                return web_store.jobs_page(cur, **params)
            assert reads_of_cursor(big, page) <= 2 * READY + per_page_row * 51 + 2, (filters, before)
    # A filter no index orders (a rare handler; a queue without jobs) reads one window of history,
    # and the page links on to the next window.
    for filters in [{"queue": None, "status": None, "handler": "test.rare"},
                    {"queue": None, "status": "dead", "handler": None},
                    {"queue": "nosuch", "status": None, "handler": None},
                    {"queue": "nosuch", "status": "done", "handler": None}]:
        pages: list[Any] = []

        def rare(cur: Any, filters: dict[str, Any] = filters, pages: list[Any] = pages) -> Any:
            pages.append(web_store.jobs_page(cur, **filters, before=None, limit=50))
        assert reads_of_cursor(big, rare) <= web_store.PAGE_WINDOW + 20, filters
        [found] = pages
        with big.cursor() as cur:
            cur.execute("SELECT MAX(id) FROM mysqlq_jobs")
            newest = int(cur.fetchone()[0])
        expected = DEAD if filters["status"] == "dead" else 0  # the dead jobs are among the newest
        assert len(found.rows) == expected and found.searched_down_to == newest + 1 - web_store.PAGE_WINDOW, filters
