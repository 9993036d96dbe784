"""The dashboard's pages over HTTP (Flask's test client, the real database): what a job holds is
shown escaped, bad input is a clear 404, redirects stay on the site, and refusals change nothing."""

from __future__ import annotations

import re
import socket
from typing import Any

from mysqlq.web import WebSettings, create_app

from ..conftest import QueueDB
from ..ops_fixtures import assert_one_line_error, plant, status_of
from ..web_fixtures import csrf_of


def client(qdb: QueueDB, **options: Any) -> Any:
    return create_app(WebSettings(qdb.settings(), **options)).test_client()


def test_what_a_job_holds_is_shown_escaped(qdb: QueueDB) -> None:
    [job_id] = plant(qdb, "dead", error="<img src=x onerror=alert(1)>\nTraceback: <script>")
    qdb.query("UPDATE mysqlq_jobs SET payload = %s WHERE id = %s", ('{"html": "<script>alert(2)</script>"}', job_id))
    page = client(qdb).get(f"/jobs/{job_id}").get_data(as_text=True)
    assert "<script>" not in page and "<img" not in page
    assert "&lt;script&gt;alert(2)&lt;/script&gt;" in page and "&lt;img src=x onerror=alert(1)&gt;" in page


def test_bad_input_is_a_clear_404(qdb: QueueDB) -> None:
    web = client(qdb)
    for path, message in [("/jobs/99999", "no job with id 99999"), ("/jobs?status=zombie", "no job status"),
                          ("/jobs?before=abc", "not a job id")]:
        response = web.get(path)
        assert response.status_code == 404, path
        assert message in response.get_data(as_text=True), path


def test_an_action_refused_by_the_jobs_status_changes_nothing(qdb: QueueDB) -> None:
    [done] = plant(qdb, "done", ended_ago=5)
    web = client(qdb)
    token = csrf_of(web.get("/").get_data(as_text=True))
    response = web.post(f"/jobs/{done}/cancel", data={"csrf": token}, follow_redirects=True)
    refused = f"job {done} is done: only ready, scheduled, blocked, waiting or running jobs can be cancelled"
    assert refused in response.get_data(as_text=True)
    response = web.post(f"/jobs/{done}/retry", data={"csrf": token}, follow_redirects=True)
    assert "only dead jobs can be retried" in response.get_data(as_text=True)
    assert status_of(qdb, done) == "done"


def test_redirects_stay_on_this_site(qdb: QueueDB) -> None:
    [dead] = plant(qdb, "dead")
    web = client(qdb)
    web.get("/")
    cookie = web.get_cookie("mysqlq_csrf")
    assert cookie is not None
    for target in ("//evil.example/", "https://evil.example/", "/\\evil.example"):
        response = web.post(f"/jobs/{dead}/retry", data={"csrf": cookie.value, "next": target})
        assert response.status_code == 303
        assert response.headers["Location"] == f"/jobs/{dead}", target
    with_token = client(qdb, token="t" * 20)
    response = with_token.get("/login?next=//evil.example/")
    assert 'name="next" value="/"' in response.get_data(as_text=True)


def test_a_bad_bind_or_a_taken_port_is_one_line(qdb: QueueDB) -> None:
    assert_one_line_error(qdb.cli("web", "--bind", "8080"), "--bind '8080': expected HOST:PORT")
    assert_one_line_error(qdb.cli("web", "--token", "short"), "--token must be at least 16 characters")
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        assert_one_line_error(qdb.cli("web", "--bind", f"127.0.0.1:{port}"), "cannot listen on 127.0.0.1:")


def test_a_rare_filter_pages_through_history_a_window_at_a_time(qdb: QueueDB, monkeypatch: Any) -> None:
    from mysqlq.store import web as web_store

    monkeypatch.setattr(web_store, "PAGE_WINDOW", 30)
    with qdb.producer() as producer:
        import mysqlq

        rare = producer.enqueue("test.record", queue="rare")
        producer.enqueue_many([mysqlq.Job("test.record", {}, queue="common") for _ in range(100)])
    web = client(qdb)
    first = web.get("/jobs?queue=rare").get_data(as_text=True)
    assert "No jobs match among the newest jobs." in first and f"/jobs/{rare}" not in first
    # Older pages go on below the window searched, until the rare job shows.
    page, seen = first, 1
    while f'href="/jobs/{rare}"' not in page:
        older = re.search(r'href="([^"]+)" rel="next"', page)
        assert older, page
        page = web.get(older.group(1).replace("&amp;", "&")).get_data(as_text=True)
        seen += 1
    assert seen == 4  # 101 jobs, 30 ids a page
    assert 'rel="next"' not in page  # the window reached the first job: nothing older


def test_the_dashboard_shows_a_queues_largest_backlogs_by_key(qdb: QueueDB) -> None:
    import mysqlq

    with qdb.producer() as producer:
        producer.enqueue_many([mysqlq.Job("test.record", queue="plain") for _ in range(3)])
        producer.enqueue("test.record", queue="fair", fairness_key="later", delay=3600)  # not ready
    web = client(qdb)
    assert "ready by key" not in web.get("/").get_data(as_text=True)  # no keyed ready job: no column
    backlog = {"a": 6, "b": 5, "c": 4, "d": 3, "e": 2, "f": 1, "<i>g</i>": 1}
    with qdb.producer() as producer:
        producer.enqueue_many([mysqlq.Job("test.record", queue="fair", fairness_key=key)
                               for key, count in backlog.items() for _ in range(count)])
        producer.enqueue_many([mysqlq.Job("test.record", queue="two", fairness_key=key) for key in ("<x>", "y")])
    page = web.get("/").get_data(as_text=True)
    assert ">ready by key</th>" in page

    def row(queue: str) -> str:
        found = re.search(rf'<tr data-queue="{queue}">(.*?)</tr>', page, re.DOTALL)
        assert found, page
        return found.group(1)

    assert '<td class="keys">a=6, b=5, c=4, d=3, e=2 (+2 more keys)</td>' in row("fair")
    assert '<td class="keys">&lt;x&gt;=1, y=1</td>' in row("two")  # a key is shown escaped
    assert '<td class="keys"></td>' in row("plain")
    assert "<i>g</i>" not in page and "<x>" not in page
