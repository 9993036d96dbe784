"""``mysqlq web``: Prometheus metrics and a server-rendered dashboard over the store."""

from __future__ import annotations

from mysqlq.web.app import create_app
from mysqlq.web.state import WebSettings

__all__ = ["WebSettings", "create_app"]
