"""Helpers for the web and metrics tests: a real `mysqlq web` process, and scraping /metrics."""

from __future__ import annotations

import json
import socket
import subprocess
import time
import urllib.error
import urllib.request
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

from prometheus_client.parser import text_string_to_metric_families

from .conftest import MYSQLQ, QueueDB

TOKEN = "s3cret-token-for-tests-0123456789"


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def get(url: str, headers: dict[str, str] | None = None) -> tuple[int, str]:
    """(status, body) of a GET, without raising on 4xx/5xx."""
    request = urllib.request.Request(url, headers=headers or {})
    try:
        with urllib.request.urlopen(request, timeout=30) as response:
            return response.status, response.read().decode()
    except urllib.error.HTTPError as exc:
        return exc.code, exc.read().decode()


@contextmanager
def web_server(qdb: QueueDB, *args: str, **env: str) -> Iterator[str]:
    """`mysqlq web ARGS` on a free local port; yields its base URL and stops it afterwards."""
    port = free_port()
    log = open(qdb.tmp / f"web-{port}.log", "wb")  # noqa: SIM115
    proc = subprocess.Popen([MYSQLQ, "web", "--bind", f"127.0.0.1:{port}", *args], env=qdb.env(**env),
                            stdout=log, stderr=subprocess.STDOUT)
    log.close()
    base = f"http://127.0.0.1:{port}"
    try:
        deadline = time.monotonic() + 60
        while True:
            try:
                with socket.create_connection(("127.0.0.1", port), timeout=1):
                    break
            except OSError:
                if proc.poll() is not None or time.monotonic() > deadline:
                    output = (qdb.tmp / f"web-{port}.log").read_text()
                    raise AssertionError(f"mysqlq web did not start: {output}") from None
                time.sleep(0.05)
        yield base
    finally:
        proc.terminate()
        proc.wait(timeout=30)


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
