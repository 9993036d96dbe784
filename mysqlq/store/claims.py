"""Worker statements: poll, promote, claim a batch, read it back, record outcomes (all fenced)."""

from __future__ import annotations

import contextlib
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from functools import cache
from typing import Any

import MySQLdb

from mysqlq.core.config import ClaimStrategy
from mysqlq.core.jobs import ClaimedJob, claimed_jobs
from mysqlq.store import dependencies, execute, execute_in, expand
from mysqlq.store.db import Connection, Cursor, transaction
from mysqlq.store.sql import query


@dataclass(frozen=True)
class PollResult:
    has_ready: bool
    next_due: float | None  # seconds from now until the next scheduled job is due
    paused: frozenset[str]
    leader_remaining: float | None  # seconds left on the reaper's lease (negative: lapsed)
    beacon_free: bool  # nobody holds the leader's wake-up lock
    limits_changed: str | None = None  # how many rate limits operators set, and their newest change
    discard_done: frozenset[str] = frozenset()  # the polled queues that keep no history of their done jobs


def poll(cur: Cursor, queues: Sequence[str], beacon: str) -> PollResult:
    execute_in(cur, "poll", queues, *queues, beacon, *queues)
    has_ready, next_due_us, paused, leader_us, beacon_free, limits_changed, keep_done = cur.fetchone()
    return PollResult(
        has_ready=bool(has_ready),
        next_due=None if next_due_us is None else next_due_us / 1e6,
        paused=frozenset(paused.split("\n")) if paused else frozenset(),
        leader_remaining=None if leader_us is None else leader_us / 1e6,
        beacon_free=bool(beacon_free),
        limits_changed=limits_changed,
        discard_done=discarding(queues, keep_done),
    )


INSTALLATION = ""  # the mysqlq_queues row of the installation's own settings (no queue has this name)


def keeps_done(settings: Mapping[str, bool], queue: str) -> bool:
    """Whether ``queue`` keeps its done jobs, given the settings operators made (queue name or
    :data:`INSTALLATION` to keep): its own setting, else the installation's, else kept."""
    return settings.get(queue, settings.get(INSTALLATION, True))


def discarding(queues: Sequence[str], settings: str | None) -> frozenset[str]:
    """Which of ``queues`` keep no history of their done jobs, from the poll's ``keep_done`` (lines of
    0 or 1 and a name)."""
    if not settings:
        return frozenset()
    keep = {line[1:]: line[0] == "1" for line in settings.split("\n")}
    return frozenset(queue for queue in queues if not keeps_done(keep, queue))


def newest_job_id(cur: Cursor) -> int:
    """The largest job id (0 without jobs): one read at the end of the primary key."""
    execute(cur, "newest_job_id")
    row = cur.fetchone()
    return int(row[0]) if row else 0


def claimed_lately(cur: Cursor, queues: Sequence[str], seconds: float) -> bool:
    """Did any worker claim jobs of these queues in the last ``seconds``?"""
    execute_in(cur, "claimed_lately", queues, round(seconds * 1e6))
    return cur.fetchone() is not None


def promote_due(cur: Cursor, limit: int = 1000) -> int:
    return execute(cur, "promote_due", {"limit": limit})


def _claim_params(queue: str, batch_id: int, worker_id: int, lease: float, limit: int) -> dict[str, Any]:
    return {"queue": queue, "batch_id": batch_id, "worker_id": worker_id, "lease_us": round(lease * 1e6),
            "limit": limit}


def claim_update(cur: Cursor, queue: str, batch_id: int, worker_id: int, lease: float, limit: int) -> int:
    """Claim with one UPDATE … ORDER BY … LIMIT under the batch token, for the worker of that
    registration id (a claim writes no name: see session_worker); returns how many were claimed."""
    return execute(cur, "claim_batch", _claim_params(queue, batch_id, worker_id, lease, limit))


# The statements that end jobs done, in one transaction: the jobs copied into the history, deleted
# from the live table, and those that stay live (a dedupe key kept "forever") marked done there.
# The third only where such a job may be among them (``in_place``; a job says so when claimed:
# ClaimedJob.keeps_key). A job it would have marked and did not stays running, and the caller,
# which counts what the statements ended, finds it as after any completion that ended fewer jobs
# than it named. With ``discard`` (their queue keeps no history): one delete.
MOVE_BATCH = ("move_done_batch", "delete_done_batch", "complete_batch")  # the rest of a batch
MOVE_JOBS = ("move_done_jobs", "delete_done_jobs", "complete_jobs")  # jobs of a batch, by id


def _steps(steps: tuple[str, ...], in_place: bool) -> tuple[str, ...]:
    return steps if in_place else steps[:2]


def batch_completion(discard: bool, in_place: bool = True) -> list[str]:
    """The statements of a batch's completion (see :data:`MOVE_BATCH`), with its transaction."""
    if discard:
        return [query("discard_batch")]
    return ["START TRANSACTION", *(query(name) for name in _steps(MOVE_BATCH, in_place)), "COMMIT"]


def _ended(counts: Sequence[int], discard: bool, in_place: bool) -> int:
    """The jobs a completion of :func:`batch_completion`'s shape ended, from each statement's row
    count: deleted; or copied into the history, and marked done in place."""
    if discard:
        return counts[0]
    return counts[1] + (counts[3] if in_place else 0)


@cache
def claim_query(ended: bool, discard: bool = False, in_place: bool = True) -> str:
    """The query of :func:`claim_and_fetch`: the claim and the read-back, after the completion of
    the batch that ``ended`` (its jobs deleted, with ``discard``: their queue keeps no history;
    ``in_place``: some of them may stay live, see :data:`MOVE_BATCH`)."""
    statements = [query("claim_batch"), query("fetch_batch")]
    if ended:  # the batch that ended goes first, its token under a name of its own beside the new one
        completion = [s.replace("%(batch_id)s", "%(ended_batch_id)s") for s in batch_completion(discard, in_place)]
        statements[:0] = completion
    return ";\n".join(statements)


@cache
def _claim_query_bytes(ended: bool, discard: bool, in_place: bool) -> bytes:
    return claim_query(ended, discard, in_place).encode()


def _results(conn: Connection, statements: int) -> list[int]:
    """The row counts of a query's first ``statements`` statements, each result passed over."""
    counts = []
    for _ in range(statements):
        counts.append(int(conn.affected_rows()))
        conn.next_result()
    return counts


def claim_and_fetch(
    conn: Connection, queue: str, batch_id: int, worker_id: int, lease: float, limit: int,
    ended: int | None = None, discard: bool = False, in_place: bool = True,
) -> tuple[int | None, int, list[ClaimedJob]]:
    """:func:`claim_update`, then :func:`fetch_batch` (every job of the batch, whatever queue it came
    from), sent as one query: one round trip instead of two, on a connection that takes several
    statements in one query (``connect(multi_statements=True)``: the worker's own). With ``ended``,
    the :func:`complete_batch` of that batch goes first in the same query (its jobs deleted with
    ``discard``; ``in_place`` as there). Returns what the completion changed (None without ``ended``), how many jobs the
    claim took, and the batch read back.

    The completion goes first, not last where the worker could run the new batch while the server
    completes the old one: a server stops a query at the first answer it cannot send, so a worker
    killed while the claim runs would leave a completion that comes after it undone, and a whole
    batch to run twice. A completion that fails half-way is rolled back before the error goes on
    (a lock wait timeout ends only its statement, and the transaction would stay open).

    Safe to repeat as a unit, like the statements alone: the read-back finds the batch by its token,
    and a completion repeated changes nothing the second time (the caller then asks which of its
    jobs are done, as after any completion that changed fewer rows than it named)."""
    params = _claim_params(queue, batch_id, worker_id, lease, limit)
    if ended is not None:
        params["ended_batch_id"] = ended
    literal = conn.literal
    # As a cursor sends it (each parameter escaped by the connection), without a cursor's bookkeeping.
    escaped = {name.encode(): literal(value) for name, value in params.items()}
    completed: int | None = None
    try:
        conn.query(_claim_query_bytes(ended is not None, discard, in_place) % escaped)
        if ended is not None:
            completed = _ended(_results(conn, len(batch_completion(discard, in_place))), discard, in_place)
        claimed = int(conn.affected_rows())
        conn.next_result()
        jobs = claimed_jobs(conn.store_result().fetch_row(0))
        conn.next_result()  # the query's end
    except BaseException:
        if ended is not None and not discard:
            with contextlib.suppress(MySQLdb.Error):
                conn.rollback()
        raise
    return completed, claimed, jobs


def claim_skip_locked(cur: Cursor, queue: str, batch_id: int, worker_id: int, lease: float, limit: int) -> int:
    """Claim with SELECT … FOR UPDATE SKIP LOCKED, then UPDATE by id, in one transaction."""
    with transaction(cur.connection):
        execute(cur, "lock_ready_skip_locked", {"queue": queue, "limit": limit})
        ids = [row[0] for row in cur.fetchall()]
        claimed = 0
        if ids:
            params = (batch_id, batch_id, worker_id, round(lease * 1e6))
            claimed = execute_in(cur, "claim_ids", ids, before=params)
    return claimed


CLAIMS = {ClaimStrategy.UPDATE: claim_update, ClaimStrategy.SKIP_LOCKED: claim_skip_locked}


def fetch_batch(cur: Cursor, batch_id: int) -> list[ClaimedJob]:
    execute(cur, "fetch_batch", {"batch_id": batch_id})
    return claimed_jobs(cur.fetchall())  # the statement's columns are the fields, in order


def completed_ids(cur: Cursor, batch_id: int, ids: Sequence[int]) -> set[int]:
    """Which of ``ids`` this batch completed (the others were taken over before the completion): those
    it ended done, in either table, and those in neither (deleted by a completion that keeps no history)."""
    if not ids:
        return set()
    cur.execute(query("batch_done_ids").replace("{ids}", ", ".join(["%s"] * len(ids))),
                [batch_id, *ids, batch_id, *ids])
    present = {int(job_id): bool(done) for job_id, done in cur.fetchall()}
    return {job_id for job_id in ids if present.get(job_id, True)}


def _moved(cur: Cursor, steps: Sequence[str], run: Callable[[str], int]) -> int:
    """Run the statements that end jobs done (copy into the history, delete, and mark done in place
    those that stay live, unless ``steps`` leaves that out) in the caller's transaction; returns the
    jobs ended."""
    counts = [run(step) for step in steps]
    return counts[0] + sum(counts[2:])


def complete(cur: Cursor, batch_id: int, ids: Sequence[int], discard: bool = False, in_place: bool = True,
             merged: bool = False) -> int:
    """Jobs of a batch done, in a transaction of their own: moved into the history (or deleted with
    ``discard``: their queue keeps no history; ``in_place``: see :data:`MOVE_BATCH`). ``merged``: the
    connection takes several statements in one query (the worker's own), and the transaction goes
    as one, a round trip instead of five."""
    if discard:
        return execute_in(cur, "discard_jobs", ids, before=(batch_id,))
    steps = _steps(MOVE_JOBS, in_place)
    if merged:
        conn = cur.connection
        values = tuple(conn.literal(value) for value in (batch_id, *ids))
        return _in_one_query(conn, [expand(name, len(ids)).encode() % values for name in steps], in_place)
    with transaction(cur.connection):
        return _moved(cur, steps, lambda name: execute_in(cur, name, ids, before=(batch_id,)))


def _in_one_query(conn: Connection, steps: Sequence[bytes], in_place: bool) -> int:
    """The statements that end jobs done (see :data:`MOVE_BATCH`), their parameters in place, in a
    transaction sent as one query: a round trip instead of five, and no transaction left open while
    the worker waits (a worker stopped between the statements of a transaction it sent one by one
    would hold its jobs' rows locked). Rolled back if it fails half-way (as in :func:`claim_and_fetch`)."""
    statements = [b"START TRANSACTION", *steps, b"COMMIT"]
    try:
        conn.query(b";\n".join(statements))
        return _ended(_results(conn, len(statements)), False, in_place)
    except BaseException:
        with contextlib.suppress(MySQLdb.Error):
            conn.rollback()
        raise


def complete_batch(cur: Cursor, batch_id: int, discard: bool = False, in_place: bool = True,
                   merged: bool = False) -> int:
    """The rest of a batch done, in a transaction of its own: moved into the history, or deleted
    with ``discard`` (``in_place``: see :data:`MOVE_BATCH`; ``merged``: as in :func:`complete`)."""
    if discard:
        return execute(cur, "discard_batch", {"batch_id": batch_id})
    if merged:
        conn = cur.connection
        token = {b"batch_id": conn.literal(batch_id)}
        return _in_one_query(conn, [query(name).encode() % token for name in _steps(MOVE_BATCH, in_place)], in_place)
    with transaction(cur.connection):
        return _moved(cur, _steps(MOVE_BATCH, in_place), lambda name: execute(cur, name, {"batch_id": batch_id}))


def complete_one(cur: Cursor, batch_id: int, job_id: int, result: bytes | None = None, discard: bool = False) -> int:
    """One job done, in a transaction of its own (with the JSON its handler returned, if any;
    deleted, result and all, with ``discard``); 0 if its claim was taken over (or others wait for it)."""
    if discard:
        return _end_one(cur, batch_id, job_id, result, discard)
    with transaction(cur.connection):
        return _end_one(cur, batch_id, job_id, result, discard)


def _end_one(cur: Cursor, batch_id: int, job_id: int, result: bytes | None, discard: bool) -> int:
    """:func:`complete_one` in the caller's transaction."""
    params = {"id": job_id, "batch_id": batch_id}
    if discard:
        return execute(cur, "discard_job", params)
    if result is not None and not execute(cur, "store_result", {**params, "result": result}):
        return 0
    return _moved(cur, ("move_done_job", "delete_done_job", "complete_job"), lambda name: execute(cur, name, params))


def finish_one(cur: Cursor, batch_id: int, job_id: int, result: bytes | None = None,
               ran_in: str | None = None, discard: bool = False) -> set[str] | None:
    """In the caller's transaction (a transactional handler's): the job done (deleted with ``discard``),
    its dependents released if it has any (and the span it ``ran_in`` kept for theirs, when the worker
    traces); returns the queues of the dependents made ready, or None if the claim was taken over."""
    if _end_one(cur, batch_id, job_id, result, discard):
        return set()
    ended = dependencies.end_parents(cur, batch_id, {job_id: result}, {}, {job_id: ran_in} if ran_in else None)
    return ended.woken if ended.ids else None


def end_with_dependents(cur: Cursor, batch_id: int, done: dict[int, bytes | None],
                        dead: dict[int, str], runs: dict[int, str] | None = None) -> dependencies.Ended:
    """End jobs the bulk statements left running because others wait for them, releasing those, in
    one transaction: which ended (the others were taken over), and the queues that gained ready jobs.
    ``runs``: the spans they ran in, when the worker traces (mysqlq.worker.settling.runs)."""
    with transaction(cur.connection):
        return dependencies.end_parents(cur, batch_id, done, dead, runs)


def retry(cur: Cursor, batch_id: int, job_id: int, delay: float, error: str) -> int:
    params = {"id": job_id, "batch_id": batch_id, "delay_us": round(delay * 1e6), "error": error}
    return execute(cur, "retry_job", params)


def record_progress(cur: Cursor, job_id: int, worker_id: int, fraction: float, note: str | None) -> int:
    """A job's latest progress report, from the worker that ran it, live or ended done (0 rows once
    another claimed it)."""
    params = {"id": job_id, "worker_id": worker_id, "fraction": fraction, "note": note}
    return execute(cur, "record_progress", params) or execute(cur, "record_progress_ended", params)


def snooze(cur: Cursor, batch_id: int, job_id: int, delay: float) -> int:
    """A job whose handler snoozed it waits ``delay`` seconds as a scheduled job, its attempt refunded."""
    return execute(cur, "snooze_job", {"id": job_id, "batch_id": batch_id, "delay_us": round(delay * 1e6)})


def bury(cur: Cursor, batch_id: int, job_id: int, error: str) -> int:
    return execute(cur, "bury_job", {"id": job_id, "batch_id": batch_id, "error": error})


def release(cur: Cursor, batch_id: int, ids: Sequence[int]) -> int:
    return execute_in(cur, "release_jobs", ids, before=(batch_id,))


def cancelled_in_hand(cur: Cursor, ids: Sequence[int]) -> set[int]:
    """Which of these jobs (a worker's, in hand) were cancelled meanwhile."""
    if not ids:
        return set()
    execute_in(cur, "cancelled_in_hand", ids)
    return {int(row[0]) for row in cur.fetchall()}
