"""W1flag: W1's drain by the real worker on the ``flag`` schema design (and ``inplace``, ``split``), as
prototypes measured before a design is written into mysqlq (docs/performance.md, *The flag design in
the real worker*).

The design (see designs.py and design_loop.py for its bare loop): a narrow ``mysqlq_ready`` table
(job_id, queue, priority, batch_id: fixed-size, NOT NULL) beside the wide ``mysqlq_jobs``, whose
ready index is left empty; a claim is one autocommit ``UPDATE mysqlq_ready … SET batch_id = token
WHERE queue = q AND batch_id = 0 ORDER BY … LIMIT n`` after a ``mysqlq_batches`` row (worker,
claim time, lease); the read-back joins the batch's narrow rows to the wide ones; the completion,
in one transaction, writes each wide row once (status, attempts, batch_id, started_at, finished_at,
all of fixed size, so InnoDB rewrites the record in place), deletes the batch's narrow rows and
ends the batch's row. The worker sends them as it sends today's: the previous batch's completion,
the claim and the read-back in one query.

The prototype is this checkout's mysqlq with four statements (the poll's ready check, the claim,
the read-back, the completion) and the three functions that send them replaced, in a copy made in
a temporary folder (the workers find it first on their PYTHONPATH); it keeps none of the other
guarantees (no reaper for the narrow rows, one queue only, no retries or limits), so only the no-op
drain is measured. Per run, in alternation, K=2 and K=4: the worker at its default batch, the
worker at ``--batch-size 100`` (the default before 500), the prototype at its default batch, and
the bare loop at batch 100 (the reference loop's batch). mysqlq's tables are rebuilt after the fill in
every mysqlq run (the prototype's ALTER rebuilds it; ``ALTER TABLE … FORCE`` the others), so that
each drain starts from a compact table.

``inplace`` keeps a running job's status true instead: the claim stays one ``UPDATE … LIMIT`` on the
wide table, keyed ``(status, queue, priority, id)`` (an index added after the fill), setting status,
running_batch and attempts, every column the claim and the completion change of fixed size (0 and
an epoch for "none"; running_batch 0 rather than NULL, so the copy's statements ask ``running_batch
> 0`` where they asked ``IS NOT NULL``); the batch's row holds worker and lease as in ``flag``.

``split`` keeps the live jobs apart from the history (designs.py's ``split-lean``, but for the scheduled
index, which the history keeps here): the ready jobs are moved into ``mysqlq_live`` after the fill, the
claim and the read-back are ``flag``'s on the live rows, and the completion copies the batch's rows into
``mysqlq_jobs`` as done and deletes them, fenced by the batch's row.

``MYSQLQ_BENCH_W1FLAG=inplace`` (comma-separated names) runs only the prototypes it names. If this
checkout's statements or functions changed so that a prototype no longer applies, the section stops
and says which part is missing.
"""

from __future__ import annotations

import os
import pathlib
import re
import shutil
import subprocess
import sys
import tempfile
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from benchmark.common import HERE, Bench, Figure, emit, note, pending
from benchmark.shared import BATCH, Sizes, drain_bare, drain_mysqlq

EPOCH = "'1970-01-01 00:00:01'"

# The design's tables, made from a migrated database holding the ready jobs (after the fill).
SETUP = [
    f"UPDATE mysqlq_jobs SET batch_id = 0, started_at = {EPOCH}, finished_at = {EPOCH}, ready_queue = NULL",
    "ALTER TABLE mysqlq_jobs MODIFY batch_id BIGINT UNSIGNED NOT NULL DEFAULT 0,"
    f" MODIFY started_at DATETIME(6) NOT NULL DEFAULT {EPOCH}, MODIFY finished_at DATETIME(6) NOT NULL DEFAULT {EPOCH}",
    "CREATE TABLE mysqlq_ready (job_id BIGINT UNSIGNED NOT NULL PRIMARY KEY, queue VARCHAR(100) NOT NULL,"
    " priority SMALLINT NOT NULL, batch_id BIGINT UNSIGNED NOT NULL DEFAULT 0,"
    " KEY mysqlq_ready_claim (queue, batch_id, priority, job_id))"
    " ENGINE=InnoDB DEFAULT CHARSET=utf8mb4 COLLATE=utf8mb4_bin",
    "CREATE TABLE mysqlq_batches (batch_id BIGINT UNSIGNED NOT NULL PRIMARY KEY, worker_id BIGINT UNSIGNED NOT NULL,"
    " worker VARCHAR(255) NOT NULL, claimed_at DATETIME(6) NOT NULL, lease_until DATETIME(6) NOT NULL,"
    " ended TINYINT NOT NULL DEFAULT 0, KEY mysqlq_batches_lease (lease_until))"
    " ENGINE=InnoDB DEFAULT CHARSET=utf8mb4 COLLATE=utf8mb4_bin",
    "INSERT INTO mysqlq_ready (job_id, queue, priority)"
    " SELECT id, queue, priority FROM mysqlq_jobs WHERE status = 'ready'",
]

POLL_READY = ("(SELECT 1 FROM mysqlq_jobs FORCE INDEX (mysqlq_jobs_ready) WHERE ready_queue IN ({ids}) LIMIT 1)"
              " AS has_ready")
FLAG_POLL_READY = ("(SELECT 1 FROM mysqlq_ready FORCE INDEX (mysqlq_ready_claim)"
                   " WHERE queue IN ({ids}) AND batch_id = 0 LIMIT 1) AS has_ready")

# The statements the prototype sends instead of today's (queue 'default' only: W1's).
STATEMENTS = {
    "claim_batch": """INSERT IGNORE INTO mysqlq_batches (batch_id, worker_id, worker, claimed_at, lease_until)
VALUES (%(batch_id)s, %(worker_id)s, %(worker)s, NOW(6), NOW(6) + INTERVAL %(lease_us)s MICROSECOND);
UPDATE mysqlq_ready FORCE INDEX (mysqlq_ready_claim) SET batch_id = %(batch_id)s
 WHERE queue = %(queue)s AND batch_id = 0 ORDER BY queue, batch_id, priority, job_id LIMIT %(limit)s;
""",
    "fetch_batch": """SELECT j.id, j.queue, j.handler, j.payload, j.attempts + 1, j.max_attempts, j.time_limit,
       j.concurrency_key, j.snoozes, j.tags, j.trace_context, j.waiting_for IS NOT NULL
  FROM mysqlq_ready r FORCE INDEX (mysqlq_ready_claim) JOIN mysqlq_jobs j ON j.id = r.job_id
 WHERE r.queue = 'default' AND r.batch_id = %(batch_id)s ORDER BY r.priority, r.job_id;
""",
    "complete_batch": """START TRANSACTION;
UPDATE mysqlq_ready r FORCE INDEX (mysqlq_ready_claim) JOIN mysqlq_jobs j ON j.id = r.job_id
       JOIN mysqlq_batches b ON b.batch_id = r.batch_id
   SET j.status = 'done', j.attempts = j.attempts + 1, j.batch_id = r.batch_id, j.started_at = b.claimed_at,
       j.finished_at = NOW(6), j.dedupe_key = IF(j.dedupe_scope = 'active', NULL, j.dedupe_key)
 WHERE r.queue = 'default' AND r.batch_id = %(batch_id)s AND b.ended = 0 AND j.status = 'ready'
   AND j.dependents IS NULL;
DELETE FROM mysqlq_ready WHERE queue = 'default' AND batch_id = %(batch_id)s;
UPDATE mysqlq_batches SET ended = 1 WHERE batch_id = %(batch_id)s;
COMMIT;
""",
    # Part of a batch, written before its end (its narrow rows go with the batch's completion).
    "complete_jobs": """UPDATE mysqlq_jobs j JOIN mysqlq_ready r ON r.job_id = j.id
       JOIN mysqlq_batches b ON b.batch_id = r.batch_id
   SET j.status = 'done', j.attempts = j.attempts + 1, j.batch_id = r.batch_id, j.started_at = b.claimed_at,
       j.finished_at = NOW(6), j.dedupe_key = IF(j.dedupe_scope = 'active', NULL, j.dedupe_key)
 WHERE r.batch_id = %s AND b.ended = 0 AND j.id IN ({ids}) AND j.status = 'ready' AND j.dependents IS NULL;
""",
}

INPLACE_SETUP = [
    f"UPDATE mysqlq_jobs SET batch_id = 0, running_batch = 0, started_at = {EPOCH}, finished_at = {EPOCH}",
    "ALTER TABLE mysqlq_jobs ADD KEY mysqlq_jobs_ready2 (status, queue, priority, id)",
    SETUP[3],  # mysqlq_batches
    "ALTER TABLE mysqlq_jobs FORCE",
]
INPLACE_POLL_READY = ("(SELECT 1 FROM mysqlq_jobs FORCE INDEX (mysqlq_jobs_ready2)"
                      " WHERE status = 'ready' AND queue IN ({ids}) LIMIT 1) AS has_ready")
INPLACE_STATEMENTS = {
    "claim_batch": """INSERT IGNORE INTO mysqlq_batches (batch_id, worker_id, worker, claimed_at, lease_until)
VALUES (%(batch_id)s, %(worker_id)s, %(worker)s, NOW(6), NOW(6) + INTERVAL %(lease_us)s MICROSECOND);
UPDATE mysqlq_jobs FORCE INDEX (mysqlq_jobs_ready2)
   SET status = 'running', running_batch = %(batch_id)s, attempts = attempts + 1
 WHERE status = 'ready' AND queue = %(queue)s ORDER BY status, queue, priority, id LIMIT %(limit)s;
""",
    # (assignments run left to right: batch_id reads running_batch before it is reset; the batch's row is
    # one row, read once: the join's equality is on the parameter, not on each job's column)
    "complete_batch": """UPDATE mysqlq_jobs j FORCE INDEX (mysqlq_jobs_state)
       JOIN mysqlq_batches b ON b.batch_id = %(batch_id)s
   SET j.status = 'done', j.batch_id = j.running_batch, j.finished_at = NOW(6), j.started_at = b.claimed_at,
       j.running_batch = 0, j.dedupe_key = IF(j.dedupe_scope = 'active', NULL, j.dedupe_key)
 WHERE j.running_batch = %(batch_id)s AND j.dependents IS NULL;
UPDATE mysqlq_batches SET ended = 1 WHERE batch_id = %(batch_id)s;
""",
    "complete_jobs": """UPDATE mysqlq_jobs
   SET status = 'done', batch_id = running_batch, finished_at = NOW(6),
       started_at = (SELECT b.claimed_at FROM mysqlq_batches b WHERE b.batch_id = mysqlq_jobs.running_batch),
       running_batch = 0, dedupe_key = IF(dedupe_scope = 'active', NULL, dedupe_key)
 WHERE running_batch = %s AND id IN ({ids}) AND dependents IS NULL;
""",
}

# ``split``: the live jobs in a table of their own (mysqlq_live: mysqlq_jobs' columns, keyed only by id and
# by the claim's index), moved into mysqlq_jobs (the history) by their completion; the history loses the
# ready and dedupe indexes (the design keeps dedupe keys in a table of their own), and keeps the scheduled
# one, which the leader's promotion forces (in the design scheduled jobs are live).
SPLIT_SETUP = [
    f"UPDATE mysqlq_jobs SET batch_id = 0, started_at = {EPOCH}, finished_at = {EPOCH}, ready_queue = NULL",
    SETUP[3],  # mysqlq_batches
    "CREATE TABLE mysqlq_live LIKE mysqlq_jobs",
    "ALTER TABLE mysqlq_live DROP INDEX mysqlq_jobs_ready, DROP INDEX mysqlq_jobs_dedupe, DROP INDEX mysqlq_jobs_state,"
    " DROP INDEX mysqlq_jobs_scheduled, MODIFY batch_id BIGINT UNSIGNED NOT NULL DEFAULT 0,"
    " ADD KEY mysqlq_live_claim (queue, batch_id, priority, id)",
    "INSERT INTO mysqlq_live SELECT * FROM mysqlq_jobs WHERE status = 'ready'",
    "DELETE FROM mysqlq_jobs WHERE status = 'ready'",
    "ALTER TABLE mysqlq_jobs DROP INDEX mysqlq_jobs_ready, DROP INDEX mysqlq_jobs_dedupe, FORCE",
]
def split_unfinished(cur: Any) -> bool:
    """``split`` keeps the jobs not finished yet in mysqlq_live."""
    cur.execute("SELECT EXISTS(SELECT 1 FROM mysqlq_live)")
    return bool(cur.fetchone()[0]) or pending(cur)


SPLIT_POLL_READY = ("(SELECT 1 FROM mysqlq_live FORCE INDEX (mysqlq_live_claim)"
                    " WHERE queue IN ({ids}) AND batch_id = 0 LIMIT 1) AS has_ready")
SPLIT_COLUMNS = ("id, queue, handler, payload, status, priority, run_at, attempts, max_attempts, time_limit, batch_id,"
                 " worker_id, worker, lease_until, enqueued_at, started_at, finished_at, dedupe_key, last_error,"
                 " dedupe_scope, ready_queue, running_batch, scheduled_at, concurrency_key, result, dependents,"
                 " waiting_for, snoozes, progress, progress_note, tags, trace_context, run_trace_context")
SPLIT_DONE = {"status": "'done'", "attempts": "l.attempts + 1", "started_at": "b.claimed_at", "finished_at": "NOW(6)",
              "dedupe_key": "IF(l.dedupe_scope = 'active', NULL, l.dedupe_key)", "ready_queue": "NULL",
              "running_batch": "NULL", "scheduled_at": "NULL", "worker_id": "b.worker_id", "worker": "b.worker"}
SPLIT_SELECT = ", ".join(SPLIT_DONE.get(c.strip(), f"l.{c.strip()}") for c in SPLIT_COLUMNS.split(","))
SPLIT_STATEMENTS = {
    "claim_batch": """INSERT IGNORE INTO mysqlq_batches (batch_id, worker_id, worker, claimed_at, lease_until)
VALUES (%(batch_id)s, %(worker_id)s, %(worker)s, NOW(6), NOW(6) + INTERVAL %(lease_us)s MICROSECOND);
UPDATE mysqlq_live FORCE INDEX (mysqlq_live_claim) SET batch_id = %(batch_id)s
 WHERE queue = %(queue)s AND batch_id = 0 ORDER BY queue, batch_id, priority, id LIMIT %(limit)s;
""",
    "fetch_batch": """SELECT id, queue, handler, payload, attempts + 1, max_attempts, time_limit, concurrency_key,
       snoozes, tags, trace_context, waiting_for IS NOT NULL
  FROM mysqlq_live FORCE INDEX (mysqlq_live_claim)
 WHERE queue = 'default' AND batch_id = %(batch_id)s ORDER BY priority, id;
""",
    # the batch's row not ended is the fence of both the copy and the delete; IGNORE: jobs of the batch that
    # complete_jobs copied already (their live rows go with the batch's)
    "complete_batch": f"""START TRANSACTION;
INSERT IGNORE INTO mysqlq_jobs ({SPLIT_COLUMNS})
SELECT {SPLIT_SELECT}
  FROM mysqlq_batches b JOIN mysqlq_live l FORCE INDEX (mysqlq_live_claim)
 WHERE b.batch_id = %(batch_id)s AND b.ended = 0 AND l.queue = 'default' AND l.batch_id = %(batch_id)s
   AND l.dependents IS NULL;
DELETE l FROM mysqlq_batches b JOIN mysqlq_live l
 WHERE b.batch_id = %(batch_id)s AND b.ended = 0 AND l.queue = 'default' AND l.batch_id = %(batch_id)s
   AND l.dependents IS NULL;
UPDATE mysqlq_batches SET ended = 1 WHERE batch_id = %(batch_id)s;
COMMIT;
""",
    # part of a batch, before its end: copied now (the batch's completion then copies only the others)
    "complete_jobs": f"""INSERT IGNORE INTO mysqlq_jobs ({SPLIT_COLUMNS})
SELECT {SPLIT_SELECT}
  FROM mysqlq_batches b JOIN mysqlq_live l
 WHERE b.batch_id = %s AND b.ended = 0 AND l.batch_id = b.batch_id AND l.id IN ({{ids}}) AND l.dependents IS NULL;
""",
    # jobs a claim took blind and gives back: claimable again
    "release_jobs": """UPDATE mysqlq_live SET batch_id = 0 WHERE batch_id = %s AND id IN ({ids});
""",
}

# Appended to the copy's mysqlq/store/claims.py: the later definitions are the ones the worker calls
# (it looks them up on the module). The claim's query now has more results: read them all.
CLAIMS_OVERRIDE = '''

# ---- the flag prototype (scripts/benchmark/w1flag.py)


def claim_and_fetch(conn, queue, batch_id, worker_id, worker, lease, limit, ended=None):  # type: ignore[no-redef]
    params = _claim_params(queue, batch_id, worker_id, worker, lease, limit)
    if ended is not None:
        params["ended_batch_id"] = ended
    literal = conn.literal
    escaped = {name.encode(): literal(value) for name, value in params.items()}
    conn.query(_claim_query_bytes(ended is not None) % escaped)
    results = []
    while True:
        res = conn.store_result()
        results.append((int(conn.affected_rows()), res.fetch_row(0) if res is not None else None))
        if conn.next_result() != 0:
            break
    # the completion's statements (the one that writes the jobs at JOBS), the claim's two, the read-back
    completed = results[JOBS][0] if ended is not None else None
    return completed, results[-2][0], claimed_jobs(results[-1][1] or ())


def complete_batch(cur, batch_id):  # type: ignore[no-redef]
    execute(cur, "complete_batch", {"batch_id": batch_id})
    counts = [cur.rowcount]
    while cur.nextset():
        counts.append(cur.rowcount)
    return int(counts[JOBS])
'''

_HEADER = re.compile(r"^-- name: (\w+)\s*$", re.MULTILINE)


class DoesNotApply(SystemExit):
    def __init__(self, what: str) -> None:
        super().__init__(f"W1flag: the prototype no longer applies to this checkout: {what}")


def replace_statements(text: str, bodies: dict[str, str]) -> str:
    """``text`` (a .sql file of named statements) with the statements named in ``bodies`` replaced."""
    chunks = _HEADER.split(text)
    seen = set()
    for index in range(1, len(chunks), 2):
        name = chunks[index]
        if name in bodies:
            chunks[index + 1] = "\n" + bodies[name] + "\n"
            seen.add(name)
    missing = set(bodies) - seen
    if missing:
        raise DoesNotApply(f"no statement named {', '.join(sorted(missing))}")
    return chunks[0] + "".join(f"-- name: {chunks[i]}{chunks[i + 1]}" for i in range(1, len(chunks), 2))


@dataclass(frozen=True)
class Prototype:
    """A design as the worker would run it: its tables (made after the fill), the statements it sends
    instead of today's, the poll's ready check, the position of the completion's statement that
    writes the jobs (the count the worker checks), and text to replace in every statement."""

    setup: list[str]
    statements: dict[str, str]
    poll_ready: str
    jobs_at: int
    rewrite: tuple[tuple[str, str], ...] = ()
    unfinished: Callable[[Any], bool] = pending  # whether any job is not finished yet


ALL_PROTOTYPES = {
    "flag": Prototype(SETUP, STATEMENTS, FLAG_POLL_READY, 1),  # START TRANSACTION; the jobs' UPDATE; …
    "inplace": Prototype(INPLACE_SETUP, INPLACE_STATEMENTS, INPLACE_POLL_READY, 0,
                         (("running_batch IS NOT NULL", "running_batch > 0"),)),
    # (no statement the worker runs during W1 may force the indexes the history lost)
    "split": Prototype(SPLIT_SETUP, SPLIT_STATEMENTS, SPLIT_POLL_READY, 1,
                       (("FORCE INDEX (mysqlq_jobs_ready)", ""),), split_unfinished),
}
# MYSQLQ_BENCH_W1FLAG=inplace runs only the prototypes it names (comma-separated)
PROTOTYPES = {name: ALL_PROTOTYPES[name]
              for name in (os.environ.get("MYSQLQ_BENCH_W1FLAG", "").replace(" ", "").split(",")
                           if os.environ.get("MYSQLQ_BENCH_W1FLAG") else ALL_PROTOTYPES)
              if name in ALL_PROTOTYPES}


def make_overlay(folder: pathlib.Path, design: Prototype) -> None:
    """A copy of this checkout's mysqlq in ``folder``, with the design's statements and functions."""
    package = folder / "mysqlq"
    shutil.copytree(HERE.parent.parent / "mysqlq", package, ignore=shutil.ignore_patterns("__pycache__"))
    sql_folder = package / "store" / "sql"
    sql = sql_folder / "queries.sql"
    text = sql.read_text(encoding="utf-8")
    if POLL_READY not in text:
        raise DoesNotApply("the poll's ready check changed")
    sql.write_text(replace_statements(text.replace(POLL_READY, design.poll_ready), design.statements),
                   encoding="utf-8")
    for path in sql_folder.glob("*.sql"):
        text = path.read_text(encoding="utf-8")
        for old, new in design.rewrite:
            text = text.replace(old, new)
        path.write_text(text, encoding="utf-8")
    claims = package / "store" / "claims.py"
    source = claims.read_text(encoding="utf-8")
    for needed in ("def _claim_params(", "def _claim_query_bytes(", "def claim_and_fetch(", "def complete_batch(",
                   "from mysqlq.store import dependencies, execute"):
        if needed not in source:
            raise DoesNotApply(f"mysqlq/store/claims.py has no {needed!r}")
    claims.write_text(source + CLAIMS_OVERRIDE.replace("JOBS", str(design.jobs_at)), encoding="utf-8")
    # Byte-compiled first, so that no worker compiles the copy as it starts (its CPU would count it).
    subprocess.run([sys.executable, "-m", "compileall", "-q", str(package)], check=True, stdout=subprocess.DEVNULL)


def tables(design: Prototype) -> Callable[[Any], None]:
    def make(cur: Any) -> None:
        for statement in design.setup:
            cur.execute(statement)
    return make


def rebuilt(cur: Any) -> None:
    cur.execute("ALTER TABLE mysqlq_jobs FORCE")


def w1_flag(bench: Bench, sizes: Sizes) -> list[Figure]:
    n = sizes.w1_jobs
    figures = {k: Figure("W1flag", {"k": str(k), "batch": BATCH, "n": str(n)},
                         spread=("flag_jobs_s", "flag_server_us_job", "flag_server_vs_batch100", "flag_ratio_bare100",
                                 "flag_ratio_bare100_steady", "inplace_server_vs_batch100"))
               for k in (2, 4)}
    with tempfile.TemporaryDirectory(prefix="mysqlq-w1flag-") as folder:
        copies = {}
        for name, design in PROTOTYPES.items():
            copies[name] = pathlib.Path(folder) / name
            make_overlay(copies[name], design)
        for run in range(bench.runs):
            for k in (2, 4):
                note(f"W1flag run {run + 1}, K={k}: the worker (batch {BATCH}), at batch 100, the prototypes "
                     f"({', '.join(PROTOTYPES)}), the bare loop at 100")
                today = drain_mysqlq(bench, f"w1flag_today_k{k}_r{run}", k, n, after_fill=rebuilt)
                old = drain_mysqlq(bench, f"w1flag_b100_k{k}_r{run}", k, n, options=["--batch-size", "100"],
                                   after_fill=rebuilt)
                bare = drain_bare(bench, f"w1flag_bare_k{k}_r{run}", k, n, batch=100)
                figure = figures[k]
                figure.add(
                    jobs_s=today.jobs_s, server_us_job=today.server_us_job, cpu_us_job=today.cpu_us_job,
                    batch100_jobs_s=old.jobs_s, batch100_server_us_job=old.server_us_job,
                    batch100_cpu_us_job=old.cpu_us_job,
                    bare100_jobs_s=bare.jobs_s, bare100_server_us_job=bare.server_us_job,
                    bare100_cpu_us_job=bare.cpu_us_job,
                    default_server_vs_batch100=today.server_us_job / old.server_us_job,
                    ratio_bare100=today.jobs_s / bare.jobs_s, batch100_ratio_bare100=old.jobs_s / bare.jobs_s,
                    # from the first claim to the last completion: without the workers' start-up
                    ratio_bare100_steady=today.steady_jobs_s / bare.steady_jobs_s,
                    batch100_ratio_bare100_steady=old.steady_jobs_s / bare.steady_jobs_s)
                for name, design in PROTOTYPES.items():
                    d = drain_mysqlq(bench, f"w1flag_{name}_k{k}_r{run}", k, n, after_fill=tables(design),
                                     env={"PYTHONPATH": str(copies[name])}, unfinished=design.unfinished)
                    figure.add(**{
                        f"{name}_jobs_s": d.jobs_s, f"{name}_server_us_job": d.server_us_job,
                        f"{name}_cpu_us_job": d.cpu_us_job,
                        f"{name}_server_vs_batch100": d.server_us_job / old.server_us_job,
                        f"{name}_server_vs_default": d.server_us_job / today.server_us_job,
                        f"{name}_ratio_bare100": d.jobs_s / bare.jobs_s,
                        f"{name}_ratio_bare100_steady": d.steady_jobs_s / bare.steady_jobs_s})
    return [emit(figures[k]) for k in (2, 4)]
