"""The actions: retry or cancel a job, retry every dead job, pause or resume a queue. Each is a POST that
mysqlq.web.guard has already checked (token, CSRF, read-only); each answers with a flash message and
a redirect back."""

from __future__ import annotations

from collections.abc import Callable

from flask import flash, redirect, request, url_for
from werkzeug.wrappers import Response as BaseResponse

from mysqlq.core.errors import NotFound as JobNotFound
from mysqlq.web import actions as do
from mysqlq.web.inputs import local_path, name_filter, queue_name, schedule_name
from mysqlq.web.routing import Routes
from mysqlq.web.state import current

routes = Routes()


def act(action: Callable[[], str], back: str) -> BaseResponse:
    """Does the action, flashes what it did (or why not), and redirects to the form's next or ``back``."""
    try:
        flash(action(), "ok")
    except (JobNotFound, do.ActionRefused) as exc:
        flash(str(exc), "error")
    return redirect(local_path(request.form.get("next"), back), 303)


@routes.post("/jobs/<int:job_id>/retry")
def retry(job_id: int) -> BaseResponse:
    state = current()
    return act(lambda: do.retry_job(state.run, state.web.settings, job_id), url_for("job", job_id=job_id))


@routes.post("/jobs/<int:job_id>/cancel")
def cancel(job_id: int) -> BaseResponse:
    run = current().run
    return act(lambda: do.cancel_job(run, job_id), url_for("job", job_id=job_id))


@routes.post("/jobs/<int:job_id>/cancel-workflow")
def cancel_workflow(job_id: int) -> BaseResponse:
    run = current().run
    return act(lambda: do.cancel_workflow(run, job_id), url_for("job", job_id=job_id))


@routes.post("/retry-dead")
def retry_dead() -> BaseResponse:
    state = current()
    queue = name_filter(request.form.get("queue"), "queue")
    return act(lambda: do.retry_dead(state.run, state.web.settings, queue), url_for("dashboard"))


@routes.post("/queues/<name>/pause")
def pause(name: str) -> BaseResponse:
    return _set_paused(queue_name(name), True)


@routes.post("/queues/<name>/resume")
def resume(name: str) -> BaseResponse:
    return _set_paused(queue_name(name), False)


@routes.post("/schedules/<name>/pause")
def pause_schedule(name: str) -> BaseResponse:
    return _set_entry_paused(name, True)


@routes.post("/schedules/<name>/resume")
def resume_schedule(name: str) -> BaseResponse:
    return _set_entry_paused(name, False)


def _set_entry_paused(name: str, paused: bool) -> BaseResponse:
    entry = schedule_name(name)
    run = current().run
    return act(lambda: do.set_entry_paused(run, entry, paused), url_for("schedules_page"))


def _set_paused(queue: str, paused: bool) -> BaseResponse:
    state = current()
    return act(lambda: do.set_paused(state.run, state.web.settings, queue, paused), url_for("dashboard"))
