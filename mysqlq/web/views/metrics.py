"""/metrics: the queues in the Prometheus text format (the collector is in mysqlq.web.metrics)."""

from __future__ import annotations

from flask import Response

from mysqlq.web.metrics import render
from mysqlq.web.routing import Routes
from mysqlq.web.state import current

routes = Routes()


@routes.get("/metrics")
def metrics_page() -> Response:
    return Response(render(current().scrape), content_type="text/plain; version=0.0.4; charset=utf-8")
