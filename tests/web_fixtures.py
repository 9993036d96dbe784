"""Helpers for the web and metrics tests: a real `mysqlq web` process, scraping /metrics, `stats --json`."""

from __future__ import annotations

import json
import re
from contextlib import AbstractContextManager
from typing import Any

from mysqlq_harness.net import free_port, get, serving
from prometheus_client.parser import text_string_to_metric_families

from .conftest import MYSQLQ, QueueDB

TOKEN = "s3cret-token-for-tests-0123456789"


def web_server(qdb: QueueDB, *args: str, **env: str) -> AbstractContextManager[str]:
    """`mysqlq web ARGS` on a free local port; yields its base URL and stops it afterwards."""
    port = free_port()
    return serving([MYSQLQ, "web", "--bind", f"127.0.0.1:{port}", *args], port, qdb.tmp / f"web-{port}.log",
                   env=qdb.env(**env))


def scrape(url: str, headers: dict[str, str] | None = None) -> dict[str, dict[tuple[tuple[str, str], ...], float]]:
    """Sample name → {sorted labels: value}, parsed by prometheus_client's own parser."""
    status, body = get(url, headers)
    assert status == 200, body
    found: dict[str, dict[tuple[tuple[str, str], ...], float]] = {}
    for family in text_string_to_metric_families(body):
        for sample in family.samples:
            found.setdefault(sample.name, {})[tuple(sorted(sample.labels.items()))] = sample.value
    return found


def stats_json(qdb: QueueDB) -> dict[str, dict[str, Any]]:
    """`mysqlq stats --json`, by queue."""
    result = qdb.cli("stats", "--json", check=True)
    return {entry["queue"]: entry for entry in json.loads(result.stdout)}


def csrf_of(page: str) -> str:
    """The CSRF token of a dashboard page's forms."""
    found = re.search(r'name="csrf" value="([^"]+)"', page)
    assert found, page
    return found.group(1)
