"""Jobs that wait for other jobs (``mysqlq/store/sql/dependencies.sql``): enqueueing a job after its
parents, and ending a parent in the same transaction that releases (or cancels) what waits for it.

Every function here runs in the caller's transaction: a producer's (the dependent exists only if it
commits), a worker's outcome or a transactional handler's, the reaper's, an operator's cancel.
Locks are taken parents first, in id order, then dependents in id order.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from mysqlq.core.errors import InvalidJob, MysqlqError
from mysqlq.core.jobs import FAILED, MAX_PARENTS, Parent, Status
from mysqlq.store import execute, execute_in
from mysqlq.store.db import Cursor
from mysqlq.store.jobs import NAMES, RowRenderer, insert_job_counted
from mysqlq.store.workers import NO_FENCE, Fence


def enqueue_after(cur: Cursor, row: Sequence[Any], parents: Sequence[int], run_anyway: bool,
                  renderer: RowRenderer | None = None) -> tuple[int, bool]:
    """Insert a job that runs once every one of ``parents`` is done; returns its id, and whether it
    is new.

    Parents that ended dead or cancelled (before this) cancel it at once unless ``run_anyway``; when
    every parent has ended it is inserted ready (or scheduled), else it waits. A taken dedupe key
    returns the existing job's id and changes nothing. InvalidJob names a parent that does not exist.
    A parent may be live or, ended done, in the history: a done parent is a done parent wherever it is.
    """
    ids = sorted(set(parents))
    status, ended = _lock_parents(cur, ids)
    missing = [job_id for job_id in ids if job_id not in status]
    if missing:
        raise InvalidJob(f"job {missing[0]} to wait for does not exist (never enqueued, or purged)")
    key = row[NAMES.index("dedupe_key")]
    if key is not None:  # a taken key: the job holding it stands as it is
        execute(cur, "lock_dedupe_key", {"key": key})
        held = cur.fetchone()
        if held is not None:
            return int(held[0]), False
    job_id, new = insert_job_counted(cur, row, renderer)
    if not new:  # its key is held for a period (it took the key's row lock, after its parents')
        return job_id, False
    moved = set(ended)
    live = [parent for parent in ids if parent not in moved]
    if live:
        execute_in(cur, "add_dependencies", live, before=(job_id, run_anyway))
    if ended:
        execute_in(cur, "add_ended_dependencies", ended, before=(job_id, run_anyway))
    failed = [parent for parent in ids if status[parent] in FAILED]
    if failed and not run_anyway:
        _cancel(cur, [job_id], failed[0], status[failed[0]], waiting=False)
        return job_id, True
    pending = [parent for parent in ids if status[parent] not in (Status.DONE, *FAILED)]
    if pending:
        execute_in(cur, "flag_parents", pending)
    execute(cur, "set_waiting", {"id": job_id, "pending": len(pending)})
    return job_id, True


def _lock_parents(cur: Cursor, ids: list[int]) -> tuple[dict[int, str], list[int]]:
    """Lock the parents that exist: their statuses (id → status), and which of them are in the
    history. Live ones first: a parent that ends done without dependents moves into the history in a
    transaction that locks its live row, so this either locks that row first (the parent stays live;
    one still to end is then flagged as having a dependent, which keeps it there) or waits for the
    move to commit and then finds it in the history, done."""
    execute_in(cur, "lock_parents", ids)
    status = {int(job_id): str(state) for job_id, state in cur.fetchall()}
    elsewhere = [job_id for job_id in ids if job_id not in status]
    if not elsewhere:
        return status, []
    execute_in(cur, "lock_ended_parents", elsewhere)
    ended = {int(job_id): str(state) for job_id, state in cur.fetchall()}
    return {**status, **ended}, sorted(ended)


@dataclass
class Ended:
    """What the releasing path ended (the jobs of the batch still ours) and the queues of the
    dependents it made ready."""

    ids: set[int] = field(default_factory=set)
    woken: set[str] = field(default_factory=set)


def end_parents(cur: Cursor, batch_id: int, done: Mapping[int, bytes | None], dead: Mapping[int, str],
                runs: Mapping[int, str] | None = None) -> Ended:
    """End jobs of a batch that have dependents: ``done`` (id → result JSON or None) and ``dead`` (id →
    error); then release what waits for them. ``runs``: a worker that traces, the span each ran in
    (id → trace context), kept for their dependents' spans to link to (one statement per job)."""
    ids = sorted({*done, *dead})
    if not ids:
        return Ended()
    execute_in(cur, "lock_own_parents", ids, before=(batch_id,))
    ours = {int(row[0]) for row in cur.fetchall()}
    plain = [job_id for job_id in ids if job_id in ours and job_id in done and done[job_id] is None]
    if plain:  # most: one statement for all of them
        execute_in(cur, "end_parents_done", plain, before=(batch_id,))
    for job_id in sorted(ours.difference(plain)):
        params = {"id": job_id, "batch_id": batch_id, "result": done.get(job_id), "error": dead.get(job_id),
                  "status": Status.DONE if job_id in done else Status.DEAD}
        execute(cur, "end_parent", params)
    if runs:
        for job_id in sorted(ours.intersection(runs)):
            execute(cur, "record_run", {"id": job_id, "context": runs[job_id]})
    woken = release(cur, [job_id for job_id in ids if job_id in ours and job_id in done], Status.DONE)
    for job_id in sorted(ours & set(dead)):
        woken += release(cur, [job_id], Status.DEAD)
    return Ended(ours, ready_queues(cur, woken))


def ready_queues(cur: Cursor, ids: Sequence[int]) -> set[str]:
    """The queues of those of these jobs that are ready."""
    if not ids:
        return set()
    execute_in(cur, "ready_queues_of", ids)
    return {str(row[0]) for row in cur.fetchall()}


def release(cur: Cursor, parents: Sequence[int], ended: str) -> list[int]:
    """``parents`` just ended ``ended`` (done, dead or cancelled): count them off their waiting
    dependents; those with nothing left to wait for become ready (or scheduled). After a failure,
    dependents that do not run anyway end cancelled, and in turn what waits for them. Returns the
    ids made ready or scheduled."""
    if not parents:
        return []
    execute_in(cur, "dependents_of", parents)
    counts = [(int(child), bool(anyway), int(count)) for child, anyway, count in cur.fetchall()]
    if not counts:
        return []
    execute_in(cur, "lock_waiting", [child for child, _, _ in counts])
    waiting = {int(row[0]) for row in cur.fetchall()}
    counts = [entry for entry in counts if entry[0] in waiting]
    woken: list[int] = []
    if ended in FAILED:
        doomed = [child for child, anyway, _ in counts if not anyway]
        if doomed:
            woken += _cancel(cur, doomed, parents[0], ended, waiting=True)
        counts = [entry for entry in counts if entry[1]]
    by_count: dict[int, list[int]] = {}
    for child, _, count in counts:
        by_count.setdefault(count, []).append(child)
    for count, children in sorted(by_count.items()):
        execute_in(cur, "count_down", children, before=(count,))
    if counts:
        execute_in(cur, "wake_dependents", [child for child, _, _ in counts])
        woken += [child for child, _, _ in counts]
    return woken


def _cancel(cur: Cursor, children: list[int], parent: int, ended: str, waiting: bool) -> list[int]:
    """Cancel dependents because ``parent`` ended ``ended``, then release what waits for them."""
    if not waiting:  # a job being enqueued: cancel_dependents takes waiting jobs
        execute(cur, "set_waiting", {"id": children[0], "pending": 1})
    execute_in(cur, "cancel_dependents", children, before=(f"job {parent} it waited for ended {ended}",))
    return release(cur, children, Status.CANCELLED)


def reap_parents(cur: Cursor, worker_ids: Sequence[int], expired: bool, fence: Fence = NO_FENCE) -> int:
    """The reaper's releasing path: jobs with dependents that lost their worker on their last attempt
    end dead, and their dependents are cancelled (or run anyway). Returns how many ended."""
    ids = lost_parents(cur, worker_ids, expired, fence)
    if not ids:
        return 0
    execute_in(cur, "bury_reaped", ids)
    for job_id in ids:
        release(cur, [job_id], Status.DEAD)
    return len(ids)


def lost_parents(cur: Cursor, worker_ids: Sequence[int], expired: bool, fence: Fence = NO_FENCE) -> list[int]:
    """The jobs reap_parents would end (locked, in a transaction; outside one, a plain look)."""
    execute_in(cur, "reaped_parents", worker_ids, expired, *fence.params())
    return [int(row[0]) for row in cur.fetchall()]


def release_cancelled(cur: Cursor, ids: Sequence[int]) -> None:
    """After an operator cancelled ``ids`` (each of them was live until then): cancel what waits for
    them, or release what runs anyway."""
    for job_id in sorted(ids):
        release(cur, [job_id], Status.CANCELLED)


def parents_of(cur: Cursor, job_id: int, limit: int = MAX_PARENTS, results: bool = True) -> list[Parent]:
    """The jobs ``job_id`` waits (or waited) for, in id order (purged ones are left out), at most
    ``limit``; with their results unless ``results`` is false."""
    execute(cur, "parents_of", {"id": job_id, "limit": limit, "results": results})
    return [Parent(int(pid), str(status), None if result is None else bytes(result))
            for pid, status, result in cur.fetchall()]


def parents_trace_contexts(cur: Cursor, job_id: int, limit: int) -> list[tuple[str, bool]]:
    """The trace contexts of the spans the parents of ``job_id`` ran in (True) or, when no run's is
    stored, were enqueued in (False); each once, at most ``limit``."""
    execute(cur, "parents_trace_contexts", {"id": job_id, "limit": limit})
    return [(str(context), bool(ran)) for context, ran in cur.fetchall()]


def dependents_of(cur: Cursor, job_id: int, limit: int = 1000) -> list[tuple[int, str]]:
    """The jobs that wait (or waited) for ``job_id``: (id, status), in id order, at most ``limit``."""
    execute(cur, "dependents_list", {"id": job_id, "limit": limit})
    return [(int(child), str(status)) for child, status in cur.fetchall()]


def workflow(cur: Cursor, job_id: int, limit: int = 100_000) -> list[int]:
    """Every job linked to ``job_id`` through parents and dependents, in turn (the job included), in
    id order: its workflow. At most ``limit`` jobs; MysqlqError beyond."""
    ids, whole = workflow_part(cur, job_id, limit)
    if not whole:
        raise MysqlqError(f"the workflow of job {job_id} has more than {limit} jobs: cancel its jobs by id")
    return ids


def workflow_part(cur: Cursor, job_id: int, limit: int) -> tuple[list[int], bool]:
    """The jobs of ``job_id``'s workflow, nearest first, in id order, and whether that is all of them
    (False: the walk stopped once it had found more than ``limit``; the first ``limit`` are returned)."""
    found = {job_id}
    frontier = [job_id]
    while frontier:
        step = []
        for statement in ("parents_of_many", "children_of_many"):
            for start in range(0, len(frontier), 1000):
                execute_in(cur, statement, frontier[start:start + 1000])
                step += [int(row[0]) for row in cur.fetchall()]
        frontier = sorted(set(step) - found)
        found.update(frontier)
        if len(found) > limit:
            return sorted(found)[:limit], False
    return sorted(found), True


def parents_within(cur: Cursor, ids: Sequence[int]) -> dict[int, list[int]]:
    """For each of ``ids`` that waits for jobs, their ids (a workflow's page)."""
    found: dict[int, list[int]] = {}
    for start in range(0, len(ids), 1000):
        execute_in(cur, "pairs_of_children", ids[start:start + 1000])
        for child, parent in cur.fetchall():
            found.setdefault(int(child), []).append(int(parent))
    return found


def forget(cur: Cursor, deleted: Sequence[int]) -> int:
    """Retention: forget the pairs of deleted dependents."""
    return execute_in(cur, "delete_dependencies", deleted) if deleted else 0
