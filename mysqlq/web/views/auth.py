"""The token login form and logout. Without a token both only redirect; the session cookie holds a
signature, never the token."""

from __future__ import annotations

from flask import redirect, render_template, request, url_for
from werkzeug.exceptions import Forbidden
from werkzeug.wrappers import Response as BaseResponse

from mysqlq.web.access import CSRF_COOKIE, CSRF_FIELD, TOKEN_COOKIE
from mysqlq.web.guard import BAD_CSRF
from mysqlq.web.inputs import local_path
from mysqlq.web.routing import Routes
from mysqlq.web.state import current

routes = Routes()


@routes.route("/login", "GET", "POST")
def login() -> BaseResponse | tuple[str, int] | str:
    access = current().access
    target = local_path(request.values.get("next"))
    if access.token is None:
        return redirect(target)
    if request.method == "POST":
        if not access.csrf_ok(request.cookies.get(CSRF_COOKIE), request.form.get(CSRF_FIELD)):
            raise Forbidden(BAD_CSRF)
        if access.token_ok(request.form.get("token")):
            response = redirect(target, 303)
            response.set_cookie(TOKEN_COOKIE, access.session_value(), httponly=True, samesite="Strict")
            return response
        return render_template("login.html", next=target, wrong=True), 401
    return render_template("login.html", next=target, wrong=False)


@routes.post("/logout")
def logout() -> BaseResponse:
    response = redirect(url_for("login"), 303)
    response.delete_cookie(TOKEN_COOKIE)
    return response
