"""The drain loops of the candidate designs ``scripts/bench --only designs`` compares (see designs.py).

Each of K processes claims a batch, reads it back and completes it, until a claim comes back empty,
on a database that designs.py shaped for the design (mysqlq's wide ``mysqlq_jobs`` altered, plus the
design's own tables). Every loop keeps, in its statements, what mysqlq guarantees of a claim: the
batch is fenced (a completion changes only rows still claimed by that batch), it has a lease the
reaper can find (``mysqlq_batches.lease_until``), and the history stays (the done row keeps its
batch, attempts, start and end times; the batch row keeps the worker and the claim time)::

    python scripts/benchmark/design_loop.py --design fewer --conn '{"unix_socket": …, "database": …}' --batch 100

prints one JSON line, ``{"jobs": n, "first": t, "last": t, "deadlocks": d}``, as bare.py does. A
transaction that hits a deadlock or a lock wait timeout is rolled back and run again (the only retry).
Only mysqlclient is imported, never mysqlq.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
from collections.abc import Callable, Sequence
from functools import partial
from typing import Any

import MySQLdb

QUEUE = "default"
LEASE_US = 60_000_000
RETRIED = (1213, 1205)  # deadlock (rolled back by the server), lock wait timeout
JOB_COLUMNS = "id, queue, handler, payload, attempts, max_attempts, time_limit, concurrency_key, snoozes"

# The batch's own row: who claimed it, when, until when (the reaper looks for lease_until < NOW(6));
# IGNORE: an autocommit claim retried after a deadlock has written it already.
BATCH_ROW = ("INSERT IGNORE INTO mysqlq_batches (batch_id, worker_id, worker, claimed_at, lease_until{ids})"
             " VALUES (%s, %s, %s, NOW(6), NOW(6) + INTERVAL {lease} MICROSECOND{id_param})")
BATCH_ENDED = "UPDATE mysqlq_batches SET lease_until = NULL WHERE batch_id = %s AND lease_until IS NOT NULL"
BATCH_EMPTY = "DELETE FROM mysqlq_batches WHERE batch_id = %s"


def batch_row(with_ids: bool) -> str:
    return BATCH_ROW.format(ids=", job_ids" if with_ids else "", lease=LEASE_US, id_param=", %s" if with_ids else "")


def in_list(ids: Sequence[int]) -> str:
    return ", ".join(["%s"] * len(ids))


# ---------------------------------------------------------------------------- (b) fewer columns


def fewer_claim(cur: Any, batch_id: int, limit: int, who: tuple[int, str]) -> list[Any]:
    """Today's claim (UPDATE … LIMIT through mysqlq_jobs_ready, then the read-back through
    mysqlq_jobs_state), setting only status, ready_queue, running_batch and attempts on each job;
    worker, worker_id, lease and claim time once in the batch's row."""
    cur.execute(batch_row(False), (batch_id, *who))
    claimed = cur.execute(
        "UPDATE mysqlq_jobs FORCE INDEX (mysqlq_jobs_ready)"
        "   SET status = 'running', ready_queue = NULL, running_batch = %s, attempts = attempts + 1"
        " WHERE ready_queue = %s ORDER BY ready_queue DESC, priority, id LIMIT %s", (batch_id, QUEUE, limit))
    if not claimed:
        cur.execute(BATCH_EMPTY, (batch_id,))
        return []
    cur.execute(f"SELECT {JOB_COLUMNS} FROM mysqlq_jobs FORCE INDEX (mysqlq_jobs_state)"
                " WHERE running_batch = %s ORDER BY priority, id", (batch_id,))
    return list(cur.fetchall())


def fewer_complete(cur: Any, batch_id: int, rows: Sequence[Any], started: float) -> None:
    """status, running_batch, batch_id (kept for the history: the batch's row names the worker),
    started_at and finished_at; the batch's lease ended."""
    cur.execute("UPDATE mysqlq_jobs FORCE INDEX (mysqlq_jobs_state)"
                "   SET status = 'done', running_batch = NULL, batch_id = %s, started_at = FROM_UNIXTIME(%s),"
                "       finished_at = NOW(6), dedupe_key = IF(dedupe_scope = 'active', NULL, dedupe_key)"
                " WHERE running_batch = %s AND dependents IS NULL", (batch_id, started, batch_id))
    cur.execute(BATCH_ENDED, (batch_id,))


# ---------------------------------------------------------------------------- (b') fewer, and in place


def inplace_claim(cur: Any, batch_id: int, limit: int, who: tuple[int, str]) -> list[Any]:
    """As ``fewer``, on a table whose changed columns are all of fixed size and NOT NULL (0 and the
    epoch for "none"), so that InnoDB rewrites the clustered record in place: the ready index is
    keyed on (status, queue, priority, id), and the claim sets only status, running_batch, attempts."""
    cur.execute(batch_row(False), (batch_id, *who))
    claimed = cur.execute(
        "UPDATE mysqlq_jobs FORCE INDEX (mysqlq_jobs_ready)"
        "   SET status = 'running', running_batch = %s, attempts = attempts + 1"
        " WHERE status = 'ready' AND queue = %s ORDER BY status, queue, priority, id LIMIT %s",
        (batch_id, QUEUE, limit))
    if not claimed:
        cur.execute(BATCH_EMPTY, (batch_id,))
        return []
    cur.execute(f"SELECT {JOB_COLUMNS} FROM mysqlq_jobs FORCE INDEX (mysqlq_jobs_state)"
                " WHERE running_batch = %s ORDER BY priority, id", (batch_id,))
    return list(cur.fetchall())


def inplace_complete(cur: Any, batch_id: int, rows: Sequence[Any], started: float) -> None:
    cur.execute("UPDATE mysqlq_jobs FORCE INDEX (mysqlq_jobs_state)"
                "   SET status = 'done', running_batch = 0, batch_id = %s, started_at = FROM_UNIXTIME(%s),"
                "       finished_at = NOW(6), dedupe_key = IF(dedupe_scope = 'active', NULL, dedupe_key)"
                " WHERE running_batch = %s AND dependents IS NULL", (batch_id, started, batch_id))
    cur.execute(BATCH_ENDED, (batch_id,))


# ---------------------------------------------------------------------------- (d) claim by primary key


def pk_claim(cur: Any, batch_id: int, limit: int, who: tuple[int, str]) -> list[Any]:
    """SELECT … FOR UPDATE SKIP LOCKED through mysqlq_jobs_ready reads the jobs themselves (no
    read-back), UPDATE … WHERE id IN claims them by primary key: no index holds the batch. The batch's
    row keeps its jobs' ids, for the reaper."""
    cur.execute(f"SELECT {JOB_COLUMNS} FROM mysqlq_jobs FORCE INDEX (mysqlq_jobs_ready)"
                " WHERE ready_queue = %s ORDER BY ready_queue DESC, priority, id LIMIT %s FOR UPDATE SKIP LOCKED",
                (QUEUE, limit))
    rows = list(cur.fetchall())
    if not rows:
        return []
    ids = [row[0] for row in rows]
    cur.execute("UPDATE mysqlq_jobs SET status = 'running', ready_queue = NULL, batch_id = %s,"
                f" attempts = attempts + 1 WHERE id IN ({in_list(ids)})", (batch_id, *ids))
    cur.execute(batch_row(True), (batch_id, *who, ",".join(map(str, ids))))
    return rows


def pk_complete(cur: Any, batch_id: int, rows: Sequence[Any], started: float) -> None:
    """By primary key, fenced by the batch: only rows this batch still holds change."""
    ids = [row[0] for row in rows]
    cur.execute("UPDATE mysqlq_jobs SET status = 'done', started_at = FROM_UNIXTIME(%s), finished_at = NOW(6),"
                "       dedupe_key = IF(dedupe_scope = 'active', NULL, dedupe_key)"
                f" WHERE id IN ({in_list(ids)}) AND batch_id = %s AND status = 'running' AND dependents IS NULL",
                (started, *ids, batch_id))
    cur.execute(BATCH_ENDED, (batch_id,))


# ---------------------------------------------------------------------------- (c) a narrow ready table


def _take_ready(cur: Any, limit: int) -> list[tuple[int, int]]:
    """Lock and delete up to ``limit`` rows of the narrow ready table; their (priority, job id)."""
    cur.execute("SELECT priority, job_id FROM mysqlq_ready WHERE queue = %s ORDER BY priority, job_id LIMIT %s"
                " FOR UPDATE SKIP LOCKED", (QUEUE, limit))
    taken = [(int(p), int(j)) for p, j in cur.fetchall()]
    by_priority: dict[int, list[int]] = {}
    for priority, job in taken:
        by_priority.setdefault(priority, []).append(job)
    for priority, ids in by_priority.items():  # by its primary key (queue, priority, job_id)
        cur.execute(f"DELETE FROM mysqlq_ready WHERE queue = %s AND priority = %s AND job_id IN ({in_list(ids)})",
                    (QUEUE, priority, *ids))
    return taken


def _read_jobs(cur: Any, ids: Sequence[int]) -> list[Any]:
    cur.execute(f"SELECT {JOB_COLUMNS} FROM mysqlq_jobs WHERE id IN ({in_list(ids)}) ORDER BY priority, id", ids)
    return list(cur.fetchall())


def narrow_claim(cur: Any, batch_id: int, limit: int, who: tuple[int, str]) -> list[Any]:
    """solid_queue's ready_executions / claimed_executions: move narrow rows from mysqlq_ready to
    mysqlq_claimed (batch_id, job_id); the wide row is not written until the job ends."""
    taken = _take_ready(cur, limit)
    if not taken:
        return []
    ids = [job for _, job in taken]
    cur.execute("INSERT INTO mysqlq_claimed (batch_id, job_id) VALUES " + ", ".join(["(%s, %s)"] * len(ids)),
                [v for job in ids for v in (batch_id, job)])
    cur.execute(batch_row(False), (batch_id, *who))
    return _read_jobs(cur, ids)


class Fenced(Exception):
    """The batch no longer holds its jobs (the reaper took them back): the completion is undone."""


def narrow_complete(cur: Any, batch_id: int, rows: Sequence[Any], started: float) -> None:
    """Fenced by the claimed rows: delete the batch's, and only if all are still there write the
    history into the wide rows (their only write in the job's life after the enqueue)."""
    ids = [row[0] for row in rows]
    if cur.execute("DELETE FROM mysqlq_claimed WHERE batch_id = %s", (batch_id,)) != len(ids):
        raise Fenced(batch_id)
    _write_history(cur, batch_id, ids, started)
    cur.execute(BATCH_ENDED, (batch_id,))


def _write_history(cur: Any, batch_id: int, ids: Sequence[int], started: float) -> None:
    cur.execute("UPDATE mysqlq_jobs SET status = 'done', attempts = attempts + 1, batch_id = %s,"
                "       started_at = FROM_UNIXTIME(%s), finished_at = NOW(6),"
                "       dedupe_key = IF(dedupe_scope = 'active', NULL, dedupe_key)"
                f" WHERE id IN ({in_list(ids)}) AND dependents IS NULL", (batch_id, started, *ids))


def batchrow_claim(cur: Any, batch_id: int, limit: int, who: tuple[int, str]) -> list[Any]:
    """The narrow ready table without a claimed row per job: the batch's row keeps its jobs' ids."""
    taken = _take_ready(cur, limit)
    if not taken:
        return []
    ids = [job for _, job in taken]
    cur.execute(batch_row(True), (batch_id, *who, ",".join(map(str, ids))))
    return _read_jobs(cur, ids)


def batchrow_complete(cur: Any, batch_id: int, rows: Sequence[Any], started: float) -> None:
    """Fenced by the batch's row: its lease ends only if the reaper has not ended it first."""
    if cur.execute(BATCH_ENDED, (batch_id,)) != 1:
        raise Fenced(batch_id)
    _write_history(cur, batch_id, [row[0] for row in rows], started)


def status_claim(cur: Any, batch_id: int, limit: int, who: tuple[int, str]) -> list[Any]:
    """``batchrow`` that also marks the wide rows running (status, batch_id, attempts: fixed-size
    columns, so in place), by primary key: a running job says so in its own row again."""
    taken = _take_ready(cur, limit)
    if not taken:
        return []
    ids = [job for _, job in taken]
    cur.execute("UPDATE mysqlq_jobs SET status = 'running', batch_id = %s, attempts = attempts + 1"
                f" WHERE id IN ({in_list(ids)})", (batch_id, *ids))
    cur.execute(batch_row(True), (batch_id, *who, ",".join(map(str, ids))))
    return _read_jobs(cur, ids)


def status_complete(cur: Any, batch_id: int, rows: Sequence[Any], started: float) -> None:
    """Fenced by the batch's row, as ``batchrow``; the wide rows by primary key and batch."""
    if cur.execute(BATCH_ENDED, (batch_id,)) != 1:
        raise Fenced(batch_id)
    ids = [row[0] for row in rows]
    cur.execute("UPDATE mysqlq_jobs SET status = 'done', started_at = FROM_UNIXTIME(%s), finished_at = NOW(6),"
                "       dedupe_key = IF(dedupe_scope = 'active', NULL, dedupe_key)"
                f" WHERE id IN ({in_list(ids)}) AND batch_id = %s AND dependents IS NULL", (started, *ids, batch_id))


# ---------------------------------------------------------------------------- (e) a narrow ready table, flagged

# The claim is one autocommit UPDATE … LIMIT, as today's, on the narrow rows: it sets their batch_id
# (0: ready) where today's sets the wide rows' running_batch. The read-back and the completion find
# the batch's rows by (batch_id, queue), which designs.py makes the narrow table's primary key (``flag``:
# no secondary index, so the claim moves one record and the completion deletes one) or a secondary
# index beside a primary key on job_id (``flag-id``: the claim rewrites the record in place and moves
# that index's entry; the completion deletes both). The statements are the same for both layouts but
# for the claim's index, which it names, and whose equality columns its ORDER BY names too, in the
# index's order, as today's claim does: else MariaDB sorts every ready row for a claim that changes
# the key it walks ("Using filesort"; with them, "Using buffer": the LIMIT's rows only).
FLAG_CLAIM_OF = ("UPDATE mysqlq_ready FORCE INDEX ({index}) SET batch_id = %(batch_id)s"
                 " WHERE batch_id = 0 AND queue = %(queue)s ORDER BY {equal}, priority, job_id LIMIT %(limit)s")
FLAG_CLAIM = FLAG_CLAIM_OF.format(index="PRIMARY", equal="batch_id, queue")
FLAG_ID_CLAIM = FLAG_CLAIM_OF.format(index="mysqlq_ready_claim", equal="queue, batch_id")
FLAG_READ = ("SELECT " + ", ".join(f"j.{c.strip()}" for c in JOB_COLUMNS.split(","))
             + " FROM mysqlq_ready r STRAIGHT_JOIN mysqlq_jobs j ON j.id = r.job_id"
               " WHERE r.batch_id = %(batch_id)s AND r.queue = %(queue)s ORDER BY r.priority, r.job_id")
# The completion, one transaction: the batch's lease ended first (the reaper ends it, in a transaction
# of its own, before it puts the batch's narrow rows back to batch_id 0: whichever comes second finds
# it ended), then the wide rows of the narrow rows the batch still holds written once (the join is a
# fence of its own: a row the reaper took back is not in the batch), then those narrow rows deleted.
FLAG_ENDED = BATCH_ENDED.replace("%s", "%(batch_id)s")
FLAG_HISTORY = ("UPDATE mysqlq_ready r STRAIGHT_JOIN mysqlq_jobs j ON j.id = r.job_id"
                "   SET j.status = 'done', j.attempts = j.attempts + 1, j.batch_id = r.batch_id,"
                "       j.started_at = FROM_UNIXTIME(%(started)s), j.finished_at = NOW(6),"
                "       j.dedupe_key = IF(j.dedupe_scope = 'active', NULL, j.dedupe_key)"
                " WHERE r.batch_id = %(batch_id)s AND r.queue = %(queue)s AND j.dependents IS NULL")
FLAG_DELETE = "DELETE FROM mysqlq_ready WHERE batch_id = %(batch_id)s AND queue = %(queue)s"
FLAG_BATCH_ROW = (BATCH_ROW.format(ids="", lease=LEASE_US, id_param="")
                  .replace("VALUES (%s, %s, %s,", "VALUES (%(batch_id)s, %(worker_id)s, %(worker)s,"))


def flag_claim(cur: Any, batch_id: int, limit: int, who: tuple[int, str], claim: str = FLAG_CLAIM) -> list[Any]:
    """The batch's row, then the claim (one autocommit UPDATE … LIMIT of the narrow rows), then the
    read-back (the narrow rows of the batch joined to the wide ones), each autocommit, as today's."""
    return flag_claim_on(cur, batch_id, limit, who, claim, FLAG_READ)


def flag_claim_on(cur: Any, batch_id: int, limit: int, who: tuple[int, str], claim: str, read: str) -> list[Any]:
    params = {"batch_id": batch_id, "worker_id": who[0], "worker": who[1], "queue": QUEUE, "limit": limit}
    cur.execute(FLAG_BATCH_ROW, params)
    if not cur.execute(claim, params):
        cur.execute(BATCH_EMPTY, (batch_id,))
        return []
    cur.execute(read, params)
    return list(cur.fetchall())


def flag_id_claim(cur: Any, batch_id: int, limit: int, who: tuple[int, str]) -> list[Any]:
    return flag_claim(cur, batch_id, limit, who, FLAG_ID_CLAIM)


def flag_complete(cur: Any, batch_id: int, rows: Sequence[Any], started: float) -> None:
    """Fenced by the batch's row (its lease ends only if the reaper has not ended it first), in one
    transaction with the history written and the narrow rows deleted."""
    params = {"batch_id": batch_id, "queue": QUEUE, "started": started}
    if cur.execute(FLAG_ENDED, params) != 1:
        raise Fenced(batch_id)
    cur.execute(FLAG_HISTORY, params)
    cur.execute(FLAG_DELETE, params)


# ``flag-ids``: the completion by the ids the read-back gave (the wide rows by primary key, no join),
# fenced in the query itself: the lease's end is noted in a session variable, and the history and the
# delete change nothing unless it changed the batch's row.
FLAG_IDS_HELD = "SET @mysqlq_held = ROW_COUNT()"
FLAG_IDS_HISTORY = ("UPDATE mysqlq_jobs SET status = 'done', attempts = attempts + 1, batch_id = %(batch_id)s,"
                    "       started_at = FROM_UNIXTIME(%(started)s), finished_at = NOW(6),"
                    "       dedupe_key = IF(dedupe_scope = 'active', NULL, dedupe_key)"
                    " WHERE id IN ({ids}) AND @mysqlq_held = 1 AND dependents IS NULL")
FLAG_IDS_DELETE = FLAG_DELETE + " AND @mysqlq_held = 1"


def flag_query(ended: Sequence[Any] | None, by_ids: bool = False) -> tuple[str, int]:
    """``flag``'s statements as the worker would send them, one query per batch: the ended batch's
    completion (its transaction; ``ended``: its rows) first, then the batch's row, the claim and the
    read-back; and how many statements the query holds (the read-back is the last)."""
    statements = [FLAG_BATCH_ROW, FLAG_CLAIM, FLAG_READ]
    if ended:
        if by_ids:
            ids = ", ".join(str(int(row[0])) for row in ended)
            completion = [FLAG_ENDED, FLAG_IDS_HELD, FLAG_IDS_HISTORY.replace("{ids}", ids), FLAG_IDS_DELETE]
        else:
            completion = [FLAG_ENDED, FLAG_HISTORY, FLAG_DELETE]
        completion = [s.replace("%(batch_id)s", "%(ended_batch_id)s") for s in completion]
        statements = ["START TRANSACTION", *completion, "COMMIT", *statements]
    return ";\n".join(statements), len(statements)


def flag_merged_drain(db: Any, batch: int, who: tuple[int, str], base: int, by_ids: bool = False) -> dict[str, Any]:
    """``flag`` in one round trip per batch. The completion's fence cannot be read between statements
    here: the join to the narrow rows the batch still holds is the fence (the lease's end changes no row
    once the reaper has ended it); ``by_ids``: the lease's end, through a session variable. The query
    is safe to send again after a deadlock or a lock wait timeout: a completion already committed
    finds nothing of its batch, the batch's row is INSERT IGNORE, the claim and the read-back are those
    of a batch not yet read."""
    global deadlocks
    jobs, first, last = 0, None, None
    ended: int | None = None
    ended_rows: list[Any] = []
    ended_at = 0.0
    with db.cursor() as cur:
        for sequence in range(1, 1 << 31):
            batch_id = base + sequence
            claimed_at = time.time()
            query, count = flag_query(ended_rows, by_ids)
            params = {"batch_id": batch_id, "worker_id": who[0], "worker": who[1], "queue": QUEUE, "limit": batch,
                      "ended_batch_id": ended, "started": ended_at}
            while True:
                try:
                    cur.execute(query, params)
                    for _ in range(count - 1):
                        cur.nextset()
                    rows = list(cur.fetchall())
                    break
                except MySQLdb.OperationalError as exc:
                    db.rollback()  # a lock wait timeout leaves the completion's transaction open
                    if exc.args[0] not in RETRIED:
                        raise
                    deadlocks += 1
            if ended is not None:
                last = time.time()  # the batch before completed
            if not rows:
                cur.execute(BATCH_EMPTY, (batch_id,))
                break
            if first is None:
                first = claimed_at
            # (the handlers would run here: no-ops)
            jobs += len(rows)
            # completed by the next query, the last one included
            ended, ended_rows, ended_at = batch_id, rows, claimed_at
    return {"jobs": jobs, "first": first, "last": last, "deadlocks": deadlocks}


# ---------------------------------------------------------------------------- (f) live rows apart from the history

# The claim and the read-back are ``flag``'s on mysqlq_live (the live jobs, mysqlq_jobs' columns, keyed
# only by id and by the claim's index); the completion moves the batch's rows into mysqlq_jobs.
SPLIT_CLAIM = ("UPDATE mysqlq_live FORCE INDEX (mysqlq_live_claim) SET batch_id = %(batch_id)s"
               " WHERE queue = %(queue)s AND batch_id = 0 ORDER BY queue, batch_id, priority, id LIMIT %(limit)s")
SPLIT_READ = (f"SELECT {JOB_COLUMNS} FROM mysqlq_live FORCE INDEX (mysqlq_live_claim)"
              " WHERE queue = %(queue)s AND batch_id = %(batch_id)s ORDER BY priority, id")
SPLIT_DELETE = "DELETE FROM mysqlq_live WHERE queue = %(queue)s AND batch_id = %(batch_id)s"
# what the history row gets instead of the live row's value
SPLIT_DONE = {"status": "'done'", "attempts": "attempts + 1", "started_at": "FROM_UNIXTIME(%(started)s)",
              "finished_at": "NOW(6)", "ready_queue": "NULL", "running_batch": "NULL", "scheduled_at": "NULL",
              "dedupe_key": "IF(dedupe_scope = 'active', NULL, dedupe_key)"}
split_move: list[str] = []  # the completion's INSERT … SELECT, made from the table's columns once


def split_claim(cur: Any, batch_id: int, limit: int, who: tuple[int, str]) -> list[Any]:
    return flag_claim_on(cur, batch_id, limit, who, SPLIT_CLAIM, SPLIT_READ)


def split_complete(cur: Any, batch_id: int, rows: Sequence[Any], started: float) -> None:
    """Fenced by the batch's row; the batch's live rows copied into the history as done, then deleted."""
    if not split_move:
        cur.execute("SELECT COLUMN_NAME FROM information_schema.COLUMNS WHERE TABLE_SCHEMA = DATABASE()"
                    " AND TABLE_NAME = 'mysqlq_live' ORDER BY ORDINAL_POSITION")
        columns = [str(row[0]) for row in cur.fetchall()]
        split_move.append(f"INSERT INTO mysqlq_jobs ({', '.join(columns)})"
                          f" SELECT {', '.join(SPLIT_DONE.get(c, c) for c in columns)}"
                          " FROM mysqlq_live FORCE INDEX (mysqlq_live_claim)"
                          " WHERE queue = %(queue)s AND batch_id = %(batch_id)s AND dependents IS NULL")
    params = {"batch_id": batch_id, "queue": QUEUE, "started": started}
    if cur.execute(FLAG_ENDED, params) != 1:
        raise Fenced(batch_id)
    cur.execute(split_move[0], params)
    cur.execute(SPLIT_DELETE, params)


# ---------------------------------------------------------------------------- the loop

Claim = Callable[[Any, int, int, tuple[int, str]], list[Any]]
Complete = Callable[[Any, int, Sequence[Any], float], None]
# name: (claim, completion, whether the claim and whether the completion are each one transaction; if
# not, their statements are autocommit, as mysqlq's are today: the batch's row first, then the claim;
# the jobs' completion, then the batch's)
LOOPS: dict[str, tuple[Claim, Complete, bool, bool]] = {
    "fewer": (fewer_claim, fewer_complete, False, False),
    "inplace": (inplace_claim, inplace_complete, False, False),
    "pk": (pk_claim, pk_complete, True, True),
    "pk-finished": (pk_claim, pk_complete, True, True),  # the same statements; mysqlq_jobs_state keyed otherwise
    "narrow": (narrow_claim, narrow_complete, True, True),
    "batchrow": (batchrow_claim, batchrow_complete, True, True),
    "batchrow-fixed": (batchrow_claim, batchrow_complete, True, True),  # designs.py: fixed-size columns
    "batchrow-status": (status_claim, status_complete, True, True),
    "flag": (flag_claim, flag_complete, False, True),
    "flag-id": (flag_id_claim, flag_complete, False, True),
    "split": (split_claim, split_complete, False, True),
    "split-lean": (split_claim, split_complete, False, True),  # designs.py: a leaner history
}
# name: a loop of its own, in the worker's queries (one per batch)
MERGED: dict[str, Callable[[Any, int, tuple[int, str], int], dict[str, Any]]] = {
    "flag-merged": flag_merged_drain,
    "flag-ids": partial(flag_merged_drain, by_ids=True),
}

deadlocks = 0


def transaction(db: Any, run: Callable[[Any], Any], atomic: bool = True) -> Any:
    """``run(cursor)`` in one transaction (``atomic``; else its statements autocommit), again after a
    deadlock or a lock wait timeout."""
    global deadlocks
    while True:
        if atomic:
            db.begin()
        try:
            with db.cursor() as cur:
                result = run(cur)
            if atomic:
                db.commit()
            return result
        except MySQLdb.OperationalError as exc:
            db.rollback()
            if exc.args[0] not in RETRIED:
                raise
            deadlocks += 1
        except BaseException:
            db.rollback()
            raise


def _claiming(claim: Claim, batch_id: int, limit: int, who: tuple[int, str], cur: Any) -> list[Any]:
    return claim(cur, batch_id, limit, who)


def _completing(complete: Complete, batch_id: int, rows: Sequence[Any], started: float, cur: Any) -> None:
    complete(cur, batch_id, rows, started)


def drain(conn: dict[str, Any], design: str, batch: int) -> dict[str, Any]:
    """Claim (with its read-back) and complete batches, each in a transaction, until a claim is empty."""
    db = MySQLdb.connect(autocommit=True, charset="utf8mb4", **conn)
    who = (os.getpid(), f"designs:{os.getpid()}")
    base = os.getpid() << 32  # unique per drainer; the database is fresh per run, or its own rows go after it
    if design in MERGED:
        result = MERGED[design](db, batch, who, base)
        db.close()
        return result
    claim, complete, claim_atomic, complete_atomic = LOOPS[design]
    jobs, first, last = 0, None, None
    for sequence in range(1, 1 << 31):
        batch_id = base + sequence
        claimed_at = time.time()
        rows: list[Any] = transaction(db, partial(_claiming, claim, batch_id, batch, who), claim_atomic)
        if not rows:
            break
        if first is None:
            first = claimed_at
        # (the handlers would run here: no-ops)
        transaction(db, partial(_completing, complete, batch_id, rows, claimed_at), complete_atomic)
        jobs += len(rows)
        last = time.time()
    db.close()
    return {"jobs": jobs, "first": first, "last": last, "deadlocks": deadlocks}


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="design_loop.py", description="A candidate design's drain loop.")
    parser.add_argument("--design", required=True, choices=sorted([*LOOPS, *MERGED]))
    parser.add_argument("--conn", required=True, help="mysqlclient connect() keyword arguments as JSON")
    parser.add_argument("--batch", type=int, default=100)
    args = parser.parse_args(argv)
    print(json.dumps(drain(json.loads(args.conn), args.design, args.batch)), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
