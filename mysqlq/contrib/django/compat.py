"""The Django tasks API, from Django itself (6.0 and later: ``django.tasks``) or from the
``django-tasks`` backport (Django 4.2–5.2: ``django_tasks``); the same names either way."""

from __future__ import annotations

from typing import Any

try:
    from django.tasks.backends.base import BaseTaskBackend
    from django.tasks.base import Task, TaskContext, TaskError, TaskResult, TaskResultStatus
    from django.tasks.exceptions import InvalidTask, TaskResultDoesNotExist

    SOURCE = "django.tasks"
except ImportError:  # Django before 6.0: the backport
    from django_tasks.backends.base import BaseTaskBackend
    from django_tasks.base import (
        Task,
        TaskContext,
        TaskError,
        TaskResult,
        TaskResultStatus,
    )
    from django_tasks.exceptions import InvalidTaskError as InvalidTask
    from django_tasks.exceptions import TaskResultDoesNotExist

    SOURCE = "django_tasks"


def task_backends() -> Any:
    """Django's handler of the configured task backends (``TASKS``)."""
    if SOURCE == "django.tasks":
        from django.tasks import task_backends as backends
    else:
        from django_tasks import task_backends as backends
    return backends


__all__ = ["SOURCE", "BaseTaskBackend", "InvalidTask", "Task", "TaskContext", "TaskError", "TaskResult",
           "TaskResultDoesNotExist", "TaskResultStatus", "task_backends"]
