"""A module's routes, gathered by decorators and added to the app under the views' own names.

Unlike a Flask blueprint, the endpoints keep their bare names (``url_for('jobs')``, not
``url_for('pages.jobs')``), the names the templates use.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, TypeVar

from flask import Flask

View = TypeVar("View", bound=Callable[..., Any])


class Routes:
    def __init__(self) -> None:
        self._rules: list[tuple[str, Callable[..., Any], tuple[str, ...]]] = []

    def route(self, rule: str, *methods: str) -> Callable[[View], View]:
        def add(view: View) -> View:
            self._rules.append((rule, view, methods))
            return view

        return add

    def get(self, rule: str) -> Callable[[View], View]:
        return self.route(rule, "GET")

    def post(self, rule: str) -> Callable[[View], View]:
        return self.route(rule, "POST")

    def register(self, app: Flask) -> None:
        for rule, view, methods in self._rules:
            app.add_url_rule(rule, view.__name__, view, methods=list(methods))
