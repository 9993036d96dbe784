"""The dashboard's routes, one module per group: the token login, /metrics, the pages and the actions."""

from __future__ import annotations

from flask import Flask

from mysqlq.web.views import actions, auth, metrics, pages


def register(app: Flask) -> None:
    for group in (auth, metrics, pages, actions):
        group.routes.register(app)
