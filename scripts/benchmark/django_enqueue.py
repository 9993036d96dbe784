"""W4django: what enqueueing through the Django Tasks backend costs beside ``mysqlq.enqueue_on`` of the
same job (handler ``django.task``, the payload the backend writes) on the same Django connection (the
project of tests/django_project, set up in this process).

Two modes, alternating in blocks: each enqueue in autocommit (a commit each, as a view outside
``atomic()``), and many enqueues inside one ``transaction.atomic()`` (no commit in the timing: only
what the two ways add to the INSERT). The figure is the time of ``enqueue_on`` over the time of the
backend: 1.0 means no cost, 0.9 that the backend takes 11 % longer.
"""

from __future__ import annotations

import os
import pathlib
import sys
from typing import Any

import mysqlq
from benchmark.common import Bench, Figure, dsn_url, emit, note, timer

PROJECT = pathlib.Path(__file__).resolve().parents[2] / "tests" / "django_project"
BLOCKS = 10


def setup(dsn: mysqlq.Dsn) -> Any:
    """Django set up on ``dsn``'s database (once per process); returns the project's tasks module."""
    os.environ["SHOP_DSN"] = dsn_url(dsn)
    os.environ["DJANGO_SETTINGS_MODULE"] = "shop.settings"
    sys.path.insert(0, str(PROJECT))
    import django

    django.setup()
    from shop import tasks

    return tasks


def w4_django(bench: Bench, n: int) -> list[Figure]:
    try:
        import django  # noqa: F401
    except ImportError:
        note("W4django: Django is not installed; skipped")
        return []
    dsn = bench.fresh("w4_django")
    tasks = setup(dsn)
    from django.db import connection

    figures = []
    for mode in ("autocommit", "atomic"):
        figure = Figure("W4django", {"mode": mode, "n": str(n)}, spread=("ratio_enqueue_on",))
        for run in range(bench.runs):
            note(f"W4django run {run + 1}: {n} enqueues through the backend vs enqueue_on, {mode}")
            connection.ensure_connection()
            raw = connection.connection
            tasks.add.enqueue(0, 0)  # the backend's first-use questions, before timing
            backend_s = direct_s = 0.0
            step = n // BLOCKS
            for block in range(BLOCKS):
                if block % 2:  # every other block the direct form goes first
                    direct_s += _directly(raw, mode, step, block)
                    backend_s += _through_backend(tasks, mode, step, block)
                else:
                    backend_s += _through_backend(tasks, mode, step, block)
                    direct_s += _directly(raw, mode, step, block)
            figure.add(backend_jobs_s=n / backend_s, enqueue_on_jobs_s=n / direct_s,
                       ratio_enqueue_on=direct_s / backend_s)
        figures.append(emit(figure))
    bench.drop(dsn.database)
    return figures


def _through_backend(tasks: Any, mode: str, step: int, block: int) -> float:
    from django.db import transaction

    with timer() as t:
        if mode == "atomic":
            with transaction.atomic():
                for i in range(step):
                    tasks.add.enqueue(i, block)
        else:
            for i in range(step):
                tasks.add.enqueue(i, block)
    return t[0]


def _directly(raw: Any, mode: str, step: int, block: int) -> float:
    from django.db import transaction

    from mysqlq.producer.outbox import enqueue_on

    with timer() as t:
        if mode == "atomic":
            with transaction.atomic():
                for i in range(step):
                    enqueue_on(raw, mysqlq.Job("django.task", _payload(i, block)))
        else:
            for i in range(step):
                enqueue_on(raw, mysqlq.Job("django.task", _payload(i, block)))
    return t[0]


def _payload(a: int, b: int) -> dict[str, Any]:
    """What the backend writes for ``tasks.add.enqueue(a, b)``."""
    return {"task": "shop.tasks.add", "args": [a, b], "kwargs": {}, "backend": "default"}
