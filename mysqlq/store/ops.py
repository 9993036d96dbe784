"""Operator statements (``mysqlq/store/sql/ops.sql``): inspect jobs, retry, cancel, pause, throughput, retention."""

from __future__ import annotations

import datetime as dt
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from mysqlq.core.jobs import CANCELLABLE, NOT_RUNNING, STATUSES, Status, decode_tags
from mysqlq.store import dependencies, execute, execute_in
from mysqlq.store import limits as limits_store
from mysqlq.store.db import Cursor, transaction

# The smallest finished_at there is: where a walk of a (status, queue) range starts.
START = dt.datetime(1000, 1, 1)
# A filter no index orders (a handler; on the dashboard, a queue over every status) is looked for in
# the newest HISTORY_WINDOW job ids only, HISTORY_STEP ids per statement: a listing reads a bounded
# number of rows however long the history and however rare the match.
HISTORY_WINDOW = 100_000
HISTORY_STEP = 10_000
# A tag filter with another filter (queue, status, handler) reads the tag's index TAG_STEP entries
# per statement, and the jobs they name by primary key, until a page is full or it has read the
# window's entries: as bounded as the history window, however many jobs carry the tag.
TAG_STEP = 1000


@dataclass(frozen=True)
class HistoryPage:
    """Jobs found in a window of history, newest first, and the lowest id searched (0: all of it)."""

    rows: list[dict[str, Any]]
    searched_down_to: int


def in_history(cur: Cursor, statement: str, filters: dict[str, Any], *, before: int | None,
               limit: int, window: int = HISTORY_WINDOW) -> HistoryPage:
    """Up to ``limit`` jobs matching ``filters`` with ids below ``before`` (None: any), looked for in the
    ``window`` ids below it, newest first, by ``statement`` (one taking %(low)s and %(high)s)."""
    if before is None:
        execute(cur, "newest_job_id")
        row = cur.fetchone()
        before = int(row[0]) + 1 if row else 1
    high, floor = before, max(1, before - window)
    rows: list[dict[str, Any]] = []
    while high > floor and len(rows) < limit:
        low = max(floor, high - HISTORY_STEP)
        execute(cur, statement, {**filters, "low": low, "high": high, "limit": limit - len(rows)})
        found = newest(_rows(cur), limit - len(rows))
        rows += found
        high = found[-1]["id"] if len(rows) >= limit else low
    return HistoryPage(rows, 0 if high <= 1 else high)


def newest(rows: list[dict[str, Any]], limit: int | None = None) -> list[dict[str, Any]]:
    """The newest ``limit`` of these rows (None: all), newest first: how the rows a statement read from
    the live table and from the history (each its newest first) become one list."""
    rows.sort(key=lambda row: row["id"], reverse=True)
    return rows if limit is None else rows[:limit]


def _rows(cur: Cursor) -> list[dict[str, Any]]:
    """The rows as dicts by column name; a ``tags`` column as a list."""
    names = [d[0] for d in cur.description or ()]
    rows = [dict(zip(names, row, strict=True)) for row in cur.fetchall()]
    if "tags" in names:
        for row in rows:
            row["tags"] = decode_tags(row["tags"])
    return rows


def tagged(cur: Cursor, tag: str, *, queue: str | None, status: str | None, handler: str | None,
           before: int | None, limit: int, window: int = HISTORY_WINDOW) -> HistoryPage:
    """Up to ``limit`` jobs with ``tag`` (and of ``queue``, ``status``, ``handler`` when given) with ids
    below ``before`` (None: any), newest first: a walk of the tag's range of mysqlq_job_tags_tag from
    ``before`` down. Without another filter it reads a page of entries and their jobs; with one, at
    most ``window`` entries (and their jobs), however many jobs have the tag and however rare a match."""
    narrowed = queue is not None or status is not None or handler is not None
    rows: list[dict[str, Any]] = []
    high, read = before, 0
    while len(rows) < limit and read < window:
        step = min(TAG_STEP if narrowed else limit - len(rows), window - read)
        execute(cur, "tagged_job_ids", {"tag": tag, "before": high, "limit": step})
        ids = [int(row[0]) for row in cur.fetchall()]
        read += len(ids)
        if ids:
            filters = (queue, queue, status, status, handler, handler)
            execute_in(cur, "list_jobs_by_id", ids, *filters, *ids, *filters)  # the live table's, the history's
            found = newest(_rows(cur))
            wanted = limit - len(rows)
            rows += found[:wanted]
            if len(found) > wanted:  # the page ends inside this step: the next one starts after its last row
                return HistoryPage(rows, rows[-1]["id"])
        if len(ids) < step:  # the tag's range is through
            return HistoryPage(rows, 0)
        high = ids[-1]
    return HistoryPage(rows, high or 0)


def list_jobs(cur: Cursor, *, queue: str | None, status: str | None, handler: str | None,
              limit: int, tag: str | None = None) -> list[dict[str, Any]]:
    """Jobs newest first, from the live table and the history alike. With a tag: those :func:`tagged`
    finds. Of one status, on mysqlq_jobs_live (and the history's mysqlq_jobs_history_ended): running
    jobs from their own range, the others queue by queue (each queue's newest of each table, merged),
    so a status reads no more than ``limit`` rows per queue and table however long the history is;
    of one queue, every status so, merged. Of a handler, done or of any status: those among the newest
    HISTORY_WINDOW jobs."""
    if tag is not None:
        return tagged(cur, tag, queue=queue, status=status, handler=handler, before=None, limit=limit).rows
    params = {"queue": queue, "handler": handler, "limit": limit}
    if handler is not None and status in (None, Status.DONE):  # no index orders jobs by handler
        return in_history(cur, "list_jobs_between", {"queue": queue, "status": status, "handler": handler},
                          before=None, limit=limit).rows
    if status is None and queue is not None:
        # One queue, every status: each status's own range of the index, merged (a walk of the
        # primary key would read on through the whole history of other queues to fill a page).
        rows = [row for each in STATUSES
                for row in list_jobs(cur, queue=queue, status=each, handler=handler, limit=limit)]
        rows.sort(key=lambda row: row["id"], reverse=True)
        return rows[:limit]
    if status is None:
        execute(cur, "list_jobs", params)
        return newest(_rows(cur), limit)
    if status == Status.RUNNING:
        execute(cur, "list_running_jobs", params)
        return _rows(cur)
    found: list[dict[str, Any]] = []
    for name in [queue] if queue is not None else queues_with(cur, status):
        execute(cur, "list_jobs_in_state", {**params, "queue": name, "status": status})
        found += _rows(cur)
    found.sort(key=lambda row: (row["finished_at"] or START, row["id"]), reverse=True)
    return found[:limit]


def queues_with(cur: Cursor, status: str) -> list[str]:
    """Queues that have jobs of ``status`` (not running), sorted: one index dive per queue."""
    names: list[str] = []
    while True:
        execute(cur, "next_queue", {"status": status, "after": names[-1] if names else ""})
        row = cur.fetchone()
        if row is None or row[0] is None:
            return names
        names.append(str(row[0]))


def running_queues(cur: Cursor) -> list[str]:
    execute(cur, "running_queues")
    return sorted(str(row[0]) for row in cur.fetchall())


def all_queues(cur: Cursor) -> list[str]:
    """Every queue that has jobs, sorted: a few index dives per queue and the running rows."""
    names = set(running_queues(cur))
    for status in NOT_RUNNING:
        names.update(queues_with(cur, status))
    return sorted(names)


@dataclass(frozen=True)
class LiveCounts:
    """Live jobs counted exactly: (queue, status) → jobs for ready, scheduled, blocked, waiting and
    running jobs (absent: 0), and queue → its ready jobs that carry a fairness key (absent: none)."""

    by_status: dict[tuple[str, str], int]
    keyed_ready: dict[str, int]


def count_live(cur: Cursor) -> LiveCounts:
    """The live jobs of every queue by status, and its keyed ready jobs (read on the same index entries)."""
    execute(cur, "count_waiting")
    counts: dict[tuple[str, str], int] = {}
    keyed: dict[str, int] = {}
    for queue, status, count, with_key in cur.fetchall():
        counts[(str(queue), str(status))] = int(count)
        if status == Status.READY and with_key:
            keyed[str(queue)] = int(with_key)
    execute(cur, "count_running")
    counts.update({(str(queue), Status.RUNNING): int(count) for queue, count in cur.fetchall()})
    return LiveCounts(counts, keyed)


def count_capped(cur: Cursor, status: str, cap: int) -> dict[str, int]:
    """Queue → jobs of ``status`` (not running) in the live table and the history, counted exactly up
    to ``cap``; ``cap + 1`` means more than ``cap``. Reads at most cap + 1 index entries per queue
    in each table."""
    counts = {}
    for queue in queues_with(cur, status):
        execute(cur, "count_capped", {"status": status, "queue": queue, "cap": cap + 1})
        row = cur.fetchone()
        counts[queue] = min(int(row[0]), cap + 1) if row else 0
    return counts


def get_job(cur: Cursor, job_id: int) -> dict[str, Any] | None:
    """Every column of one job an operator sees (``tags`` as a list), or None."""
    execute(cur, "get_job", {"id": job_id})
    rows = _rows(cur)
    return rows[0] if rows else None


def links(cur: Cursor, job_id: int, limit: int) -> tuple[list[tuple[int, str]], list[tuple[int, str]]]:
    """A job's parents and dependents, (id, status) in id order, at most ``limit`` of each."""
    parents = [(parent.id, parent.status) for parent in dependencies.parents_of(cur, job_id, limit, results=False)]
    return parents, dependencies.dependents_of(cur, job_id, limit)


@dataclass(frozen=True)
class Change:
    """What an operator's change to named jobs did: how many changed, and the queues they are in."""

    changed: int
    queues: frozenset[str]
    running: int = 0  # of the changed jobs, how many were running (a cancel asks their handlers to stop)


# What may refuse a change, by raising, given each named job that exists: id → (status, queue).
Check = Callable[[Mapping[int, tuple[str, str]]], None]


def change_jobs(cur: Cursor, statement: str, ids: Sequence[int], allowed: Sequence[str],
                check: Check) -> Change:
    """In one short transaction: lock the named jobs, let ``check(found)`` refuse (by raising), then
    run ``statement`` over them. ``found`` maps each existing id to (status, queue)."""
    with transaction(cur.connection):
        execute_in(cur, "lock_jobs", ids, *ids)  # the live table's, then the history's
        found = {int(row[0]): (str(row[1]), str(row[2])) for row in cur.fetchall()}
        check(found)
        changed = execute_in(cur, statement, ids)
        if statement == "cancel_jobs":  # jobs with a concurrency key: slots given back, waits ended
            limits_store.settle_keys(cur, limits_store.keys_of(cur, ids))
            dependencies.release_cancelled(cur, [job_id for job_id, (status, _) in found.items()
                                                 if status in allowed])
    queues = frozenset(queue for status, queue in found.values() if status in allowed)
    running = sum(1 for status, _ in found.values() if status == Status.RUNNING and status in allowed)
    return Change(changed, queues, running)


def cancel_workflow(cur: Cursor, job_id: int, check: Check) -> Change:
    """Cancel every job of ``job_id``'s workflow (it, its parents and dependents, theirs in turn)
    that has not ended yet; ``check(found)`` may refuse first (the job itself must exist)."""
    ids = dependencies.workflow(cur, job_id)
    return change_jobs(cur, "cancel_jobs", ids, CANCELLABLE, check)


def dead_jobs(cur: Cursor, queue: str | None, limit: int) -> list[tuple[int, str]]:
    execute(cur, "dead_jobs", {"queue": queue, "limit": limit})
    return [(int(row[0]), str(row[1])) for row in cur.fetchall()]


def retry_jobs(cur: Cursor, ids: Sequence[int]) -> int:
    """Bring these jobs back to ready if they are (still) dead; returns how many were."""
    return execute_in(cur, "retry_jobs", ids) if ids else 0


def queue_paused(cur: Cursor, name: str) -> bool | None:
    """True or False, or None when the queue was never paused or resumed."""
    execute(cur, "queue_paused", {"name": name})
    row = cur.fetchone()
    return None if row is None else bool(row[0])


def queue_has_jobs(cur: Cursor, name: str) -> bool:
    execute(cur, "queue_has_jobs", {"name": name})
    row = cur.fetchone()
    return bool(row and row[0])


def set_paused(cur: Cursor, name: str, paused: bool) -> None:
    execute(cur, "set_paused", {"name": name, "paused": paused})


def set_keep_done(cur: Cursor, queue: str, keep: bool | None) -> None:
    """Whether ``queue`` keeps its done jobs (None: as the installation does); the installation's own
    setting under the name :data:`mysqlq.store.claims.INSTALLATION`."""
    execute(cur, "set_keep_done", {"name": queue, "keep": keep})


def keep_done_settings(cur: Cursor) -> dict[str, bool]:
    """Every queue told whether to keep its done jobs, and the installation (under its empty name)."""
    execute(cur, "keep_done_settings")
    return {str(name): bool(keep) for name, keep in cur.fetchall()}


def paused_queues(cur: Cursor) -> list[str]:
    execute(cur, "paused_queues")
    return [str(row[0]) for row in cur.fetchall()]


def throughput(cur: Cursor, window: float) -> dict[str, tuple[int, int]]:
    """Per queue: (done, dead) jobs that ended in the last ``window`` seconds."""
    queues = sorted(set(queues_with(cur, Status.DONE)) | set(queues_with(cur, Status.DEAD)))
    if not queues:
        return {}
    window_us = round(window * 1e6)
    execute_in(cur, "throughput", queues, window_us, *queues, window_us)  # the live table's, the history's
    return {str(row[0]): (int(row[1] or 0), int(row[2] or 0)) for row in cur.fetchall()}


def cutoff(cur: Cursor, age: float) -> dt.datetime:
    """The server's time ``age`` seconds ago."""
    execute(cur, "cutoff", {"age_us": round(age * 1e6)})
    row = cur.fetchone()
    assert row is not None and isinstance(row[0], dt.datetime)
    return row[0]


def count_expired(cur: Cursor, status: str, before: dt.datetime, queue: str | None = None) -> int:
    """How many jobs of ``status`` (of ``queue``, else of every queue) ended before ``before``, in the
    live table and the history."""
    total = 0
    for name in [queue] if queue is not None else queues_with(cur, status):
        execute(cur, "count_expired", {"status": status, "cutoff": before, "queue": name})
        row = cur.fetchone()
        total += int(row[0]) if row else 0
    return total


# The tables a retention walk reads in each queue, in this order, each with its pair of statements
# (the expired jobs, their delete): the live table first, so that a job moved into the history while
# the walk is in its queue is met there next.
TABLES = ("live", "history")
LOWEST_PRIORITY = -(2**15)  # a job's priority is a SMALLINT
EXPIRED = {"live": ("expired_jobs", "delete_jobs"), "history": ("expired_history_jobs", "delete_history_jobs")}


@dataclass
class Walk:
    """Where a retention walk of one status stands: the queue it is in (``queue``: only that one),
    the table it reads there (live, then history) and the last (finished_at, priority, turn, id) it went
    past in it (the history's walk orders by (finished_at, id), and passes priority and turn over)."""

    status: str
    before: dt.datetime
    queue: str | None = None
    current: str | None = None
    table: str = TABLES[0]
    after_finished_at: dt.datetime = START
    after_priority: int = LOWEST_PRIORITY
    after_turn: int = 0
    after_id: int = 0
    done: bool = False

    def next_queue(self, cur: Cursor) -> bool:
        """Move on to the next queue that has jobs of this status; False when there is none."""
        if self.queue is not None:
            found: str | None = self.queue if self.current is None else None
        else:
            execute(cur, "next_queue", {"status": self.status, "after": self.current or ""})
            row = cur.fetchone()
            found = None if row is None or row[0] is None else str(row[0])
        if found is None:
            self.done = True
            return False
        self.current, self.table = found, TABLES[0]
        self.restart()
        return True

    def restart(self) -> None:
        """Read the table from its first expired job."""
        self.after_finished_at, self.after_priority, self.after_turn, self.after_id = START, LOWEST_PRIORITY, 0, 0

    def next_table(self, cur: Cursor) -> bool:
        """Move on to the next table of this queue, else to the next queue; False when there is none."""
        if self.table != TABLES[-1]:
            self.table = TABLES[TABLES.index(self.table) + 1]
            self.restart()
            return True
        return self.next_queue(cur)


def delete_expired(cur: Cursor, walk: Walk, limit: int) -> int:
    """Delete the next ``limit`` expired jobs of the walk: one plain read of a (status, queue) range
    of the live table's mysqlq_jobs_live or the history's mysqlq_jobs_history_ended, then a
    DELETE by primary key in that table, in one short transaction with the jobs' dependency pairs and
    tag rows (so that a process killed between them leaves no tag row behind, which no later turn
    would find). Returns how many were deleted; sets ``walk.done`` at the end."""
    if walk.current is None and not walk.next_queue(cur):
        return 0
    while True:
        params = {"status": walk.status, "cutoff": walk.before, "queue": walk.current, "limit": limit,
                  "after_finished_at": walk.after_finished_at, "after_priority": walk.after_priority,
                  "after_turn": walk.after_turn, "after_id": walk.after_id}
        expired, delete = EXPIRED[walk.table]
        execute(cur, expired, params)
        rows = cur.fetchall()
        if len(rows) < limit:
            walk.next_table(cur)  # this table of the queue is through: on to the next (done when none is left)
        else:
            last = rows[-1]
            walk.after_id, walk.after_finished_at, walk.after_priority, walk.after_turn = (
                int(last[0]), last[1], int(last[2]), int(last[3]))
        if rows:
            ids = [int(row[0]) for row in rows]
            with transaction(cur.connection):
                deleted = execute_in(cur, delete, ids, walk.status, walk.before)
                dependencies.forget(cur, ids)
                # Those of the jobs deleted (a job retried meanwhile keeps its own).
                execute_in(cur, "delete_job_tags", ids)
            return deleted
        if walk.done:
            return 0


def claim_turn(cur: Cursor, task: str, interval: float) -> bool:
    """True when a periodic task was due and this caller now has its turn (for ``interval`` seconds)."""
    return execute(cur, "claim_maintenance", {"task": task, "interval_us": round(interval * 1e6)}) > 0


def due_again(cur: Cursor, task: str) -> None:
    execute(cur, "maintenance_due", {"task": task})
