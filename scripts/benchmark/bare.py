"""The bare-SQL reference loop (docs/performance.md): what this machine can do with no queue library at all.

Each of K processes, with mysqlclient and autocommit, claims, fetches and acks batches on its own
``job_queue`` table until nothing is claimed::

    UPDATE job_queue SET status=1, batch_id=%s WHERE status=0 ORDER BY id LIMIT %s;   -- claim
    SELECT id, data FROM job_queue WHERE batch_id=%s;                                  -- fetch
    UPDATE job_queue SET status=2 WHERE batch_id=%s;                                   -- ack

The ``skip-locked`` variant claims with ``SELECT id … FOR UPDATE SKIP LOCKED`` then ``UPDATE … WHERE
id IN (…)`` in one transaction.  With ``--statements`` the loop runs mysqlq's own claim, read-back
and batch ack (given as JSON by the caller) on mysqlq's ``mysqlq_jobs``: the ceiling that mysqlq's
schema and statements allow, with nothing around them.  Also here: the bare autocommit single-row
INSERT loop (W4).

Run by ``scripts/bench`` as a subprocess per drainer (so K drainers use K processes, like K workers)::

    python scripts/benchmark/bare.py drain --conn '{"unix_socket": "/tmp/x.sock", "user": "root",
        "database": "b1"}' --batch 100 [--claim update|skip-locked] [--isolation 'READ COMMITTED']

which prints one JSON line: ``{"jobs": n, "first": t, "last": t, "deadlocks": d}`` (wall-clock times
of the first claim and the last ack).  A statement that hits a deadlock (1213, rolled back by the
server) is simply run again; that is the only retry it does.  Only mysqlclient is imported, never mysqlq.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
from collections.abc import Sequence
from typing import Any

import MySQLdb

CREATE_TABLE = """
CREATE TABLE job_queue (
  id BIGINT AUTO_INCREMENT PRIMARY KEY,
  status TINYINT NOT NULL DEFAULT 0,
  batch_id BIGINT NULL,
  data BLOB,
  KEY (status, id),
  KEY (batch_id)
) ENGINE=InnoDB
"""
CLAIM = "UPDATE job_queue SET status=1, batch_id=%s WHERE status=0 ORDER BY id LIMIT %s"
LOCK_SKIP_LOCKED = "SELECT id FROM job_queue WHERE status=0 ORDER BY id LIMIT %s FOR UPDATE SKIP LOCKED"
CLAIM_IDS = "UPDATE job_queue SET status=1, batch_id=%s WHERE id IN ({ids})"
FETCH = "SELECT id, data FROM job_queue WHERE batch_id=%s"
ACK = "UPDATE job_queue SET status=2 WHERE batch_id=%s"
INSERT_ONE = "INSERT INTO job_queue (status, data) VALUES (0, %s)"
FILL_CHUNK = 1000


def connect(conn: dict[str, Any], isolation: str | None = None) -> Any:
    """An autocommit mysqlclient connection from plain connect() keyword arguments."""
    db = MySQLdb.connect(autocommit=True, charset="utf8mb4", **conn)
    if isolation:
        with db.cursor() as cur:
            cur.execute(f"SET SESSION TRANSACTION ISOLATION LEVEL {isolation}")
    return db


def create_table(cur: Any) -> None:
    cur.execute("DROP TABLE IF EXISTS job_queue")
    cur.execute(CREATE_TABLE)


def fill(cur: Any, payloads: Sequence[bytes]) -> None:
    """Insert ready rows in multi-row INSERTs of FILL_CHUNK rows."""
    for start in range(0, len(payloads), FILL_CHUNK):
        chunk = payloads[start : start + FILL_CHUNK]
        cur.execute("INSERT INTO job_queue (status, data) VALUES " + ", ".join(["(0, %s)"] * len(chunk)), chunk)


def insert_loop(cur: Any, payloads: Sequence[bytes]) -> float:
    """W4's reference: one autocommit single-row INSERT per job; returns the seconds taken."""
    started = time.perf_counter()
    for payload in payloads:
        cur.execute(INSERT_ONE, (payload,))
    return time.perf_counter() - started


def _claim_update(cur: Any, batch_id: int, limit: int) -> int:
    return int(cur.execute(CLAIM, (batch_id, limit)))


def _claim_skip_locked(cur: Any, batch_id: int, limit: int) -> int:
    conn = cur.connection
    conn.begin()
    try:
        cur.execute(LOCK_SKIP_LOCKED, (limit,))
        ids = [row[0] for row in cur.fetchall()]
        claimed = 0
        if ids:
            claimed = int(cur.execute(CLAIM_IDS.format(ids=", ".join(["%s"] * len(ids))), (batch_id, *ids)))
        conn.commit()
    except BaseException:
        conn.rollback()
        raise
    return claimed


DEADLOCK = 1213


def _retrying(cur: Any, run: Any, *args: Any) -> Any:
    """Run one autocommit statement (or claim), again after a deadlock: the server rolled it back."""
    while True:
        try:
            return run(cur, *args)
        except MySQLdb.OperationalError as exc:
            if exc.args[0] != DEADLOCK:
                raise
            global deadlocks
            deadlocks += 1


def _execute(cur: Any, sql: str, params: Sequence[Any] | dict[str, Any]) -> int:
    return int(cur.execute(sql, params))


deadlocks = 0


class Statements:
    """mysqlq's own claim, read-back and ack (named parameters), given by the caller: the loop then
    drains mysqlq's ``mysqlq_jobs`` the way mysqlq's worker does, with nothing else around the three
    statements (the W1 ceiling). This file still imports only mysqlclient."""

    def __init__(self, given: dict[str, str]) -> None:
        self.claim, self.fetch, self.ack, self.waiting = given["claim"], given["fetch"], given["ack"], given["waiting"]
        # The worker's queries: the first claim with its read-back, then each later one after the
        # ack of the batch before it (None: the three statements one by one).
        self.first, self.next = given.get("first"), given.get("next")
        self.ended_sets = int(given.get("ended_sets", 1))  # the results of the ack's statements in "next"
        self.fixed = {"worker_id": os.getpid(), "worker": f"ceiling:{os.getpid()}", "lease_us": 60_000_000,
                      "queue": "default"}

    def claim_fn(self, cur: Any, batch_id: int, limit: int) -> int:
        return int(cur.execute(self.claim, {**self.fixed, "batch_id": batch_id, "limit": limit}))

    def claim_and_fetch(self, cur: Any, batch_id: int, limit: int, ended: int | None) -> list[Any]:
        """One query, as the worker sends it: the ended batch's ack (if any), the claim, the read-back."""
        params: dict[str, Any] = {**self.fixed, "batch_id": batch_id, "limit": limit}
        if ended is None:
            cur.execute(self.first, params)
        else:
            cur.execute(self.next, {**params, "ended_batch_id": ended})
            for _ in range(self.ended_sets):
                cur.nextset()
        cur.nextset()
        return list(cur.fetchall())


def drain(conn: dict[str, Any], batch: int, claim: str = "update", isolation: str | None = None,
          wait: float = 0.0, statements: Statements | None = None) -> dict[str, Any]:
    """Claim, fetch and ack until a claim comes back empty; returns jobs done and first/last times.
    With ``wait``, an empty claim before the first job is tried again every WAIT_POLL seconds, for
    up to ``wait`` seconds (the warm run: idle first, then a backlog appears). With ``statements``,
    mysqlq's own, on its table."""
    db = connect(conn, isolation)
    if wait:
        _wait_for_jobs(db, wait, statements.waiting if statements else WAITING)
    claim_fn = _claim_skip_locked if claim == "skip-locked" else _claim_update
    fetch, ack = FETCH, ACK
    if statements is not None:
        claim_fn, fetch, ack = statements.claim_fn, statements.fetch, statements.ack
    base = os.getpid() << 32  # unique per drainer; the table is fresh per run
    if statements is not None and statements.first and statements.next:
        result = _drain_merged(db, batch, statements, base)
        db.close()
        return result
    jobs, first, last = 0, None, None
    with db.cursor() as cur:
        for sequence in range(1, 1 << 31):
            batch_id = base + sequence
            claimed_at = time.time()
            if not _retrying(cur, claim_fn, batch_id, batch):
                break
            if first is None:
                first = claimed_at
            params = {"batch_id": batch_id} if statements else (batch_id,)  # mysqlq's are named
            cur.execute(fetch, params)
            rows = cur.fetchall()
            _retrying(cur, _execute, ack, params)
            jobs += len(rows)
            last = time.time()
    db.close()
    return {"jobs": jobs, "first": first, "last": last, "deadlocks": deadlocks}


def _drain_merged(db: Any, batch: int, statements: Statements, base: int) -> dict[str, Any]:
    """The loop of :func:`drain` in the worker's queries: one round trip per batch."""
    jobs, first, last, ended = 0, None, None, None
    with db.cursor() as cur:
        for sequence in range(1, 1 << 31):
            batch_id = base + sequence
            claimed_at = time.time()
            rows = _retrying(cur, statements.claim_and_fetch, batch_id, batch, ended)
            ended = None  # acked by the query above
            if not rows:
                break
            if first is None:
                first = claimed_at
            jobs += len(rows)
            ended = batch_id  # acked by the next query, the last one (which finds nothing) included
            last = time.time()
    return {"jobs": jobs, "first": first, "last": last, "deadlocks": deadlocks}


WAIT_POLL = 0.005  # seconds between an idle bare drainer's looks: it notices a backlog within 5 ms
WAITING = "SELECT 1 FROM job_queue WHERE status = 0 LIMIT 1"


def _wait_for_jobs(db: Any, wait: float, waiting: str) -> None:
    deadline = time.monotonic() + wait
    with db.cursor() as cur:
        while time.monotonic() < deadline:
            cur.execute(waiting)
            if cur.fetchone():
                return
            time.sleep(WAIT_POLL)


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="bare.py", description="The bare-SQL reference loop.")
    sub = parser.add_subparsers(dest="command", required=True)
    d = sub.add_parser("drain", help="drain job_queue; print {jobs, first, last} as JSON")
    d.add_argument("--conn", required=True, help="mysqlclient connect() keyword arguments as JSON")
    d.add_argument("--batch", type=int, default=100)
    d.add_argument("--claim", choices=["update", "skip-locked"], default="update")
    d.add_argument("--isolation", choices=["REPEATABLE READ", "READ COMMITTED"], default=None)
    d.add_argument("--wait", type=float, default=0.0, help="seconds to wait, idle, for the first job")
    d.add_argument("--statements", default=None,
                   help="JSON {claim, fetch, ack, waiting}: mysqlq's own statements, on its mysqlq_jobs table")
    args = parser.parse_args(argv)
    statements = Statements(json.loads(args.statements)) if args.statements else None
    result = drain(json.loads(args.conn), args.batch, args.claim, args.isolation, args.wait, statements)
    print(json.dumps(result), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
