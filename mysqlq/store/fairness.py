"""Fair queues: the turns of jobs.

Within a queue and a priority, a claim takes ready jobs in the order of their turn, then their id
(mysqlq_jobs_live). A keyed job's turn is given at enqueue: its key's last turn plus the key's step
(1000 / the key's weight), or the turn the queue is serving now (its first ready job with a turn)
if that is later. So a key with 20,000 jobs waiting has turns far ahead, and a key that enqueues
one job now gets the turn being served: it starts right after the big key's next job, on whichever
worker claims next. A key that was idle starts at the queue's turn, not behind its old backlog nor
ahead of everyone's.

A job without a key is enqueued without a turn (:data:`UNTURNED`, the column's default) and its
producer sends nothing more: in a queue without keys, jobs are taken in the order of their ids. In
a queue where keyed jobs wait, they would wait behind all of those; so a worker that claimed keyed
jobs there lately gives them turns before it claims (:func:`give_keyless_turns`), as one key of
their own (the key ``''``, which may be weighted like any other), a claim's worth ahead at a time.

Turns are given in two statements per (queue, priority, key) of an enqueue, in the producer's
transaction: a plain read of where the queue stands, then the key's row of mysqlq_fair_keys, which
stays locked until that transaction ends (two producers of one key take turns one after the other;
producers of different keys share no row).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any, Protocol

from mysqlq.core.errors import InvalidJob
from mysqlq.store import execute
from mysqlq.store.db import Cursor, transaction
from mysqlq.store.sql import query

STEP = 1000  # a key's turns apart at weight 1
UNTURNED = 2**64 - 1  # the turn of a job without a key that was given none (the column's default)
KEYLESS = ""  # the key of mysqlq_fair_keys' row for a queue's jobs without a key
MIN_WEIGHT, MAX_WEIGHT = 0.01, 1000.0  # steps of 100,000 to 1
QUEUE, PRIORITY, FAIRNESS_KEY = 0, 4, 14  # in a job row (mysqlq.core.jobs.job_row)


def take_turns(cur: Cursor, queue: str, priority: int, key: str, count: int,
               serving: int | None = None) -> tuple[list[int], int]:
    """The turns of ``count`` new jobs of ``key`` in ``queue`` at ``priority``, in order (one step
    apart), and the turn the queue was serving. ``serving``: that turn, when the caller read it
    already (see :func:`with_turns`)."""
    execute(cur, "fair_position", {"queue": queue, "priority": priority, "key": key})
    row = cur.fetchone()
    if serving is None:
        serving = int(row[0]) if row and row[0] is not None else 0
    step = int(row[1]) if row and row[1] is not None else STEP
    execute(cur, "take_turns", {"queue": queue, "key": key, "serving": serving, "step": step,
                                "rest": (count - 1) * step})
    last = int(cur.lastrowid or 0)
    if not last:  # a driver that did not read LAST_INSERT_ID(expr) from the statement's reply
        execute(cur, "last_insert_id")
        found = cur.fetchone()
        last = int(found[0]) if found else 0
    first = last - (count - 1) * step
    return [first + n * step for n in range(count)], serving


def with_turns(cur: Cursor, rows: Sequence[Sequence[Any]]) -> list[tuple[Any, ...]]:
    """Keyed job rows as insert_fair_jobs takes them (the row's fields, its key, then its turn): the
    turns of each (queue, priority, key) taken in one go, keys in a fixed order (so that two producers
    that share keys lock their rows in the same order), the rows in the order given. Every key of one
    queue and priority starts from the turn the queue served when the first was read: the jobs of
    the keys before are not inserted yet, so that a later read would not see them ready."""
    groups: dict[tuple[str, int, str], list[int]] = {}
    for n, row in enumerate(rows):
        groups.setdefault((row[QUEUE], row[PRIORITY], row[FAIRNESS_KEY]), []).append(n)
    turns: dict[int, int] = {}
    serving: dict[tuple[str, int], int] = {}
    for (queue, priority, key), members in sorted(groups.items()):
        taken, serving[(queue, priority)] = take_turns(cur, queue, priority, key, len(members),
                                                       serving.get((queue, priority)))
        for n, turn in zip(members, taken, strict=True):
            turns[n] = turn
    return [(*row[:FAIRNESS_KEY], row[FAIRNESS_KEY], turns[n]) for n, row in enumerate(rows)]


class Renderer(Protocol):
    """mysqlq.store.jobs.RowRenderer, as this module uses it (that module imports this one)."""

    def statement_with(self, name: str, rows: Sequence[Sequence[Any]], literal: Callable[[Any], bytes],
                       more: Sequence[Sequence[Any]]) -> bytes: ...


def insert(cur: Cursor, rows: Sequence[Sequence[Any]], renderer: Renderer | None = None) -> int:
    """Insert keyed jobs with their turns, in the caller's transaction; returns how many were new
    (a job whose dedupe key is taken is skipped). One row: ``cur.lastrowid`` is its id, or the
    existing job's. With a ``renderer`` (a producer's own connections), the rows are rendered from
    its cached templates; without (a caller's connection), the driver binds them."""
    return insert_turned(cur, with_turns(cur, rows), renderer)


def insert_turned(cur: Cursor, fair: Sequence[Sequence[Any]], renderer: Renderer | None = None) -> int:
    """:func:`insert` of rows that have their turns already (:func:`with_turns`)."""
    if renderer is not None:
        more = [row[FAIRNESS_KEY:] for row in fair]
        return int(cur.execute(renderer.statement_with("insert_fair_jobs", fair, cur.connection.literal, more)))
    values = ", ".join([query("fair_job_values")] * len(fair))
    return int(cur.execute(query("insert_fair_jobs").replace("{rows}", values),
                           [value for row in fair for value in row]))


def give_keyless_turns(cur: Cursor, queue: str, ahead: int) -> int:
    """Give ready jobs of ``queue`` without a key turns, if a claim of ``ahead`` jobs could reach
    past the last turn they were given: the next ``2 * ahead`` of them at the first priority with
    ready jobs, in id order, a step apart, from the turn the queue is serving (or the last given, if
    later). Nothing but one read when none is needed (no job without a turn there, no job with
    one, or enough given already). Returns how many were given turns."""
    execute(cur, "keyless_position", {"queue": queue})
    row = cur.fetchone()
    if row is None:
        return 0
    priority, serving, unturned, last, step = row
    if serving is None or not unturned:
        return 0
    step = STEP if step is None else int(step)
    if last is not None and int(last) >= int(serving) + ahead * step:
        return 0
    with transaction(cur.connection):
        params = {"queue": queue, "serving": int(serving), "priority": int(priority), "step": step,
                  "limit": 2 * ahead}
        execute(cur, "keyless_take", params)
        given = execute(cur, "keyless_give", params)
        execute(cur, "keyless_given", params)
    return given


def weight_step(weight: float) -> int:
    """A weight as the step between a key's turns; InvalidJob for a weight out of range."""
    if isinstance(weight, bool) or not isinstance(weight, int | float) or not MIN_WEIGHT <= weight <= MAX_WEIGHT:
        raise InvalidJob(f"a fairness weight must be a number from {MIN_WEIGHT:g} to {MAX_WEIGHT:g}, got {weight!r}")
    return max(1, round(STEP / weight))


def set_weight(cur: Cursor, queue: str, key: str, weight: float) -> None:
    """Give ``key`` a share of ``queue`` in proportion to ``weight`` (1: as a key never weighted)."""
    execute(cur, "set_fair_weight", {"queue": queue, "key": key, "step": weight_step(weight)})


def weight_of(step: int) -> float:
    """The weight a key's step stands for, to three significant figures (a weight of 3 is stored as
    a step of 333, shown 3): 1, 2, 0.5."""
    return float(f"{STEP / max(1, step):.3g}")


# ---------------------------------------------------------------- seeing it


@dataclass(frozen=True)
class KeyBacklog:
    """A fairness key's ready jobs in a queue."""

    key: str
    ready: int


@dataclass(frozen=True)
class Backlog:
    """A queue's largest backlogs of ready jobs by key, largest first, and how many keys have ready jobs."""

    top: tuple[KeyBacklog, ...] = ()
    keys: int = 0


def backlog(cur: Cursor, queue: str, limit: int) -> Backlog:
    """The ``limit`` keys of ``queue`` with the most ready jobs, and the number of keys with any. Reads
    each keyed ready job of the queue: ask only for a queue that has some (see ops.count_live)."""
    execute(cur, "fair_backlog", {"queue": queue, "limit": limit})
    rows = cur.fetchall()
    return Backlog(tuple(KeyBacklog(str(key), int(ready)) for key, ready, _ in rows),
                   int(rows[0][2]) if rows else 0)


@dataclass(frozen=True)
class FairKey:
    """A key as ``mysqlq fairness list`` shows it: its ready jobs (0: a weighted key with none) and weight."""

    queue: str
    key: str
    ready: int
    weight: float


def listing(cur: Cursor, queue: str | None, limit: int) -> list[FairKey]:
    """The first ``limit`` of: the keys with ready jobs in ``queue`` (None: every queue), largest
    backlog first, then the keys with a weight other than 1 and no ready job, by queue and key."""
    execute(cur, "fair_keys_waiting", {"queue": queue, "limit": limit})
    found = [FairKey(str(q), str(key), int(ready), weight_of(STEP if step is None else int(step)))
             for q, key, ready, step in cur.fetchall()]
    if len(found) < limit:
        # Of the first `limit` weighted keys, at most len(found) have ready jobs: enough idle ones are among them.
        execute(cur, "weighted_fair_keys", {"queue": queue, "step": STEP, "limit": limit})
        listed = {(entry.queue, entry.key) for entry in found}
        found += [FairKey(str(q), str(key), 0, weight_of(int(step))) for q, key, step in cur.fetchall()
                  if (str(q), str(key)) not in listed]
    return found[:limit]
