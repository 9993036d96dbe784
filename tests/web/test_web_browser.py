"""The dashboard in a real browser (Debian's chromium driven by Playwright): find a dead job, open
it, retry it; pause and resume a queue; the token, read-only and CSRF guards refuse what they must.

With MYSQLQ_SCREENSHOT_DIR set, the first test saves the dashboard as dashboard.png there (the
README's picture).
"""

from __future__ import annotations

import os
import pathlib
import shutil
import tempfile
from collections.abc import Iterator
from typing import Any

import pytest

from ..conftest import QueueDB, unavailable
from ..ops_fixtures import plant, status_of
from ..web_fixtures import TOKEN, web_server

CHROMIUM = "/usr/bin/chromium"
FLAGS = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
         "--disable-background-networking", "--disable-component-update", "--disable-sync"]
TRACEBACK = 'Traceback (most recent call last):\n  File "mail.py", line 3, in send\nValueError: mailbox full'


@pytest.fixture(scope="module")
def playwright() -> Iterator[Any]:
    if not os.access(CHROMIUM, os.X_OK):
        unavailable(f"{CHROMIUM} is missing (apt-get install chromium; `make test` installs it)")
    try:
        from playwright.sync_api import sync_playwright
    except ImportError:
        unavailable("playwright is not installed (pip install -e '.[dev]')")
    with sync_playwright() as driver:
        yield driver


@pytest.fixture
def browser(playwright: Any) -> Iterator[Any]:
    """A fresh Chromium profile (no cookies) for one test."""
    profile = tempfile.mkdtemp(prefix="mysqlq-chromium-")
    context = playwright.chromium.launch_persistent_context(
        profile, executable_path=CHROMIUM, headless=True, args=FLAGS, viewport={"width": 1100, "height": 760})
    try:
        yield context
    finally:
        context.close()
        shutil.rmtree(profile, ignore_errors=True)


def paused(qdb: QueueDB, queue: str) -> bool:
    return bool(qdb.scalar("SELECT paused FROM mysqlq_queues WHERE name = %s", (queue,)))


def busy_queues(qdb: QueueDB) -> list[int]:
    """Queues with live work, a little history over the last hour and a worker holding a job."""
    dead = plant(qdb, "dead", 3, queue="emails", handler="mail.send", attempts=5, error=TRACEBACK)
    plant(qdb, "ready", 12, queue="emails", handler="mail.send")
    plant(qdb, "scheduled", 2, queue="reports", handler="report.build")
    for minutes_ago in range(0, 60, 2):
        plant(qdb, "done", 4 + minutes_ago % 7, queue="emails", handler="mail.send", ended_ago=minutes_ago * 60 + 5)
    plant(qdb, "dead", 1, queue="emails", handler="mail.send", ended_ago=1500, error="ValueError: old")
    with qdb.producer() as producer:
        producer.enqueue("test.sleep", {"seconds": 60}, queue="images")
    qdb.worker("--queue", "images", "--name", "images-1")
    qdb.wait_for(lambda: qdb.scalar("SELECT COUNT(*) FROM mysqlq_jobs WHERE status = 'running'") == 1,
                 what="the images worker to hold its job")
    return dead


def test_find_a_dead_job_open_it_and_retry_it(qdb: QueueDB, browser: Any) -> None:
    dead = busy_queues(qdb)
    qdb.cli("pause", "reports", check=True)
    page = browser.new_page()
    with web_server(qdb) as base:
        page.goto(base + "/")
        row = page.locator("tr[data-queue=emails]")
        assert row.locator("td").nth(7).inner_text() == "4"  # dead (after ready, scheduled, blocked, waiting, running)
        assert page.locator("svg.chart rect").count() > 0
        assert "images-1" in page.locator("main").inner_text()
        shots = os.environ.get("MYSQLQ_SCREENSHOT_DIR")
        if shots:
            page.screenshot(path=str(pathlib.Path(shots) / "dashboard.png"), full_page=True)

        page.goto(base + "/jobs")
        page.select_option("select[name=status]", "dead")
        page.select_option("select[name=queue]", "emails")
        page.click("text=Filter")
        rows = page.locator("table.jobs tbody tr")
        assert rows.count() == 4
        assert {rows.nth(i).locator("td").nth(3).inner_text() for i in range(4)} == {"dead"}

        page.click(f"table.jobs a[href='/jobs/{dead[0]}']")
        assert page.locator("#status").inner_text() == "dead"
        assert "ValueError: mailbox full" in page.locator("pre.traceback").inner_text()
        assert page.locator("pre.payload").inner_text() == "{}"
        page.click("button:has-text('Retry')")
        assert "is ready again" in page.locator(".flash.ok").inner_text()
        assert page.locator("#status").inner_text() == "ready"
    assert status_of(qdb, dead[0]) == "ready"
    assert status_of(qdb, dead[1]) == "dead"


def test_pause_and_resume_a_queue(qdb: QueueDB, browser: Any) -> None:
    plant(qdb, "ready", 2, queue="emails")
    page = browser.new_page()
    with web_server(qdb) as base:
        page.goto(base + "/")
        row = page.locator("tr[data-queue=emails]")
        row.locator("button:has-text('Pause')").click()
        assert page.locator("tr[data-queue=emails] .state").inner_text() == "paused"
        assert paused(qdb, "emails")
        page.locator("tr[data-queue=emails] button:has-text('Resume')").click()
        assert page.locator("tr[data-queue=emails] .state").inner_text() == "active"
        assert not paused(qdb, "emails")


def test_retry_every_dead_job_cancel_one_and_page_through_jobs(qdb: QueueDB, browser: Any) -> None:
    dead = plant(qdb, "dead", 3, queue="emails", error="boom")
    ready = plant(qdb, "ready", 60, queue="emails")
    page = browser.new_page()
    with web_server(qdb) as base:
        page.goto(base + "/")
        page.locator("tr[data-queue=emails] button:has-text('Retry all dead')").click()
        assert "retried 3 dead jobs of queue emails" in page.locator(".flash.ok").inner_text()
        assert page.locator("tr[data-queue=emails] td").nth(7).inner_text() == "0"  # dead

        page.goto(f"{base}/jobs/{ready[0]}")
        page.click("button:has-text('Cancel')")
        assert page.locator("#status").inner_text() == "cancelled"
        assert page.locator("button:has-text('Cancel')").count() == 0

        page.goto(base + "/jobs?queue=emails")
        assert page.locator("table.jobs tbody tr").count() == 50
        page.click("a[rel=next]")
        assert page.locator("table.jobs tbody tr").count() == 13  # 63 jobs, 50 a page
        assert page.locator("a[rel=next]").count() == 0
    assert [status_of(qdb, job_id) for job_id in dead] == ["ready"] * 3
    assert status_of(qdb, ready[0]) == "cancelled"


def test_read_only_hides_and_refuses_every_action(qdb: QueueDB, browser: Any) -> None:
    dead = plant(qdb, "dead", 1, queue="emails", error="boom")
    page = browser.new_page()
    with web_server(qdb, "--read-only") as base:
        page.goto(base + "/")
        assert "read-only" in page.locator("header").inner_text()
        assert page.locator("main button").count() == 0
        page.goto(f"{base}/jobs/{dead[0]}")
        assert page.locator("main button").count() == 0
        csrf = next(c["value"] for c in browser.cookies() if c["name"] == "mysqlq_csrf")
        for path in (f"/jobs/{dead[0]}/retry", "/queues/emails/pause", "/retry-dead"):
            response = page.request.post(base + path, form={"csrf": csrf}, max_redirects=0)
            assert response.status == 403, path
            assert "read-only" in response.text()
    assert status_of(qdb, dead[0]) == "dead" and not paused(qdb, "emails")


def test_a_post_without_the_csrf_token_is_refused(qdb: QueueDB, browser: Any) -> None:
    dead = plant(qdb, "dead", 1, queue="emails", error="boom")
    page = browser.new_page()
    with web_server(qdb) as base:
        page.goto(base + "/")  # the browser now holds a CSRF cookie; a forged form lacks the field
        for form in ({}, {"csrf": "forged.0000"}):
            response = page.request.post(f"{base}/jobs/{dead[0]}/retry", form=form, max_redirects=0)
            assert response.status == 403
            assert "CSRF" in response.text()
        response = page.request.post(base + "/queues/emails/pause", form={}, max_redirects=0)
        assert response.status == 403
    assert status_of(qdb, dead[0]) == "dead" and not paused(qdb, "emails")


def test_with_a_token_every_page_needs_it(qdb: QueueDB, browser: Any) -> None:
    plant(qdb, "ready", 1, queue="emails")
    page = browser.new_page()
    with web_server(qdb, MYSQLQ_WEB_TOKEN=TOKEN) as base:
        page.goto(base + "/jobs?queue=emails")
        assert page.url.startswith(base + "/login")
        assert page.request.get(base + "/metrics").status == 401
        assert page.request.get(base + "/workers", max_redirects=0).status == 302
        page.fill("input[name=token]", "not-the-token-0123456789")
        page.click("button:has-text('Log in')")
        assert "not valid" in page.locator(".flash.error").inner_text()
        page.fill("input[name=token]", TOKEN)
        page.click("button:has-text('Log in')")
        assert page.url == base + "/jobs?queue=emails"
        page.wait_for_load_state("load")  # the click waits for the navigation to begin, not for the page
        assert page.locator("table.jobs tbody tr").count() == 1
        assert page.request.get(base + "/metrics").status == 200  # the session cookie
        assert all(TOKEN not in cookie["value"] for cookie in browser.cookies())
        page.click("button:has-text('log out')")
        assert page.request.get(base + "/metrics").status == 401
        page.goto(base + "/")
        assert page.url.startswith(base + "/login")
