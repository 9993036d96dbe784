"""mysqlq-web.service under a real (private) systemd: installed by `install-systemd --web`, it runs
as the dynamic user, serves /metrics behind the token from web.env, and the token is on no command line."""

from __future__ import annotations

from pathlib import Path

import pytest
from mysqlq_harness.net import free_port, get
from mysqlq_harness.waiting import wait_for

from ..conftest import MYSQLQ
from ..ops_fixtures import plant
from ..web_fixtures import TOKEN, scrape
from .test_systemd_e2e import Deployment, deployment  # noqa: F401

pytestmark = pytest.mark.slow


def test_the_web_unit_serves_metrics_behind_its_token(deployment: Deployment) -> None:  # noqa: F811
    plant(deployment.qdb, "ready", 3, queue="web")
    port = free_port()
    with deployment.systemd as systemd:
        installed = systemd.run(MYSQLQ, "install-systemd", "--name", "worker", "--web")
        assert "mysqlq-web.service" in installed.stdout
        systemd.write("/etc/mysqlq/mysqlq.env", f"MYSQLQ_DSN={deployment.dsn}\n")
        systemd.write("/etc/mysqlq/web.env", f"MYSQLQ_WEB_BIND=127.0.0.1:{port}\nMYSQLQ_WEB_TOKEN={TOKEN}\n")
        systemd.systemctl("start", "mysqlq-web.service")
        url = f"http://127.0.0.1:{port}/metrics"

        def answers() -> bool:
            try:
                return get(url)[0] == 401
            except OSError:
                return False

        wait_for(answers, "mysqlq-web.service to listen", 30)
        found = scrape(url, {"Authorization": f"Bearer {TOKEN}"})
        assert found["mysqlq_jobs"][(("queue", "web"), ("status", "ready"))] == 3
        unit = deployment.unit("mysqlq-web.service")
        under_tmp = Path(MYSQLQ).resolve().is_relative_to("/tmp")
        assert (unit["ActiveState"], unit["User"]) == ("active", "" if under_tmp else "mysqlq"), unit
        cmdline = systemd.run("cat", f"/proc/{unit['MainPID']}/cmdline").stdout
        assert cmdline.split("\0")[-3:-1] == [MYSQLQ, "web"] and TOKEN not in cmdline
        systemd.systemctl("stop", "mysqlq-web.service")
        unit = deployment.unit("mysqlq-web.service")
        assert (unit["ActiveState"], unit["Result"]) == ("inactive", "success"), unit
    assert systemd.leftovers() == []
