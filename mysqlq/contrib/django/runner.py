"""Running Django tasks in a mysqlq worker: the handler of the ``django.task`` entry point (importable
without Django: `mysqlq check` imports every handler).

Django is set up once per worker process (``DJANGO_SETTINGS_MODULE`` names the settings, as for
``manage.py``). A job runs only a function declared as a task (``@task``) in a module of an
installed app: the payload names one, it never chooses other code. Database connections are
closed around each task when they are unusable or past ``CONN_MAX_AGE``, as Django's request
cycle does, so a worker that ran for weeks holds no dead connection.
"""

from __future__ import annotations

import importlib
import threading
from typing import Any

from mysqlq.core.errors import ConfigError
from mysqlq.core.jobs import Status
from mysqlq.worker.running.context import JobContext

_setup_lock = threading.Lock()


def setup() -> None:
    """django.setup() once per process (a worker's threads may ask together)."""
    import django
    from django.apps import apps

    with _setup_lock:
        if not apps.ready:
            try:
                django.setup()
            except Exception as exc:  # ImproperlyConfigured and friends: say what is missing
                raise ConfigError(f"Django could not be set up ({exc}); set DJANGO_SETTINGS_MODULE and run "
                                  "the worker where the project can be imported") from exc


def declared_task(path: str) -> Any:
    """The Task object at ``path`` (module.attribute), which must be in an installed app's module."""
    setup()
    from django.apps import apps

    from mysqlq.contrib.django import compat

    module_name, _, attribute = str(path).rpartition(".")
    apps_modules = [config.name for config in apps.get_app_configs()]
    if not module_name or not any(module_name == name or module_name.startswith(name + ".") for name in apps_modules):
        raise LookupError(f"{path!r} is not in a module of an installed Django app")
    found = getattr(importlib.import_module(module_name), attribute, None)
    if not isinstance(found, compat.Task):
        raise LookupError(f"{path!r} is not a task (declare it with @task)")
    return found


def run_task(payload: Any, ctx: JobContext) -> Any:
    """The ``django.task`` handler: run the task the payload names with its arguments; its return
    value (JSON) becomes the job's result."""
    from django.db import close_old_connections

    from mysqlq.contrib.django import compat
    from mysqlq.contrib.django.results import task_result

    task = declared_task(payload["task"])
    args, kwargs = list(payload.get("args", [])), dict(payload.get("kwargs", {}))
    close_old_connections()
    try:
        if task.takes_context:
            result = task_result(task, str(payload.get("result_id", ctx.job_id)), Status.RUNNING, args, kwargs,
                                 payload.get("backend", "default"))
            object.__setattr__(result, "worker_ids", [ctx.worker] * ctx.attempt)
            return task.call(compat.TaskContext(task_result=result), *args, **kwargs)
        return task.call(*args, **kwargs)
    finally:
        close_old_connections()
