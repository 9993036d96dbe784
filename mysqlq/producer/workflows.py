"""Jobs that wait for other jobs: one job enqueued ``after`` others, a group of jobs with a callback
that runs once the last of them has finished, a chain whose steps run one after the other.

Each function enqueues on a cursor, in the caller's transaction: a workflow is enqueued whole or not
at all. What releases a waiting job is the worker's write of its last parent's outcome, in the same
transaction (mysqlq.store.dependencies), so a step is never lost and never early.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass, replace

from mysqlq.core.config import Settings
from mysqlq.core.errors import InvalidJob
from mysqlq.core.jobs import Job
from mysqlq.store import dependencies
from mysqlq.store import jobs as store
from mysqlq.store.db import Cursor


@dataclass(frozen=True)
class Group:
    """The ids of an enqueued group: its members, in the order given, and its callback."""

    members: list[int]
    callback: int


def insert(cur: Cursor, job: Job, settings: Settings, renderer: store.RowRenderer | None = None) -> int:
    """Insert one job, after its parents if it names any; returns its id (with a taken dedupe key:
    the existing job's)."""
    return insert_counted(cur, job, settings, renderer)[0]


def insert_counted(cur: Cursor, job: Job, settings: Settings,
                   renderer: store.RowRenderer | None = None) -> tuple[int, bool]:
    """Insert one job as :func:`insert` does; returns its id and whether it is new."""
    row = job.row(settings)
    parents = job.parents()
    if parents:
        return dependencies.enqueue_after(cur, row, parents, job.run_anyway, renderer)
    return store.insert_job_counted(cur, row, renderer)


def check_jobs(jobs: Iterable[Job], what: str) -> list[Job]:
    """``jobs`` as a list of Job objects; InvalidJob names the first that is not one."""
    try:
        found = list(jobs)
    except TypeError:
        raise InvalidJob(f"{what} takes mysqlq.Job objects, got {type(jobs).__name__}") from None
    for n, job in enumerate(found):
        if not isinstance(job, Job):
            raise InvalidJob(f"{what} takes mysqlq.Job objects; item {n} is {type(job).__name__}")
    return found


def insert_group(cur: Cursor, members: Sequence[Job], then: Job, settings: Settings,
                 renderer: store.RowRenderer | None = None) -> Group:
    """Insert the members, then the callback ``then`` after all of them (and after its own ``after``)."""
    if not members:
        raise InvalidJob("a group needs at least one member")
    if not isinstance(then, Job):
        raise InvalidJob(f"then= takes a mysqlq.Job, got {type(then).__name__}")
    then.parents()  # a bad callback is refused before anything is inserted
    ids = []
    for n, job in enumerate(members):
        try:
            ids.append(insert(cur, job, settings, renderer))
        except InvalidJob as exc:
            raise InvalidJob(f"member {n}: {exc}") from None
    callback = replace(then, after=[*then.parents(), *ids])
    return Group(ids, insert(cur, callback, settings, renderer))


def insert_chain(cur: Cursor, steps: Sequence[Job], settings: Settings,
                 renderer: store.RowRenderer | None = None) -> list[int]:
    """Insert the steps, each after the one before; returns their ids, in order."""
    if not steps:
        raise InvalidJob("a chain needs at least one step")
    ids: list[int] = []
    for n, job in enumerate(steps):
        step = replace(job, after=[*job.parents(), ids[-1]]) if ids else job
        try:
            ids.append(insert(cur, step, settings, renderer))
        except InvalidJob as exc:
            raise InvalidJob(f"step {n}: {exc}") from None
    return ids
