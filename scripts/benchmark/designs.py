"""designs: the server's work per job of candidate schema designs, each drained by a bare loop.

Issue 45 asks for half the server's CPU per no-op job. This section drains N no-op jobs (20,000;
5,000 with ``--quick``) with K processes per design (2; ``MYSQLQ_BENCH_DESIGNS_K=4`` for 4), on a
fresh database each time, the designs in alternation within each run, and reads per job: the
server's CPU (``/proc`` of its process, over the drain, and until purge has caught up, as serverwork
does), the redo log generated, the statements sent and the handler reads, the
first-claim-to-last-completion rate; then, on one more drain per design with counting triggers
(serverwork's), the wide row's records rewritten and columns changed, the other tables' rows written
and the secondary-index entries changed.

The designs (design_loop.py holds their statements):

- ``bare``: the bare-SQL reference loop (bare.py), and ``ceiling``: mysqlq's own claim, read-back
  and completion run by it (what serverwork calls the ceiling);
- ``fewer``: today's claim and read-back, but each job's row gets only status, ready_queue,
  running_batch and attempts at the claim and status, running_batch, batch_id, started_at and
  finished_at at the completion; worker, worker_id, lease and claim time go once per batch into a
  ``mysqlq_batches`` row;
- ``pk``: the jobs claimed by primary key (``SELECT … FOR UPDATE SKIP LOCKED`` reading the jobs
  themselves, then ``UPDATE … WHERE id IN``), completed by primary key fenced by ``batch_id``; no
  index holds the batch (``mysqlq_jobs_state`` loses ``running_batch``); the batch's row keeps its
  jobs' ids for the reaper; ``pk-finished``: the same with ``mysqlq_jobs_state`` keyed on
  ``(queue, finished_at)`` only, so that the claim changes no entry of it;
- ``narrow``: a narrow ``mysqlq_ready`` table (queue, priority, job_id) beside the wide one, whose
  ready index goes; the claim moves narrow rows to ``mysqlq_claimed`` (batch_id, job_id), the wide
  row is written once, at the completion (solid_queue's ready / claimed executions);
  ``batchrow``: the same with no claimed row per job, the batch's row keeping its jobs' ids and
  fencing the completion;

- ``inplace``: ``fewer`` on a table whose columns the claim and the completion change are all NOT
  NULL and of fixed size (0 or the epoch for "none"; the ready index keyed on the status instead of
  ``ready_queue``), so that InnoDB rewrites the record in place; ``batchrow-fixed``: ``batchrow``
  with the same fixed-size columns; ``batchrow-status``: ``batchrow-fixed`` whose claim also marks
  the wide rows running by primary key (status, batch_id, attempts: in place), so that a running
  job's own row says so;
- ``flag``: ``batchrow-fixed``'s narrow ``mysqlq_ready`` with a fixed-size ``batch_id`` (0: ready)
  in its primary key ``(batch_id, queue, priority, job_id)`` and no secondary index: the claim is
  one autocommit ``UPDATE mysqlq_ready SET batch_id = … WHERE batch_id = 0 AND queue = … ORDER BY
  priority, job_id LIMIT n`` (after the batch's row, which holds no ids), the read-back joins the
  batch's narrow rows to the wide ones, and the completion, one transaction, ends the batch's lease
  (one row changed, or it is rolled back), writes the wide rows once through the same join and
  deletes the narrow rows; ``flag-id``: the same statements with ``mysqlq_ready`` keyed on job_id
  and a secondary index ``(queue, batch_id, priority)``; ``flag-merged``: ``flag``'s statements in
  one query per batch, as the worker sends today's (the ended batch's completion, the batch's row,
  the claim, the read-back); ``flag-ids``: ``flag-merged`` whose completion writes the wide rows by
  the ids the read-back gave, fenced by the lease's end through a session variable (no join);
- ``split``: no second row per job at all: the live jobs (ready, running) in ``mysqlq_live``, made
  like ``mysqlq_jobs`` but with only its primary key and a claim index ``(queue, batch_id, priority,
  id)``, the history in ``mysqlq_jobs`` (without its ready index); the claim is ``flag``'s UPDATE on
  the live rows (``batch_id``, fixed-size, in place), the read-back reads them by that index, and the
  completion, one transaction, ends the batch's lease (the fence), copies the batch's live rows into
  the history as done (``INSERT … SELECT``, the same ids) and deletes them; ``split-lean``: the
  history without the scheduled and the dedupe index (dedupe keys in a table of their own);

each at batch 100 (mysqlq's default), and some at 500. ``MYSQLQ_BENCH_DESIGNS=inplace/100,batchrow/500``
runs only those (and the two references, bare/100 and ceiling/100), e.g. with ``--runs 5`` for a
narrower spread. ``MYSQLQ_BENCH_DESIGNS_DONE=2000000`` puts that many done jobs (history, as W5's,
finished over the past week, 100 to a batch, in each shape's own form: no narrow rows, and batch
rows with their leases ended) in one database per table shape before the runs, filled once; each
drain then adds its ready jobs to it and deletes its own rows after (so that every drain runs
beside the same history); the counting drain stays on a fresh database. Per-job figures and ratios
within the run only: the machine may be shared. A private server of its own (default settings),
or MYSQLQ_DSN.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from dataclasses import dataclass, field
from typing import Any

import mysqlq
from benchmark import bare as bench_bare
from benchmark.common import (
    DB_PREFIX,
    HERE,
    Bench,
    Figure,
    clean_env,
    connect_kwargs,
    emit,
    fill_jobs,
    fmt,
    median,
    note,
    payload_bytes,
    write_json,
)
from benchmark.serverwork import CHANGES_TABLE, HANDLER_READS, Probe, create_counting_triggers, diff, minus, redo_bytes
from benchmark.shared import ceiling_statements, cpu_since, server_cpu


def knob(name: str, default: int) -> int:
    """A whole number from the environment (``default`` when unset)."""
    given = os.environ.get(name, "").strip().replace("_", "")
    if not given:
        return default
    if not given.isdigit():
        raise SystemExit(f"{name}: {given!r} is not a whole number")
    return int(given)


K = max(1, knob("MYSQLQ_BENCH_DESIGNS_K", 2))  # draining processes per design
DONE = knob("MYSQLQ_BENCH_DESIGNS_DONE", 0)  # done rows (history) beside the ready jobs
HISTORY_WEEK_US = 7 * 86_400 * 1_000_000  # the history's finished_at spread over a week, the newest 2 hours old
HISTORY_BATCH = 100  # history jobs per batch (mysqlq's default batch)
TEMPLATE = "designs_template"  # a database migrated once: its mysqlq_jobs is every design's starting point

BATCHES = """CREATE TABLE mysqlq_batches (
  batch_id BIGINT UNSIGNED NOT NULL PRIMARY KEY,
  worker_id BIGINT UNSIGNED NOT NULL,
  worker VARCHAR(255) NOT NULL,
  claimed_at DATETIME(6) NOT NULL,
  lease_until DATETIME(6) NULL,
  job_ids MEDIUMTEXT NULL,
  KEY mysqlq_batches_lease (lease_until)
) ENGINE=InnoDB DEFAULT CHARSET=utf8mb4 COLLATE=utf8mb4_bin"""
READY = """CREATE TABLE mysqlq_ready (
  queue VARCHAR(100) NOT NULL,
  priority SMALLINT NOT NULL,
  job_id BIGINT UNSIGNED NOT NULL,
  PRIMARY KEY (queue, priority, job_id)
) ENGINE=InnoDB DEFAULT CHARSET=utf8mb4 COLLATE=utf8mb4_bin"""
# ``flag``: the narrow rows stay until the completion, flagged with their batch (0: ready); clustered
# on what every statement looks them up by (the claim: queue and batch 0, in claim order; the read-back
# and the completion: the batch and its queue), so no secondary index: the claim moves each record
# (its key changes) and the completion deletes it, one record each.
FLAG_READY = """CREATE TABLE mysqlq_ready (
  queue VARCHAR(100) NOT NULL,
  priority SMALLINT NOT NULL,
  job_id BIGINT UNSIGNED NOT NULL,
  batch_id BIGINT UNSIGNED NOT NULL DEFAULT 0,
  PRIMARY KEY (batch_id, queue, priority, job_id)
) ENGINE=InnoDB DEFAULT CHARSET=utf8mb4 COLLATE=utf8mb4_bin"""
# ``flag-id``: the same rows keyed on the job, the lookups through a secondary index: the claim
# rewrites the record in place (batch_id is fixed-size) and moves its entry of that index; the
# completion deletes the record and the entry.
FLAG_READY_ID = """CREATE TABLE mysqlq_ready (
  queue VARCHAR(100) NOT NULL,
  priority SMALLINT NOT NULL,
  job_id BIGINT UNSIGNED NOT NULL,
  batch_id BIGINT UNSIGNED NOT NULL DEFAULT 0,
  PRIMARY KEY (job_id),
  KEY mysqlq_ready_claim (queue, batch_id, priority)
) ENGINE=InnoDB DEFAULT CHARSET=utf8mb4 COLLATE=utf8mb4_bin"""
CLAIMED = """CREATE TABLE mysqlq_claimed (
  batch_id BIGINT UNSIGNED NOT NULL,
  job_id BIGINT UNSIGNED NOT NULL,
  PRIMARY KEY (batch_id, job_id)
) ENGINE=InnoDB"""
STATE_NO_BATCH = ("ALTER TABLE mysqlq_jobs DROP INDEX mysqlq_jobs_state,"
                  " ADD KEY mysqlq_jobs_state (status, queue, finished_at)")
STATE_FINISHED = "ALTER TABLE mysqlq_jobs DROP INDEX mysqlq_jobs_state, ADD KEY mysqlq_jobs_state (queue, finished_at)"
# The columns a claim or completion changes, NOT NULL and of fixed size ("none" is 0 or the epoch), so
# that InnoDB rewrites the clustered record in place (a NULL made a value, or a value NULL, changes its
# size: then the record is deleted and inserted again, its whole image logged).
FIXED = ("ALTER TABLE mysqlq_jobs MODIFY batch_id BIGINT UNSIGNED NOT NULL DEFAULT 0,"
         " MODIFY started_at DATETIME(6) NOT NULL DEFAULT '1970-01-01 00:00:01',"
         " MODIFY finished_at DATETIME(6) NOT NULL DEFAULT '1970-01-01 00:00:01'")
FIXED_CLAIM = ("ALTER TABLE mysqlq_jobs MODIFY running_batch BIGINT UNSIGNED NOT NULL DEFAULT 0,"
               " DROP INDEX mysqlq_jobs_ready, ADD KEY mysqlq_jobs_ready (status, queue, priority, id)")
NO_READY_INDEX = "ALTER TABLE mysqlq_jobs DROP INDEX mysqlq_jobs_ready"
# ``split``: the live jobs in a table of their own, mysqlq_jobs' columns (made LIKE it, after FIXED) with
# only the primary key and the claim's index; a job is inserted there by its enqueue and moved to
# mysqlq_jobs (the history) by its completion.
LIVE = "CREATE TABLE mysqlq_live LIKE mysqlq_jobs"
LIVE_KEYS = ("ALTER TABLE mysqlq_live DROP INDEX mysqlq_jobs_dedupe, DROP INDEX mysqlq_jobs_state,"
             " DROP INDEX mysqlq_jobs_scheduled, ADD KEY mysqlq_live_claim (queue, batch_id, priority, id)")
# ``split-lean``: the history without the indexes only live jobs need: the scheduled jobs' and the dedupe
# keys' (kept in a table of their own, which only jobs with a key would pay for).
HISTORY_LEAN = "ALTER TABLE mysqlq_jobs DROP INDEX mysqlq_jobs_dedupe, DROP INDEX mysqlq_jobs_scheduled"
MOVE_LIVE = ("INSERT INTO mysqlq_live SELECT * FROM mysqlq_jobs WHERE id > %s",
             "DELETE FROM mysqlq_jobs WHERE id > %s")  # the jobs just filled (not the history)
HISTORY_COLUMNS = ("queue, handler, payload, status, priority, run_at, attempts, max_attempts, batch_id, worker_id,"
                   " worker, enqueued_at, started_at, finished_at")
FILL_READY = ("INSERT INTO mysqlq_ready (queue, priority, job_id) SELECT queue, priority, id FROM mysqlq_jobs"
              " WHERE id > %s")  # the jobs just filled (not the history)

# The statements that shape a fresh database (after mysqlq_jobs is made like the template's) per loop.
SHAPES: dict[str, list[str]] = {
    "ceiling": [],
    "fewer": [BATCHES],
    "pk": [BATCHES, STATE_NO_BATCH],
    "pk-finished": [BATCHES, STATE_FINISHED],
    "narrow": [BATCHES, READY, CLAIMED, NO_READY_INDEX, STATE_NO_BATCH],
    "batchrow": [BATCHES, READY, NO_READY_INDEX, STATE_NO_BATCH],
    "inplace": [BATCHES, FIXED, FIXED_CLAIM],
    "batchrow-fixed": [BATCHES, READY, NO_READY_INDEX, STATE_NO_BATCH, FIXED],
    "batchrow-status": [BATCHES, READY, NO_READY_INDEX, STATE_NO_BATCH, FIXED],
    "flag": [BATCHES, FLAG_READY, NO_READY_INDEX, STATE_NO_BATCH, FIXED],
    "flag-id": [BATCHES, FLAG_READY_ID, NO_READY_INDEX, STATE_NO_BATCH, FIXED],
    "flag-merged": [BATCHES, FLAG_READY, NO_READY_INDEX, STATE_NO_BATCH, FIXED],
    "flag-ids": [BATCHES, FLAG_READY, NO_READY_INDEX, STATE_NO_BATCH, FIXED],
    "split": [BATCHES, NO_READY_INDEX, STATE_NO_BATCH, FIXED, LIVE, LIVE_KEYS],
    "split-lean": [BATCHES, NO_READY_INDEX, STATE_NO_BATCH, FIXED, LIVE, LIVE_KEYS, HISTORY_LEAN],
}
NARROW = ("narrow", "batchrow", "batchrow-fixed", "batchrow-status", "flag", "flag-id", "flag-merged", "flag-ids")


@dataclass(frozen=True)
class Design:
    loop: str  # bare, ceiling, or a shape of SHAPES (its loop in design_loop.py)
    batch: int

    @property
    def name(self) -> str:
        return f"{self.loop}/{self.batch}"

    @property
    def table(self) -> str:
        return "job_queue" if self.loop == "bare" else "mysqlq_jobs"


DESIGNS = [Design("bare", 100), Design("ceiling", 100), Design("fewer", 100), Design("inplace", 100),
           Design("pk", 100), Design("pk-finished", 100), Design("narrow", 100), Design("batchrow", 100),
           Design("batchrow-fixed", 100), Design("batchrow-status", 100),
           Design("bare", 500), Design("ceiling", 500), Design("inplace", 500), Design("pk-finished", 500),
           Design("narrow", 500), Design("batchrow", 500), Design("batchrow-fixed", 500),
           Design("batchrow-status", 500), Design("flag", 100), Design("flag-merged", 100), Design("flag", 500),
           Design("flag-id", 500), Design("flag-merged", 500), Design("split", 500)]
REFERENCE = Design("bare", 100)
CEILING = Design("ceiling", 100)


def selected() -> list[Design]:
    """DESIGNS, or those MYSQLQ_BENCH_DESIGNS names (``loop/batch``, comma-separated) after the references."""
    given = os.environ.get("MYSQLQ_BENCH_DESIGNS", "").strip()
    if not given:
        return DESIGNS
    chosen = [REFERENCE, CEILING]
    for item in (s.strip() for s in given.split(",") if s.strip()):
        loop, _, batch = item.partition("/")
        if loop not in ("bare", *SHAPES) or not batch.isdigit() or int(batch) < 1:
            raise SystemExit(f"MYSQLQ_BENCH_DESIGNS: {item!r} is no design/batch (designs: bare, {', '.join(SHAPES)})")
        design = Design(loop, int(batch))
        if design not in chosen:
            chosen.append(design)
    return chosen


@dataclass
class Run:
    jobs: int
    server_cpu: float  # s, over the drain
    server_cpu_purged: float  # s, until purge caught up (NaN if it did not within serverwork's wait)
    fill_cpu: float  # s, the server's CPU for the bulk fill (the narrow designs also fill mysqlq_ready)
    steady: float  # s, first claim to last completion
    status: dict[str, float] = field(default_factory=dict)  # SHOW GLOBAL STATUS deltas over the drain
    deadlocks: int = 0


@dataclass
class History:
    """A database per shape holding DONE done rows, filled once and drained beside in every run."""

    dsn: mysqlq.Dsn
    seconds: float  # the fill's wall time
    server_cpu: float  # s, the server's CPU for the fill
    batches: int  # the history's batch ids go up to this (the drainers' are far above)


def main(quick: bool, runs: int, json_path: str | None = None) -> int:
    n = 5000 if quick else 20_000
    started = time.perf_counter()
    bench = Bench(quick, runs)
    figures: list[Figure] = []
    try:
        print(f"# server: {bench.where}: {bench.server_info}")
        print(f"# designs: {K} drainers each, {n} no-op jobs, {DONE} done rows beside them, runs={runs},"
              " designs in alternation", flush=True)
        probe = Probe(bench)
        bench.fresh(TEMPLATE)
        chosen = selected()
        histories: dict[str, History] = {}
        if DONE:
            for design in chosen:
                if shape_of(design) not in histories:
                    note(f"designs: {DONE} done rows in {design.loop}'s shape")
                    histories[shape_of(design)] = history(bench, design, f"dz_done{len(histories)}")
            settle(bench)
        results: dict[Design, list[Run]] = {d: [] for d in chosen}
        for run in range(runs):
            for design in chosen:
                note(f"designs run {run + 1}: {design.name}")
                results[design].append(timed(bench, probe, design, f"dz_r{run}", n, histories.get(shape_of(design))))
        changes: dict[Design, dict[str, float]] = {}
        for design in chosen:
            note(f"designs: {design.name}, changes counted by triggers")
            changes[design] = counted(bench, probe, design, "dz_changes", max(n // 4, 5 * design.batch))
        figures = figures_of(results, changes)
        for fig in figures:
            emit(fig)
        print()
        print(report(results, changes, bench, n))
        for shape, done in histories.items():
            print(f"# history of {DONE} done rows in {shape}'s shape: filled in {done.seconds:.0f} s, "
                  f"server CPU {done.server_cpu:.1f} s")
    finally:
        bench.close()
    if json_path:
        write_json(json_path, figures, {"section": "designs", "server": bench.server_info, "jobs": n, "k": K,
                                        "done": DONE})
    print(f"\n# total {time.perf_counter() - started:.0f} s")
    return 0


# ---------------------------------------------------------------------------- one drain


def shape_of(design: Design) -> str:
    """The name of the first loop of the design's table shape (designs of one shape share a history)."""
    if design.loop == "bare":
        return "bare"
    return next(loop for loop, shape in SHAPES.items() if shape == SHAPES[design.loop])


def shaped(bench: Bench, design: Design, name: str) -> tuple[mysqlq.Dsn, Any, Any]:
    """A fresh database with the design's tables, empty; its connection and a cursor."""
    dsn = bench.fresh(name, migrate=False)
    conn = bench.connect(dsn)
    cur = conn.cursor()
    if design.loop == "bare":
        bench_bare.create_table(cur)
    else:
        cur.execute(f"CREATE TABLE mysqlq_jobs LIKE `{DB_PREFIX + TEMPLATE}`.mysqlq_jobs")
        for statement in SHAPES[design.loop]:
            cur.execute(statement)
    return dsn, conn, cur


def prepare(bench: Bench, design: Design, name: str, n: int,
            done: History | None = None) -> tuple[mysqlq.Dsn, float, int]:
    """A fresh database shaped for ``design`` (or the shape's history) to which ``n`` ready jobs are
    added; the server's CPU for the fill, and the highest job id before it."""
    if done is None:
        dsn, conn, cur = shaped(bench, design, name)
        since = 0
    else:
        dsn = done.dsn
        conn = bench.connect(dsn)
        cur = conn.cursor()
        cur.execute(f"SELECT COALESCE(MAX(id), 0) FROM {design.table}")
        since = int(cur.fetchone()[0])
    cpu = server_cpu(bench)
    if design.loop == "bare":
        bench_bare.fill(cur, [payload_bytes(i) for i in range(n)])
    else:
        fill_jobs(cur, n)
        if design.loop in NARROW:
            cur.execute(FILL_READY, (since,))
        if design.loop.startswith("split"):
            for statement in MOVE_LIVE:
                cur.execute(statement, (since,))
    fill = cpu_since(server_cpu(bench), cpu)
    conn.close()
    return dsn, fill, since


def history(bench: Bench, design: Design, name: str) -> History:
    """A database shaped for ``design`` holding DONE done jobs (as W5's: no-op jobs finished long ago,
    here spread over a week of finished_at, the newest two hours old) in the shape's own form: done
    wide rows (no narrow row), 100 to a batch, and for the shapes with ``mysqlq_batches`` the batches'
    rows, their leases ended. Filled by INSERT … SELECT doubling."""
    dsn, conn, cur = shaped(bench, design, name)
    started, cpu = time.perf_counter(), server_cpu(bench)
    spacing = HISTORY_WEEK_US // DONE
    if design.loop == "bare":
        cur.execute("INSERT INTO job_queue (status, batch_id, data) VALUES (2, 1, %s)", (payload_bytes(0),))
    else:
        cur.execute(f"SELECT NOW(6) - INTERVAL {HISTORY_WEEK_US} MICROSECOND - INTERVAL 2 HOUR")
        oldest = cur.fetchone()[0]
        cur.execute(f"INSERT INTO mysqlq_jobs ({HISTORY_COLUMNS}) VALUES ('default', 'bench.noop', %s, 'done', 0,"
                    " %s, 1, 5, 1, 1, 'bench-history', %s, %s, %s)", (payload_bytes(0), *[oldest] * 4))
    count = 1
    while count < DONE:
        step = min(count, DONE - count, 250_000)
        batch = f"(id - 1 + {count}) DIV {HISTORY_BATCH} + 1"  # the new row's id is about id + count
        if design.loop == "bare":
            cur.execute(f"INSERT INTO job_queue (status, batch_id, data) SELECT status, {batch}, data"
                        f" FROM job_queue ORDER BY id LIMIT {step}")
        else:
            shift = f"INTERVAL {count * spacing} MICROSECOND"
            cur.execute(f"INSERT INTO mysqlq_jobs ({HISTORY_COLUMNS}) SELECT queue, handler, payload, status,"
                        f" priority, run_at + {shift}, attempts, max_attempts, {batch}, worker_id, worker,"
                        f" enqueued_at + {shift}, started_at + {shift}, finished_at + {shift}"
                        f" FROM mysqlq_jobs ORDER BY id LIMIT {step}")
        count += step
    if BATCHES in SHAPES.get(design.loop, []):
        cur.execute("INSERT INTO mysqlq_batches (batch_id, worker_id, worker, claimed_at)"
                    " SELECT batch_id, 1, 'bench-history', MIN(started_at) FROM mysqlq_jobs GROUP BY batch_id")
    cur.execute(f"SELECT COUNT(*), MAX(batch_id) FROM {design.table}")
    rows, batches = (int(v) for v in cur.fetchone())
    conn.close()
    if rows != DONE:
        raise RuntimeError(f"{design.name}: {rows} done rows filled, not {DONE}")
    return History(dsn, time.perf_counter() - started, cpu_since(server_cpu(bench), cpu), batches)


def settle(bench: Bench, quiet: float = 0.05, longest: float = 300.0) -> None:
    """Until the server has used under ``quiet`` of a CPU for a second (its page cleaner done with
    what a fill left dirty), at most ``longest`` seconds."""
    deadline = time.monotonic() + longest
    while time.monotonic() < deadline:
        before = server_cpu(bench)
        time.sleep(1.0)
        used = cpu_since(server_cpu(bench), before)
        if not used >= quiet:  # NaN (not our server to read) too
            return


def drain(design: Design, dsn: mysqlq.Dsn, n: int) -> list[dict[str, Any]]:
    """K drainers (bare.py, or design_loop.py), until each has found nothing left; their JSON lines."""
    conn = json.dumps(connect_kwargs(dsn, dsn.database))
    if design.loop in ("bare", "ceiling"):
        args = [sys.executable, str(HERE / "bare.py"), "drain", "--conn", conn, "--batch", str(design.batch)]
        if design.loop == "ceiling":
            args += ["--statements", ceiling_statements()]
    else:
        args = [sys.executable, str(HERE / "design_loop.py"), "--design", design.loop, "--conn", conn,
                "--batch", str(design.batch)]
    procs = [subprocess.Popen(args, stdout=subprocess.PIPE, env=clean_env({})) for _ in range(K)]
    outputs = [proc.communicate(timeout=max(120.0, n / 20))[0] for proc in procs]
    if any(proc.returncode for proc in procs):
        raise RuntimeError(f"{design.name}: a drainer failed")
    return [json.loads(out) for out in outputs]


def check_done(bench: Bench, design: Design, dsn: mysqlq.Dsn, n: int, outputs: list[dict[str, Any]],
               since: int = 0, done: History | None = None) -> None:
    """Every job (of those after ``since``) done once, nothing left claimed or ready; then the database
    is dropped, or with a history the drain's rows are deleted (so that every drain has DONE beside it)."""
    conn = bench.connect(dsn)
    cur = conn.cursor()
    cur.execute("SELECT COUNT(*) FROM job_queue WHERE status = 2 AND id > %s" if design.loop == "bare"
                else "SELECT COUNT(*) FROM mysqlq_jobs WHERE status = 'done' AND finished_at IS NOT NULL"
                     " AND attempts = 1 AND id > %s", (since,))
    finished = int(cur.fetchone()[0])
    left = 0
    if design.loop in NARROW:
        cur.execute("SELECT (SELECT COUNT(*) FROM mysqlq_ready)"
                    + (" + (SELECT COUNT(*) FROM mysqlq_claimed)" if design.loop == "narrow" else ""))
        left = int(cur.fetchone()[0])
    if design.loop.startswith("split"):
        cur.execute("SELECT COUNT(*) FROM mysqlq_live")
        left = int(cur.fetchone()[0])
    if design.loop not in ("bare", "ceiling"):
        cur.execute("SELECT COUNT(*) FROM mysqlq_batches WHERE lease_until IS NOT NULL")
        left += int(cur.fetchone()[0])
    drained = sum(int(out["jobs"]) for out in outputs)
    if finished != n or drained != n or left:
        raise RuntimeError(f"{design.name}: {drained} of {n} jobs drained, {finished} done, {left} left claimed"
                           " or ready")
    if done is None:
        conn.close()
        bench.drop(dsn.database)
        return
    cur.execute(f"DELETE FROM {design.table} WHERE id > %s", (since,))
    if design.loop != "bare" and BATCHES in SHAPES[design.loop]:
        cur.execute("DELETE FROM mysqlq_batches WHERE batch_id > %s", (done.batches,))
    conn.close()


def timed(bench: Bench, probe: Probe, design: Design, name: str, n: int, done: History | None = None) -> Run:
    dsn, fill, since = prepare(bench, design, name, n, done)
    probe.wait_purged()  # what the fill and the drain before left
    level = probe.history_length()
    before, cpu = probe.snapshot(), server_cpu(bench)
    outputs = drain(design, dsn, n)
    drained = server_cpu(bench)
    status = minus(diff(probe.snapshot(), before), probe.own)
    purged = probe.wait_purged(level)
    until_purged = cpu_since(server_cpu(bench), cpu) if purged else float("nan")
    check_done(bench, design, dsn, n, outputs, since, done)
    first = min(out["first"] for out in outputs if out["first"] is not None)
    last = max(out["last"] for out in outputs if out["last"] is not None)
    return Run(n, cpu_since(drained, cpu), until_purged, fill, last - first, status,
               sum(int(out.get("deadlocks", 0)) for out in outputs))


def counted(bench: Bench, probe: Probe, design: Design, name: str, n: int) -> dict[str, float]:
    """Per job: records and columns changed, by table and index, counted by serverwork's triggers (on a
    fresh database, without the history: the counts are per changed row)."""
    dsn, _, _ = prepare(bench, design, name, n)
    conn = bench.connect(dsn)
    cur = conn.cursor()
    create_counting_triggers(cur, dsn.database, probe.mariadb)
    outputs = drain(design, dsn, n)
    cur.execute(f"SELECT tbl, idx, SUM(n) FROM {CHANGES_TABLE} GROUP BY tbl, idx")
    found = {f"{tbl}.{idx}": float(total) / n for tbl, idx, total in cur.fetchall()}
    conn.close()
    check_done(bench, design, dsn, n, outputs)
    return found


# ---------------------------------------------------------------------------- figures and the report


def wide_changes(design: Design, changes: dict[str, float]) -> tuple[float, float, float, float]:
    """Per job: the queue table's records rewritten and columns changed; rows written in other tables
    (inserted, deleted or rewritten); secondary-index entries changed in every table."""
    table = design.table
    rewritten = changes.get(f"{table}.(rows rewritten)", 0.0)
    columns = changes.get(f"{table}.(columns changed)", 0.0)
    others = sum(v for k, v in changes.items() if not k.startswith(f"{table}.")
                 and (k.endswith(".PRIMARY") or k.endswith(".(rows rewritten)")))
    entries = sum(v for k, v in changes.items() if not k.endswith((".PRIMARY", ")")))
    return rewritten, columns, others, entries


def per_job(runs: list[Run], get: Any) -> list[float]:
    return [get(r) / r.jobs for r in runs]


def figures_of(results: dict[Design, list[Run]], changes: dict[Design, dict[str, float]]) -> list[Figure]:
    reference = results[REFERENCE]
    figures = []
    for design, runs in results.items():
        fig = Figure("designs", {"design": design.loop, "batch": str(design.batch), "n": str(runs[0].jobs),
                                 "k": str(K), "done": str(DONE)},
                     spread=("server_us_job", "steady_jobs_s"))
        fig.add_list("server_us_job", per_job(runs, lambda r: r.server_cpu * 1e6))
        fig.add_list("server_us_purged_job", per_job(runs, lambda r: r.server_cpu_purged * 1e6))
        fig.add_list("ratio_bare_server_us",
                     [r.server_cpu / b.server_cpu for r, b in zip(runs, reference, strict=True)])
        fig.add_list("ratio_ceiling_server_us",
                     [r.server_cpu / c.server_cpu for r, c in zip(runs, results[CEILING], strict=True)])
        fig.add_list("steady_jobs_s", [r.jobs / r.steady for r in runs])
        fig.add_list("ratio_bare_steady", [b.steady / r.steady for r, b in zip(runs, reference, strict=True)])
        fig.add_list("redo_bytes_job", per_job(runs, lambda r: redo_bytes(r.status)))
        fig.add_list("statements_job", per_job(runs, lambda r: r.status.get("Questions", float("nan"))))
        fig.add_list("handler_reads_job", per_job(runs, lambda r: sum(r.status.get(h, 0.0) for h in HANDLER_READS)))
        fig.add_list("fill_server_us_job", per_job(runs, lambda r: r.fill_cpu * 1e6))
        fig.add_list("deadlocks", [float(r.deadlocks) for r in runs])
        rewritten, columns, others, entries = wide_changes(design, changes[design])
        fig.add(rows_rewritten_job=rewritten, columns_changed_job=columns, other_rows_written_job=others,
                entries_changed_job=entries)
        figures.append(fig)
    return figures


def report(results: dict[Design, list[Run]], changes: dict[Design, dict[str, float]], bench: Bench, n: int) -> str:
    reference = results[REFERENCE]
    ceiling = results[CEILING]
    beside = f" beside {DONE} done rows" if DONE else ""
    lines = [f"Per job, {n} no-op jobs drained by {K} processes{beside}, medians of {len(reference)} run(s) (server "
             f"CPU: min–max); ratios taken run by run; {bench.server_info}", "",
             "| design / batch | server CPU µs | × bare/100 | × ceiling/100 | CPU until purged µs | redo bytes "
             "| statements | handler reads | jobs/s (first claim→last) | × bare/100 | wide row: rewrites; columns "
             "| other rows written | index entries changed | bulk fill CPU µs |",
             "|---|" + "---|" * 13]
    for design, runs in results.items():
        cpu = per_job(runs, lambda r: r.server_cpu * 1e6)
        rewritten, columns, others, entries = wide_changes(design, changes[design])
        lines.append(
            f"| {design.name} | {fmt(median(cpu))} ({fmt(min(cpu))}–{fmt(max(cpu))}) "
            f"| {fmt(median([r.server_cpu / b.server_cpu for r, b in zip(runs, reference, strict=True)]))} "
            f"| {fmt(median([r.server_cpu / c.server_cpu for r, c in zip(runs, ceiling, strict=True)]))} "
            f"| {fmt(median(per_job(runs, lambda r: r.server_cpu_purged * 1e6)))} "
            f"| {fmt(median(per_job(runs, lambda r: redo_bytes(r.status))))} "
            f"| {fmt(median(per_job(runs, lambda r: r.status.get('Questions', float('nan')))))} "
            f"| {fmt(median(per_job(runs, lambda r: sum(r.status.get(h, 0.0) for h in HANDLER_READS))))} "
            f"| {fmt(median([r.jobs / r.steady for r in runs]))} "
            f"| {fmt(median([b.steady / r.steady for r, b in zip(runs, reference, strict=True)]))} "
            f"| {fmt(rewritten)}; {fmt(columns)} | {fmt(others)} | {fmt(entries)} "
            f"| {fmt(median(per_job(runs, lambda r: r.fill_cpu * 1e6)))} |")
    return "\n".join(lines)
