"""The recipes of docs/recipes, started for real as an application would run them: a FastAPI app
that enqueues inside its SQLAlchemy transaction, a Flask app whose threads share one Producer, and a
plain script. Their jobs are then run in-process with mysqlq.testing.drain."""

from __future__ import annotations

import json
import subprocess
import sys
import urllib.error
import urllib.parse
import urllib.request
from concurrent.futures import ThreadPoolExecutor
from contextlib import AbstractContextManager
from pathlib import Path
from typing import Any

from mysqlq_harness import net

from mysqlq.testing import drain

from ..conftest import REPO, QueueDB

RECIPES = REPO / "docs" / "recipes"
BIN = Path(sys.executable).parent


def post(url: str, form: dict[str, Any] | None = None) -> tuple[int, dict[str, Any]]:
    data = urllib.parse.urlencode(form or {}).encode()
    try:
        with urllib.request.urlopen(urllib.request.Request(url, data=data, method="POST"), timeout=30) as response:
            return response.status, json.loads(response.read())
    except urllib.error.HTTPError as exc:
        return exc.code, json.loads(exc.read() or b"{}")


def serving(qdb: QueueDB, *command: str) -> AbstractContextManager[str]:
    """A recipe's server on a free port (``{port}`` in the command); yields its base URL; always stopped."""
    port = net.free_port()
    env = {key: value for key, value in qdb.env().items() if key != "MYSQLQ_LOG_FORMAT"}
    return net.serving([part.format(port=port) for part in command], port, qdb.tmp / "recipe-server.log", env=env,
                       cwd=RECIPES)


def test_fastapi_enqueues_inside_its_sqlalchemy_transaction(qdb: QueueDB) -> None:
    qdb.query("CREATE TABLE orders (id INT PRIMARY KEY, total INT NOT NULL)")
    with serving(qdb, str(BIN / "uvicorn"), "fastapi_app:app", "--port", "{port}") as url:
        status, body = post(f"{url}/orders/1?total=99")
        assert status == 200 and body["order"] == 1
        status, _ = post(f"{url}/orders/2?total=5&fail_after_insert=true")
        assert status == 500
    assert qdb.query("SELECT id FROM orders") == [(1,)]  # the failed request left nothing
    jobs = qdb.query("SELECT id, handler, JSON_VALUE(CAST(payload AS CHAR), '$.order') FROM mysqlq_jobs")
    assert [(job_id, handler, int(order)) for job_id, handler, order in jobs] == [(body["job"], "order.confirm", 1)]
    confirmed: list[int] = []
    assert drain(qdb.settings(), handlers={"order.confirm": lambda p, ctx: confirmed.append(p["order"])}).done == 1
    assert confirmed == [1]


def test_flask_threads_share_one_producer(qdb: QueueDB) -> None:
    addresses = [f"user{n % 12}@example.com" for n in range(48)]  # 12 people, each signing up 4 times
    server = serving(qdb, str(BIN / "waitress-serve"), "--threads", "8", "--port", "{port}", "flask_app:app")
    with server as url, ThreadPoolExecutor(16) as pool:
        answers = list(pool.map(lambda address: post(f"{url}/signup", {"email": address}), addresses))
    assert {status for status, _ in answers} == {202}
    ids: dict[str, set[int]] = {}
    for address, (_, body) in zip(addresses, answers, strict=True):
        ids.setdefault(address, set()).add(body["job"])
    assert all(len(found) == 1 for found in ids.values())  # each address: one job, whichever thread asked
    assert qdb.scalar("SELECT COUNT(*) FROM mysqlq_jobs") == 12
    sent: list[str] = []
    assert drain(qdb.settings(), handlers={"mail.welcome": lambda p, ctx: sent.append(p["to"])}).done == 12
    assert sorted(sent) == sorted(set(addresses))


def test_a_plain_script_enqueues(qdb: QueueDB) -> None:
    env = {key: value for key, value in qdb.env().items() if key != "MYSQLQ_LOG_FORMAT"}
    result = subprocess.run([sys.executable, str(RECIPES / "enqueue_script.py")], env=env, capture_output=True,
                            text=True, timeout=60, check=True)
    (report,) = [int(row[0]) for row in qdb.query("SELECT id FROM mysqlq_jobs WHERE handler = 'report.build'")]
    assert result.stdout == f"report job {report}; 3 resize jobs\n"
    assert result.stderr == ""  # a library says nothing of its own
    assert qdb.statuses() == {"ready": 4}
