"""The dashboard and /metrics as one Flask application, every page rendered on the server. This module
only wires the parts: the routes are in mysqlq.web.views, the checks every request passes in
mysqlq.web.guard, and what the views share in mysqlq.web.state."""

from __future__ import annotations

import secrets

from flask import Flask, render_template
from werkzeug.exceptions import HTTPException

from mysqlq.core import logs
from mysqlq.core.jobs import CANCELLABLE
from mysqlq.web import formats, guard, views
from mysqlq.web.access import CSRF_FIELD
from mysqlq.web.state import EXTENSION, Dashboard, WebSettings

__all__ = ["WebSettings", "create_app"]


def create_app(web: WebSettings) -> Flask:
    """The application: pages, actions (POST, CSRF-checked, refused in read-only mode) and /metrics."""
    app = Flask(__name__)
    app.config.update(SECRET_KEY=secrets.token_hex(32), SESSION_COOKIE_HTTPONLY=True,
                      SESSION_COOKIE_SAMESITE="Strict", MAX_CONTENT_LENGTH=64 * 1024)
    app.extensions[EXTENSION] = Dashboard.start(web)
    guard.register(app)
    app.teardown_request(flush_logs)
    app.register_error_handler(HTTPException, error_page)
    views.register(app)
    app.jinja_env.globals.update(csrf_field=CSRF_FIELD, age=formats.age, utc=formats.utc, cancellable=CANCELLABLE)
    app.jinja_env.filters["error_line"] = formats.error_line
    return app


def flush_logs(exc: BaseException | None) -> None:
    logs.flush()  # console lines are buffered (for the worker's sake): write this request's out


def error_page(exc: HTTPException) -> tuple[str, int]:
    return render_template("error.html", code=exc.code, message=exc.description), exc.code or 500
