"""The pages: the queues overview, the jobs list, one job, the workers, and the schedule's entries."""

from __future__ import annotations

import json
from collections.abc import Sequence
from typing import Any

from flask import render_template, request, url_for
from werkzeug.exceptions import NotFound

from mysqlq.core.encryption import readable
from mysqlq.core.jobs import STATUSES
from mysqlq.store import ops as ops_store
from mysqlq.store import schedules as schedules_store
from mysqlq.store import web as web_store
from mysqlq.web import chart, snapshot
from mysqlq.web.inputs import job_id_or_none, name_filter, tag_filter
from mysqlq.web.routing import Routes
from mysqlq.web.state import current

CHART_MINUTES = 60
HELD_LIMIT = 1000  # running jobs listed on the workers page
SCHEDULES_LIMIT = 1000  # schedule entries listed (a schedule file holds far fewer)
LINKS_LIMIT = 50  # parents and dependents listed on a job's page
WORKFLOW_LIMIT = 1000  # jobs listed on a workflow's page

routes = Routes()


@routes.get("/")
def dashboard() -> str:
    run = current().run
    queues = run(snapshot.queues)
    rows = run(lambda cur: web_store.finished_per_minute(cur, CHART_MINUTES))
    series = chart.per_minute(rows, CHART_MINUTES)
    workers = run(snapshot.workers)
    limits = run(snapshot.rate_limits)
    return render_template("dashboard.html", queues=queues, fair=any(q.backlog.keys for q in queues),
                           hour=_hour_by_queue(rows), workers=workers, limits=limits,
                           chart=chart.throughput_svg(series, CHART_MINUTES),
                           total_hour={s: sum(v) for s, v in series.items()})


@routes.get("/schedules")
def schedules_page() -> str:
    entries = current().run(lambda cur: schedules_store.states_page(cur, SCHEDULES_LIMIT))
    return render_template("schedules.html", entries=entries, limit=SCHEDULES_LIMIT)


def _hour_by_queue(rows: Sequence[tuple[str, str, int, int]]) -> dict[str, dict[str, int]]:
    """queue → status → jobs that ended so over the chart's hour."""
    hour: dict[str, dict[str, int]] = {}
    for queue, status, _, count in rows:
        hour.setdefault(queue, {}).setdefault(status, 0)
        hour[queue][status] += count
    return hour


@routes.get("/jobs")
def jobs() -> str:
    state = current()
    page_size = state.web.page_size
    filters = _job_filters()
    before = job_id_or_none(request.args.get("before"))
    page = state.run(lambda cur: web_store.jobs_page(cur, **filters, before=before, limit=page_size))
    given: dict[str, Any] = {key: value for key, value in filters.items() if value}
    older = url_for("jobs", **given, before=page.searched_down_to) if page.searched_down_to else None
    searched = page.searched_down_to if older and len(page.rows) < page_size else None
    return render_template("jobs.html", rows=page.rows, filters=given, statuses=STATUSES, older=older,
                           searched=searched,
                           newest=url_for("jobs", **given) if before else None,
                           queues=state.run(web_store.queue_names))


def _job_filters() -> dict[str, str | None]:
    """The jobs list's filters from the query string, in the order its links give them; 404 for a bad one."""
    queue = name_filter(request.args.get("queue"), "queue")
    status = request.args.get("status") or None
    if status is not None and status not in STATUSES:
        raise NotFound(f"there is no job status {status!r}")
    handler = name_filter(request.args.get("handler"), "handler")
    return {"queue": queue, "status": status, "handler": handler, "tag": tag_filter(request.args.get("tag"))}


@routes.get("/jobs/<int:job_id>")
def job(job_id: int) -> str:
    row = current().run(lambda cur: ops_store.get_job(cur, job_id))
    if row is None:
        raise NotFound(f"no job with id {job_id}")
    row = readable(row, current().web.settings.keys)  # decrypted with the keys given, else "(encrypted with key k1)"
    result = row.pop("result")
    parents, dependents = current().run(lambda cur: ops_store.links(cur, job_id, LINKS_LIMIT))
    return render_template("job.html", job=row, payload=_pretty(row.pop("payload")),
                           result=None if result is None else _pretty(result), parents=parents,
                           dependents=dependents, links_limit=LINKS_LIMIT)


@routes.get("/jobs/<int:job_id>/workflow")
def workflow(job_id: int) -> str:
    run = current().run
    if run(lambda cur: ops_store.get_job(cur, job_id)) is None:
        raise NotFound(f"no job with id {job_id}")
    found = run(lambda cur: web_store.workflow(cur, job_id, WORKFLOW_LIMIT))
    counts: dict[str, int] = {}
    for row in found.jobs:
        counts[row["status"]] = counts.get(row["status"], 0) + 1
    return render_template("workflow.html", job_id=job_id, flow=found, counts=counts, limit=WORKFLOW_LIMIT)


def _pretty(raw: object) -> str:
    """A payload indented when it is JSON, else as stored (invalid UTF-8 replaced)."""
    text = raw.decode("utf-8", errors="replace") if isinstance(raw, bytes) else str(raw)
    try:
        return json.dumps(json.loads(text), indent=2, ensure_ascii=False)
    except ValueError:
        return text


@routes.get("/workers")
def workers_page() -> str:
    run = current().run
    workers = run(snapshot.workers)
    held = run(lambda cur: web_store.running_jobs(cur, HELD_LIMIT))
    return render_template("workers.html", workers=workers, held=held)
