"""What the dashboard's buttons do, through the same store functions as `mysqlq retry/cancel/pause`."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

from mysqlq import hint
from mysqlq.core.config import Settings
from mysqlq.core.errors import MysqlqError, NotFound
from mysqlq.core.jobs import CANCELLABLE, Status, any_of
from mysqlq.store import ops as ops_store
from mysqlq.store import schedules as schedules_store
from mysqlq.store.db import Cursor
from mysqlq.store.revive import retry_every_dead

Run = Callable[[Callable[[Cursor], Any]], Any]


class ActionRefused(MysqlqError):
    """The job's status does not allow the action (retry of a job that is not dead...)."""


def _change(run: Run, statement: str, job_id: int, allowed: tuple[str, ...], verb: str) -> ops_store.Change:
    def check(found: Mapping[int, tuple[str, str]]) -> None:
        if job_id not in found:
            raise NotFound(f"no job with id {job_id}")
        status = found[job_id][0]
        if status not in allowed:
            raise ActionRefused(f"job {job_id} is {status}: only {any_of(allowed)} jobs can be {verb}")

    change: ops_store.Change = run(lambda cur: ops_store.change_jobs(cur, statement, [job_id], allowed, check))
    return change


def retry_job(run: Run, settings: Settings, job_id: int) -> str:
    hint.notify(settings, _change(run, "retry_jobs", job_id, (Status.DEAD,), "retried").queues)
    return f"job {job_id} is ready again, with its attempts reset"




def cancel_job(run: Run, job_id: int) -> str:
    change = _change(run, "cancel_jobs", job_id, CANCELLABLE, "cancelled")
    return f"job {job_id} is cancelled" + (" (its handler is asked to stop)" if change.running else "")


def cancel_workflow(run: Run, job_id: int) -> str:
    """Every job of the workflow that has not ended (the job itself may have)."""

    def check(found: Mapping[int, tuple[str, str]]) -> None:
        if job_id not in found:
            raise NotFound(f"no job with id {job_id}")

    change: ops_store.Change = run(lambda cur: ops_store.cancel_workflow(cur, job_id, check))
    stopping = f" ({change.running} running: asked to stop)" if change.running else ""
    jobs = f"{change.changed} job{'s' if change.changed != 1 else ''}"
    return f"cancelled {jobs} of the workflow of job {job_id}{stopping}"


def retry_dead(run: Run, settings: Settings, queue: str | None) -> str:
    """Every dead job (of one queue, or of all), in batches of plain reads and fenced updates."""
    retried, queues = retry_every_dead(run, queue)
    if queues:
        hint.notify(settings, queues)
    where = f" of queue {queue}" if queue else ""
    return f"retried {retried} dead job{'s' if retried != 1 else ''}{where}"


def set_entry_paused(run: Run, name: str, paused: bool) -> str:
    """Pause or resume one schedule entry (its state must exist: a leading worker started it)."""
    was = run(lambda cur: schedules_store.set_paused(cur, name, paused))
    if was is None:
        raise NotFound(f"no schedule entry named {name!r} has started (a leading worker with its file starts it)")
    verb = "paused" if paused else "resumed"
    return f"schedule entry {name} was {verb} already" if was == paused else f"schedule entry {name} is {verb}"


def set_paused(run: Run, settings: Settings, queue: str, paused: bool) -> str:
    run(lambda cur: ops_store.set_paused(cur, queue, paused))
    if not paused:
        hint.notify(settings, [queue])
    return f"queue {queue} is {'paused' if paused else 'resumed'}"
