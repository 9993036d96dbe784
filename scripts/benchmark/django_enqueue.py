"""W4django: what enqueueing through the Django Tasks backend costs beside ``mysqlq.enqueue_on`` of the
same job (handler ``django.task``, the payload the backend writes) on the same Django connection (the
project of tests/django_project, set up in a process of its own that finds it on its PYTHONPATH, as a
deployment's processes would).

Two modes, alternating in blocks: each enqueue in autocommit (a commit each, as a view outside
``atomic()``), and many enqueues inside one ``transaction.atomic()`` (no commit in the timing: only
what the two ways add to the INSERT). The figure is the time of ``enqueue_on`` over the time of the
backend: 1.0 means no cost, 0.9 that the backend takes 11 % longer.
"""

from __future__ import annotations

import os
import pathlib
import subprocess
import sys
from typing import Any

import mysqlq
from benchmark.common import Bench, Figure, dsn_url, emit, note, timer

PROJECT = pathlib.Path(__file__).resolve().parents[2] / "tests" / "django_project"
SCRIPTS = pathlib.Path(__file__).resolve().parents[1]  # the benchmark package's folder, for the child
BLOCKS = 10


def w4_django(bench: Bench, n: int) -> list[Figure]:
    try:
        import django  # noqa: F401
    except ImportError:
        note("W4django: Django is not installed; skipped")
        return []
    dsn = bench.fresh("w4_django")
    figures = []
    for mode in ("autocommit", "atomic"):
        figure = Figure("W4django", {"mode": mode, "n": str(n)}, spread=("ratio_enqueue_on",))
        for run in range(bench.runs):
            note(f"W4django run {run + 1}: {n} enqueues through the backend vs enqueue_on, {mode}")
            backend_s, direct_s = _in_a_django_process(dsn, mode, n)
            figure.add(backend_jobs_s=n / backend_s, enqueue_on_jobs_s=n / direct_s,
                       ratio_enqueue_on=direct_s / backend_s)
        figures.append(emit(figure))
    bench.drop(dsn.database)
    return figures


def _in_a_django_process(dsn: mysqlq.Dsn, mode: str, n: int) -> tuple[float, float]:
    """The seconds ``n`` enqueues took through the backend and through ``enqueue_on``, measured by
    :func:`measure` in a child process set up as a Django project's."""
    env = {**os.environ, "SHOP_DSN": dsn_url(dsn), "DJANGO_SETTINGS_MODULE": "shop.settings",
           "PYTHONPATH": os.pathsep.join([str(PROJECT), str(SCRIPTS)])}
    done = subprocess.run([sys.executable, "-m", "benchmark.django_enqueue", mode, str(n)], env=env,
                          capture_output=True, text=True)
    if done.returncode:
        raise RuntimeError(f"W4django: the Django process failed: {done.stderr.strip()[-2000:]}")
    backend_s, direct_s = map(float, done.stdout.split())
    return backend_s, direct_s


def measure(mode: str, n: int) -> tuple[float, float]:
    """In the child: Django set up, the backend's first-use questions asked before timing, then blocks
    of ``n / BLOCKS`` enqueues each way, every other block the direct form first."""
    import django

    django.setup()
    from django.db import connection
    from shop import tasks

    connection.ensure_connection()
    raw = connection.connection
    tasks.add.enqueue(0, 0)
    backend_s = direct_s = 0.0
    step = n // BLOCKS
    for block in range(BLOCKS):
        if block % 2:
            direct_s += _directly(raw, mode, step, block)
            backend_s += _through_backend(tasks, mode, step, block)
        else:
            backend_s += _through_backend(tasks, mode, step, block)
            direct_s += _directly(raw, mode, step, block)
    return backend_s, direct_s


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


if __name__ == "__main__":
    print(*measure(sys.argv[1], int(sys.argv[2])))
