"""What ``mysqlq web`` reads beyond the operations statements (``mysqlq/store/sql/web.sql``)."""

from __future__ import annotations

import datetime as dt
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from mysqlq.core.jobs import ENDED, FAILED, Status
from mysqlq.store import dependencies, execute, execute_in
from mysqlq.store import ops as ops_store
from mysqlq.store.db import Cursor

DEAD_CAP = 10_000  # dead jobs are counted exactly up to this many per queue, then shown as "10000+"


def queue_names(cur: Cursor) -> list[str]:
    """Queues that have jobs or a paused/resumed setting, sorted."""
    names = set(ops_store.all_queues(cur))
    execute(cur, "web_known_queues")
    names.update(str(row[0]) for row in cur.fetchall())
    return sorted(names)


def live_counts(cur: Cursor, queues: Sequence[str]) -> ops_store.LiveCounts:
    """Of these queues: (queue, status) → jobs, for the statuses of mysqlq.core.jobs.LIVE (absent: 0);
    ready, scheduled, blocked, waiting and running exactly, dead up to DEAD_CAP (DEAD_CAP + 1: more);
    and the ready jobs that carry a fairness key."""
    wanted = set(queues)
    live = ops_store.count_live(cur)
    counts = {key: count for key, count in live.by_status.items() if key[0] in wanted}
    for queue, count in ops_store.count_capped(cur, Status.DEAD, DEAD_CAP).items():
        if queue in wanted:
            counts[(queue, Status.DEAD)] = count
    return ops_store.LiveCounts(counts, {queue: n for queue, n in live.keyed_ready.items() if queue in wanted})


def finished_queues(cur: Cursor) -> list[str]:
    """Queues that have finished jobs (done, dead or cancelled)."""
    return sorted({name for status in ENDED for name in ops_store.queues_with(cur, status)})


def oldest_ready_ages(cur: Cursor) -> dict[str, float]:
    """Per queue with ready jobs: seconds the oldest one has waited (the figure of `mysqlq stats`)."""
    execute(cur, "oldest_ready_age")
    return {str(queue): max(0.0, age_us / 1e6) for queue, age_us in cur.fetchall() if age_us is not None}


def finished_between(cur: Cursor, after: dt.datetime, upto: dt.datetime) -> dict[tuple[str, str], int]:
    """(queue, status) → jobs that ended in (after, upto]."""
    queues = finished_queues(cur)
    if not queues:
        return {}
    execute_in(cur, "web_finished_between", queues, after, upto, *queues, after, upto)  # live table, history
    return {(str(queue), str(status)): int(count) for queue, status, count in cur.fetchall()}


def finished_per_minute(cur: Cursor, minutes: int) -> list[tuple[str, str, int, int]]:
    """(queue, status, minutes ago, jobs) for jobs that ended in the last ``minutes`` minutes."""
    queues = finished_queues(cur)
    if not queues:
        return []
    execute_in(cur, "web_finished_per_minute", queues, minutes, *queues, minutes)  # live table, history
    return [(str(q), str(s), int(ago), int(n)) for q, s, ago, n in cur.fetchall()]


# Job ids a page filtered by queue or handler looks through (its "older" link goes on from there).
PAGE_WINDOW = 20_000


def jobs_page(cur: Cursor, *, queue: str | None, status: str | None, handler: str | None, before: int | None,
              limit: int, tag: str | None = None) -> ops_store.HistoryPage:
    """A page of jobs, newest first, with ids below ``before``, and where the next page starts (0: none).
    Of a queue or handler over every status or done ones, and dead or cancelled jobs (which pile up
    like history until retention deletes them), those found in a window of recent history. With a
    tag, those found in the tag's index (with another filter, a window of it)."""
    if tag is not None:
        return ops_store.tagged(cur, tag, queue=queue, status=status, handler=handler, before=before, limit=limit,
                                window=PAGE_WINDOW)
    filters = {"queue": queue, "status": status, "handler": handler}
    if status in FAILED or (status in (None, Status.DONE) and (queue is not None or handler is not None)):
        return ops_store.in_history(cur, "list_jobs_between", filters, before=before, limit=limit,
                                    window=PAGE_WINDOW)  # the CLI's statement: a few more columns than a page shows
    statements: dict[str | None, str] = {None: "web_list_jobs", Status.DONE: "web_list_jobs",
                                         Status.RUNNING: "web_list_running_jobs"}
    name = statements.get(status, "web_list_jobs_in_state")
    execute(cur, name, {**filters, "before": before, "limit": limit + 1})
    names = [d[0] for d in cur.description or ()]
    rows = ops_store.newest([dict(zip(names, row, strict=True)) for row in cur.fetchall()], limit + 1)
    return ops_store.HistoryPage(rows[:limit], rows[limit - 1]["id"] if len(rows) > limit else 0)


def running_jobs(cur: Cursor, limit: int) -> dict[int, list[tuple[int, str, str, float | None]]]:
    """Registry id → (job id, queue, handler, progress) of the jobs each worker holds (at most ``limit``)."""
    execute(cur, "web_running_jobs", {"limit": limit})
    held: dict[int, list[tuple[int, str, str, float | None]]] = {}
    for worker_id, job_id, queue, handler, progress in cur.fetchall():
        held.setdefault(int(worker_id or 0), []).append(
            (int(job_id), str(queue), str(handler), None if progress is None else float(progress)))
    return held


@dataclass(frozen=True)
class Workflow:
    """A workflow's page: its jobs in id order (at most the limit), what each waits for among
    them, and whether that is every job of it."""

    jobs: list[dict[str, Any]]
    parents: dict[int, list[int]]
    whole: bool


def workflow(cur: Cursor, job_id: int, limit: int) -> Workflow:
    """The jobs linked to ``job_id`` through parents and dependents, in turn."""
    ids, whole = dependencies.workflow_part(cur, job_id, limit)
    jobs: list[dict[str, Any]] = []
    for start in range(0, len(ids), 1000):
        chunk = ids[start:start + 1000]
        execute_in(cur, "web_jobs_by_id", chunk, *chunk)  # the live table's, the history's
        names = [d[0] for d in cur.description or ()]
        jobs += [dict(zip(names, row, strict=True)) for row in cur.fetchall()]
    jobs.sort(key=lambda job: job["id"])
    return Workflow(jobs, dependencies.parents_within(cur, ids), whole)
