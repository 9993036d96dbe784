"""Django's TaskResult from where a mysqlq job stands."""

from __future__ import annotations

import datetime as dt
from typing import Any

from mysqlq.contrib.django import compat
from mysqlq.core.jobs import JobState, Status

# mysqlq's statuses as Django's: waiting of any kind is READY (a failed job waiting for its retry
# too, with its error listed), ended without success is FAILED.
STATUSES: dict[str, str] = {
    Status.READY: "READY", Status.SCHEDULED: "READY", Status.BLOCKED: "READY", Status.WAITING: "READY",
    Status.RUNNING: "RUNNING", Status.DONE: "SUCCESSFUL", Status.DEAD: "FAILED", Status.CANCELLED: "FAILED",
}


def aware(moment: dt.datetime | None) -> dt.datetime | None:
    """A stored time (naive UTC) as an aware one."""
    return None if moment is None else moment.replace(tzinfo=dt.UTC)


def error_of(text: str) -> Any:
    """A Django TaskError from a job's last error (a summary line, a blank line, the traceback, whose
    last line names the exception by its module path, as Python prints it)."""
    traceback = text.split("\n\n", 1)[-1]
    last = traceback.rstrip().splitlines()[-1] if traceback.strip() else text
    name = last.split(":", 1)[0].strip()
    path = name if "." in name else f"builtins.{name}"
    return compat.TaskError(exception_class_path=path, traceback=traceback)


def task_result(task: Any, result_id: str, status: str, args: Any, kwargs: Any, alias: str, *,
                enqueued_at: dt.datetime | None = None, state: JobState | None = None) -> Any:
    """A TaskResult for ``task``; with ``state``, its times, attempts, errors and return value."""
    fields: dict[str, Any] = {"enqueued_at": enqueued_at, "started_at": None, "finished_at": None,
                              "last_attempted_at": None, "errors": [], "worker_ids": []}
    if state is not None:
        fields.update(enqueued_at=aware(state.enqueued_at), started_at=aware(state.started_at),
                      finished_at=aware(state.finished_at), last_attempted_at=aware(state.started_at),
                      errors=[error_of(state.error)] if state.error and status != Status.DONE else [],
                      worker_ids=[state.worker] * state.attempts if state.worker else [])
    result = compat.TaskResult(task=task, id=result_id, status=compat.TaskResultStatus[STATUSES[status]],
                               args=list(args), kwargs=dict(kwargs), backend=alias, **fields)
    if state is not None and status == Status.DONE:
        object.__setattr__(result, "_return_value", state.result)
    return result
