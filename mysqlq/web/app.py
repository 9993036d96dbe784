"""The dashboard and /metrics as one Flask application; every page is rendered on the server."""

from __future__ import annotations

import json
import secrets
import threading
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, TypeVar

import MySQLdb
import structlog
from flask import Flask, Response, flash, g, redirect, render_template, request, url_for
from werkzeug.exceptions import Forbidden, HTTPException, NotFound
from werkzeug.wrappers import Response as BaseResponse

from mysqlq.core import logs
from mysqlq.core.config import Settings
from mysqlq.core.errors import MysqlqError
from mysqlq.core.errors import NotFound as JobNotFound
from mysqlq.core.jobs import STATUSES
from mysqlq.store import ops as ops_store
from mysqlq.store import web as web_store
from mysqlq.store.db import CLI_RETRY, Cursor, Database
from mysqlq.web import actions, chart, metrics, snapshot
from mysqlq.web.access import CSRF_COOKIE, CSRF_FIELD, TOKEN_COOKIE, Access
from mysqlq.web.inputs import job_id_or_none, local_path, name_filter, queue_name

T = TypeVar("T")
log = structlog.get_logger("mysqlq.web")
PAGE_SIZE = 50
CHART_MINUTES = 60
HELD_LIMIT = 1000  # running jobs listed on the workers page
OPEN_PATHS = ("/login", "/static/")


@dataclass(frozen=True)
class WebSettings:
    """What `mysqlq web` was started with: the database settings, the token and the mode."""

    settings: Settings
    token: str | None = None
    read_only: bool = False
    page_size: int = PAGE_SIZE


class Databases:
    """One retrying connection per server thread (the WSGI server runs a few threads)."""

    def __init__(self, settings: Settings) -> None:
        self.settings = settings
        self._local = threading.local()

    def run(self, unit: Callable[[Cursor], T]) -> T:
        db: Database | None = getattr(self._local, "db", None)
        if db is None:
            db = self._local.db = Database(self.settings.dsn, retry=CLI_RETRY)
        return db.run(unit)


class DatabaseDown(HTTPException):
    code = 503
    description = "the database cannot be reached just now; the details are in the server's log"


def create_app(web: WebSettings) -> Flask:
    """The application: pages, actions (POST, CSRF-checked, refused in read-only mode) and /metrics."""
    app = Flask(__name__)
    app.config.update(SECRET_KEY=secrets.token_hex(32), SESSION_COOKIE_HTTPONLY=True,
                      SESSION_COOKIE_SAMESITE="Strict", MAX_CONTENT_LENGTH=64 * 1024)
    access = Access(web.token)
    dbs = Databases(web.settings)
    scrape = metrics.registry(dbs.run)

    def run(unit: Callable[[Cursor], T]) -> T:
        try:
            return dbs.run(unit)
        except (MySQLdb.Error, MysqlqError) as exc:
            if isinstance(exc, JobNotFound | actions.ActionRefused):
                raise
            log.error("web.database_error", error=str(exc).split("\n", 1)[0])
            raise DatabaseDown() from None

    @app.before_request
    def check_access() -> BaseResponse | None:
        cookie = request.cookies.get(CSRF_COOKIE)
        g.csrf = cookie if access.csrf_valid(cookie) else access.new_csrf()
        g.read_only = web.read_only
        g.token_mode = access.token is not None
        if request.path.startswith(OPEN_PATHS):
            return None
        if not access.allowed(request.headers.get("Authorization"), request.cookies.get(TOKEN_COOKIE)):
            if request.path == "/metrics" or request.method != "GET":
                return Response("a valid token is needed (Authorization: Bearer TOKEN)\n", 401,
                                {"WWW-Authenticate": "Bearer", "Content-Type": "text/plain"})
            return redirect(url_for("login", next=request.full_path.rstrip("?")))
        if request.method == "POST":
            if web.read_only:
                raise Forbidden("this dashboard is read-only: actions are disabled")
            if not access.csrf_ok(cookie, request.form.get(CSRF_FIELD)):
                raise Forbidden("the form's CSRF token is missing or wrong: reload the page and try again")
        return None

    @app.after_request
    def set_cookies(response: BaseResponse) -> BaseResponse:
        if request.cookies.get(CSRF_COOKIE) != g.get("csrf"):
            response.set_cookie(CSRF_COOKIE, g.csrf, httponly=True, samesite="Strict")
        response.headers.setdefault("X-Frame-Options", "DENY")
        response.headers.setdefault("Content-Security-Policy",
                                    "default-src 'self'; style-src 'self'; img-src 'self' data:; "
                                    "frame-ancestors 'none'; form-action 'self'")
        response.headers.setdefault("Referrer-Policy", "same-origin")
        return response

    @app.teardown_request
    def flush_logs(exc: BaseException | None) -> None:
        logs.flush()  # console lines are buffered (for the worker's sake): write this request's out

    @app.errorhandler(HTTPException)
    def error_page(exc: HTTPException) -> tuple[str, int]:
        return render_template("error.html", code=exc.code, message=exc.description), exc.code or 500

    # ------------------------------------------------------------------ login

    @app.route("/login", methods=["GET", "POST"])
    def login() -> BaseResponse | tuple[str, int] | str:
        target = local_path(request.values.get("next"))
        if access.token is None:
            return redirect(target)
        if request.method == "POST":
            if not access.csrf_ok(request.cookies.get(CSRF_COOKIE), request.form.get(CSRF_FIELD)):
                raise Forbidden("the form's CSRF token is missing or wrong: reload the page and try again")
            if access.token_ok(request.form.get("token")):
                response = redirect(target, 303)
                response.set_cookie(TOKEN_COOKIE, access.session_value(), httponly=True, samesite="Strict")
                return response
            return render_template("login.html", next=target, wrong=True), 401
        return render_template("login.html", next=target, wrong=False)

    @app.post("/logout")
    def logout() -> BaseResponse:
        response = redirect(url_for("login"), 303)
        response.delete_cookie(TOKEN_COOKIE)
        return response

    # ------------------------------------------------------------------ pages

    @app.get("/metrics")
    def metrics_page() -> Response:
        return Response(metrics.render(scrape), content_type="text/plain; version=0.0.4; charset=utf-8")

    @app.get("/")
    def dashboard() -> str:
        queues = run(snapshot.queues)
        rows = run(lambda cur: web_store.finished_per_minute(cur, CHART_MINUTES))
        series = chart.per_minute(rows, CHART_MINUTES)
        hour: dict[str, dict[str, int]] = {}
        for queue, status, _, count in rows:
            hour.setdefault(queue, {}).setdefault(status, 0)
            hour[queue][status] += count
        workers = run(snapshot.workers)
        return render_template("dashboard.html", queues=queues, hour=hour, workers=workers,
                               chart=chart.throughput_svg(series, CHART_MINUTES),
                               total_hour={s: sum(v) for s, v in series.items()})

    @app.get("/jobs")
    def jobs() -> str:
        queue = name_filter(request.args.get("queue"), "queue")
        status = request.args.get("status") or None
        if status is not None and status not in STATUSES:
            raise NotFound(f"there is no job status {status!r}")
        handler = name_filter(request.args.get("handler"), "handler")
        before = job_id_or_none(request.args.get("before"))
        rows = run(lambda cur: web_store.list_jobs(cur, queue=queue, status=status, handler=handler, before=before,
                                                   limit=web.page_size + 1))
        more = len(rows) > web.page_size
        rows = rows[: web.page_size]
        given = (("queue", queue), ("status", status), ("handler", handler))
        filters: dict[str, Any] = {key: value for key, value in given if value}
        older = url_for("jobs", **filters, before=rows[-1]["id"]) if more else None
        return render_template("jobs.html", rows=rows, filters=filters, statuses=STATUSES, older=older,
                               newest=url_for("jobs", **filters) if before else None,
                               queues=run(web_store.queue_names))

    @app.get("/jobs/<int:job_id>")
    def job(job_id: int) -> str:
        row = run(lambda cur: ops_store.get_job(cur, job_id))
        if row is None:
            raise NotFound(f"no job with id {job_id}")
        raw = row.pop("payload")
        text = raw.decode("utf-8", errors="replace") if isinstance(raw, bytes) else str(raw)
        try:
            payload = json.dumps(json.loads(text), indent=2, ensure_ascii=False)
        except ValueError:
            payload = text
        return render_template("job.html", job=row, payload=payload)

    @app.get("/workers")
    def workers_page() -> str:
        workers = run(snapshot.workers)
        held = run(lambda cur: web_store.running_jobs(cur, HELD_LIMIT))
        return render_template("workers.html", workers=workers, held=held)

    # ------------------------------------------------------------------ actions (POST)

    def act(action: Callable[[], str], back: str) -> BaseResponse:
        try:
            flash(action(), "ok")
        except (JobNotFound, actions.ActionRefused) as exc:
            flash(str(exc), "error")
        return redirect(local_path(request.form.get("next"), back), 303)

    @app.post("/jobs/<int:job_id>/retry")
    def retry(job_id: int) -> BaseResponse:
        return act(lambda: actions.retry_job(run, web.settings, job_id), url_for("job", job_id=job_id))

    @app.post("/jobs/<int:job_id>/cancel")
    def cancel(job_id: int) -> BaseResponse:
        return act(lambda: actions.cancel_job(run, job_id), url_for("job", job_id=job_id))

    @app.post("/retry-dead")
    def retry_dead() -> BaseResponse:
        queue = name_filter(request.form.get("queue"), "queue")
        return act(lambda: actions.retry_dead(run, web.settings, queue), url_for("dashboard"))

    @app.post("/queues/<name>/pause")
    def pause(name: str) -> BaseResponse:
        queue = queue_name(name)
        return act(lambda: actions.set_paused(run, web.settings, queue, True), url_for("dashboard"))

    @app.post("/queues/<name>/resume")
    def resume(name: str) -> BaseResponse:
        queue = queue_name(name)
        return act(lambda: actions.set_paused(run, web.settings, queue, False), url_for("dashboard"))

    app.jinja_env.globals.update(csrf_field=CSRF_FIELD, age=_age, utc=_utc)
    return app


def _age(seconds: float | None) -> str:
    """12.3 s, 4 min, 2.5 h, 3.1 d."""
    if seconds is None:
        return "-"
    if seconds < 60:
        return f"{seconds:.1f} s"
    if seconds < 3600:
        return f"{seconds / 60:.0f} min"
    if seconds < 86400:
        return f"{seconds / 3600:.1f} h"
    return f"{seconds / 86400:.1f} d"


def _utc(value: Any) -> str:
    return "-" if value is None else value.strftime("%Y-%m-%d %H:%M:%S") + " UTC"
