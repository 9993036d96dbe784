"""contrib/: the Grafana dashboard and the alert rules name only metrics the exporters really serve."""

from __future__ import annotations

import json
import re
from pathlib import Path

from prometheus_client import generate_latest
from prometheus_client.parser import text_string_to_metric_families

from mysqlq.core.jobs import ClaimedJob
from mysqlq.web import WebSettings, create_app
from mysqlq.worker.settling.outcomes import Outcome
from mysqlq.worker.settling.worker_metrics import WorkerMetrics

from ..conftest import REPO, QueueDB
from ..ops_fixtures import plant

CONTRIB = REPO / "contrib"
NAME = re.compile(r"\bmysqlq_[a-z_]+\b")


def served(text: str) -> set[str]:
    return {sample.name for family in text_string_to_metric_families(text) for sample in family.samples}


def exporter_names(qdb: QueueDB) -> set[str]:
    plant(qdb, "ready", 1)
    qdb.cli("worker", "--burst", "--name", "w1")
    qdb.worker("--name", "w2")
    qdb.wait_for(lambda: qdb.scalar("SELECT COUNT(*) FROM mysqlq_workers"), what="a worker to register")
    web = create_app(WebSettings(qdb.settings())).test_client().get("/metrics").get_data(as_text=True)
    worker = WorkerMetrics("w1", "default")
    worker.outcome(ClaimedJob(1, "default", "h", b"{}", 1, 5, None), Outcome("done", 0.01))
    with worker.waiting():
        pass
    return served(web) | served(generate_latest(worker.registry).decode())


def test_dashboard_and_alerts_use_served_metrics(qdb: QueueDB) -> None:
    names = exporter_names(qdb)
    dashboard = json.loads((CONTRIB / "grafana-dashboard.json").read_text())
    exprs = [target["expr"] for panel in dashboard["panels"] for target in panel["targets"]]
    exprs.append(dashboard["templating"]["list"][0]["query"]["query"])
    alerts = Path(CONTRIB / "alerts.yml").read_text()
    exprs += [line.split("expr:", 1)[1] for line in alerts.splitlines() if line.strip().startswith("expr:")]
    used = {name for expr in exprs for name in NAME.findall(expr)}
    assert len(exprs) >= 15 and len(used) >= 10
    assert used <= names, used - names
    for title in ("MysqlqQueueLatencyHigh", "MysqlqDeadJobsRising", "MysqlqNoWorkers"):
        assert f"alert: {title}" in alerts
