"""What every request passes through: the access token, read-only mode and CSRF before the view; the
CSRF cookie and the security headers after it."""

from __future__ import annotations

from flask import Flask, Response, g, redirect, request, url_for
from werkzeug.exceptions import Forbidden
from werkzeug.wrappers import Response as BaseResponse

from mysqlq.web.access import CSRF_COOKIE, CSRF_FIELD, TOKEN_COOKIE
from mysqlq.web.state import Dashboard, current

OPEN_PATHS = ("/login", "/static/")
BAD_CSRF = "the form's CSRF token is missing or wrong: reload the page and try again"
HEADERS = {
    "X-Frame-Options": "DENY",
    "Content-Security-Policy": "default-src 'self'; style-src 'self'; img-src 'self' data:; "
                               "frame-ancestors 'none'; form-action 'self'",
    "Referrer-Policy": "same-origin",
}


def register(app: Flask) -> None:
    app.before_request(check_access)
    app.after_request(set_cookie_and_headers)


def check_access() -> BaseResponse | None:
    """Sets what the templates read (g.csrf, g.read_only, g.token_mode), then lets the request through,
    answers it (401, or a redirect to the login form) or refuses it (403)."""
    state = current()
    access = state.access
    cookie = request.cookies.get(CSRF_COOKIE)
    g.csrf = cookie if access.csrf_valid(cookie) else access.new_csrf()
    g.read_only = state.web.read_only
    g.token_mode = access.token is not None
    if request.path.startswith(OPEN_PATHS):
        return None
    if not access.allowed(request.headers.get("Authorization"), request.cookies.get(TOKEN_COOKIE)):
        return _not_allowed()
    if request.method == "POST":
        _check_action(state, cookie)
    return None


def _not_allowed() -> BaseResponse:
    """A script (/metrics, or anything but a GET) gets a 401; a person gets the login form."""
    if request.path == "/metrics" or request.method != "GET":
        return Response("a valid token is needed (Authorization: Bearer TOKEN)\n", 401,
                        {"WWW-Authenticate": "Bearer", "Content-Type": "text/plain"})
    return redirect(url_for("login", next=request.full_path.rstrip("?")))


def _check_action(state: Dashboard, cookie: str | None) -> None:
    if state.web.read_only:
        raise Forbidden("this dashboard is read-only: actions are disabled")
    if not state.access.csrf_ok(cookie, request.form.get(CSRF_FIELD)):
        raise Forbidden(BAD_CSRF)


def set_cookie_and_headers(response: BaseResponse) -> BaseResponse:
    if request.cookies.get(CSRF_COOKIE) != g.get("csrf"):
        response.set_cookie(CSRF_COOKIE, g.csrf, httponly=True, samesite="Strict")
    for name, value in HEADERS.items():
        response.headers.setdefault(name, value)
    return response
