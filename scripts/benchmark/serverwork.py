"""serverwork: where the server's time goes, per statement and per index, in one W1-like drain.

Two burst workers drain 20,000 no-op jobs (5,000 with ``--quick``); beside them, the bare-SQL loop
and its ceiling (mysqlq's own claim, read-back and completion run by the bare loop) drain as many.
Each of the three is drained three times per run, each time on a fresh database:

- **counted**: performance_schema collects (``events_statements_summary_by_digest``: calls, timer,
  rows examined and affected per statement; ``table_io_waits_summary_by_index_usage``: fetches,
  inserts, updates and deletes through each index), and ``SHOW GLOBAL STATUS`` (``Handler_*``,
  ``Innodb_rows_*``, the redo log's LSN, bytes written) and InnoDB's purge counters
  (``information_schema.INNODB_METRICS``) are read before and after, and again once purge has
  caught up;
- **timed**: performance_schema's instrumentation off (it has a cost of its own), the server's CPU
  (utime + stime of its process, from ``/proc``) before and after, and once purge has caught up;
- **changes**: triggers on every table count, per index, the rows whose key it holds changed (an
  index entry delete-marked and another inserted: what an UPDATE costs each secondary index), the
  clustered records rewritten and the columns changed (the triggers' own work is on this drain only).

Per-job figures only: the machine may be shared, so nothing here is a rate. It starts its own
private server with ``--performance-schema=ON`` (the other sections' servers run without it, as a
MariaDB does by default); with ``MYSQLQ_DSN`` it uses that server and reads performance_schema only
if it is on there.
"""

from __future__ import annotations

import json
import re
import subprocess
import sys
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

import MySQLdb
from MySQLdb.constants import CLIENT
from mysqlq_harness.jobs import every_job

import mysqlq
from benchmark import bare as bench_bare
from benchmark.common import (
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
    status_counts,
    tail,
    write_json,
)
from benchmark.shared import BATCH, ceiling_statements, cpu_since, server_cpu
from mysqlq.store import claims
from mysqlq.store.sql import queries

K = 2
LOOPS = ("mysqlq", "ceiling", "bare")
LOOP_TITLES = {"mysqlq": "mysqlq (2 burst workers)", "ceiling": "mysqlq's statements in the bare loop",
               "bare": "bare loop"}
SERVER_OPTIONS = ["--performance-schema=ON"]
# InnoDB counters of information_schema.INNODB_METRICS read beside SHOW GLOBAL STATUS (enabled first;
# most are off by default): how much undo the drain left for purge, and the history list's length.
METRICS = ("purge_undo_log_pages", "purge_del_mark_records", "purge_upd_exist_or_extern_records",
           "trx_rw_commits", "trx_rseg_history_len")
PURGE_WAIT = 60.0  # seconds to wait at most for purge to empty the history list after a drain
PURGE_STILL = 1.0  # seconds without progress after which purge is taken to be done
CHANGES_TABLE = "serverwork_changes"


def main(quick: bool, runs: int, json_path: str | None = None) -> int:
    n = 5000 if quick else 20_000
    started = time.perf_counter()
    bench = Bench(quick, runs, options=SERVER_OPTIONS)
    figures: list[Figure] = []
    try:
        print(f"# server: {bench.where}: {bench.server_info}")
        print(f"# serverwork: {K} burst workers / bare drainers, {n} no-op jobs, batch {BATCH}, runs={runs}",
              flush=True)
        probe = Probe(bench)
        if not probe.performance_schema:
            note("performance_schema is off on this server: statement and index figures left out")
        results: dict[str, list[Result]] = {loop: [] for loop in LOOPS}
        for run in range(runs):
            for loop in LOOPS:
                note(f"serverwork run {run + 1}: {loop}, counted (performance_schema collecting)")
                results[loop].append(probe.counted(loop, f"swc_{loop}_r{run}", n))
            for loop in LOOPS:
                note(f"serverwork run {run + 1}: {loop}, timed (instrumentation off)")
                probe.timed(loop, f"swt_{loop}_r{run}", n, results[loop][-1])
            for loop in LOOPS:
                note(f"serverwork run {run + 1}: {loop}, index changes counted by triggers")
                probe.changes(loop, f"swx_{loop}_r{run}", n, results[loop][-1])
        figures = [emit(fig) for fig in figures_of(results)]
        print()
        print(report(results, bench))
    finally:
        bench.close()
    if json_path:
        write_json(json_path, figures, {"section": "serverwork", "server": bench.server_info, "jobs": n})
    print(f"\n# total {time.perf_counter() - started:.0f} s")
    return 0


# ---------------------------------------------------------------------------- one drain's findings


@dataclass
class Result:
    """What one run found for one loop, as totals over its ``jobs`` (per-job figures divide)."""

    jobs: int
    table: str  # the queue table: mysqlq_jobs, or the bare loop's job_queue
    status: dict[str, float] = field(default_factory=dict)  # deltas over the drain
    purged: dict[str, float] = field(default_factory=dict)  # deltas from the drain's start until purge caught up
    statements: dict[str, dict[str, float]] = field(default_factory=dict)  # label -> sums
    indexes: dict[str, dict[str, float]] = field(default_factory=dict)  # table.index -> P_S counts
    changes: dict[str, float] = field(default_factory=dict)  # table.index (or columns) -> count
    server_cpu: float = float("nan")  # s, instrumentation off
    server_cpu_purged: float = float("nan")  # s, until purge caught up
    server_cpu_counted: float = float("nan")  # s, performance_schema collecting
    row_bytes: float = float("nan")  # the queue table's data length / rows after the drain


class Probe:
    """The drains and the server's counters around them."""

    def __init__(self, bench: Bench) -> None:
        self.bench = bench
        self.cur = bench.cur
        self.mariadb = "mariadb" in bench.server_version.lower()
        self.cur.execute("SELECT @@performance_schema")
        self.performance_schema = bool(int(self.cur.fetchone()[0]))
        self.cpu_column = False
        if self.performance_schema:
            # MySQL 8.0.28+ also times each statement's CPU (a consumer off by default); MariaDB has none.
            self.cur.execute("UPDATE performance_schema.setup_consumers SET ENABLED = 'YES'"
                             " WHERE NAME IN ('events_statements_cpu', 'statements_digest', 'global_instrumentation',"
                             "                'thread_instrumentation', 'events_statements_current',"
                             "                'events_statements_history')")
            self.cur.execute("UPDATE performance_schema.setup_instruments SET ENABLED = 'YES', TIMED = 'YES'"
                             " WHERE NAME = 'wait/io/table/sql/handler' OR NAME LIKE 'statement/sql/%'")
            self.cur.execute("SELECT COUNT(*) FROM information_schema.COLUMNS WHERE TABLE_SCHEMA = 'performance_schema'"
                             " AND TABLE_NAME = 'events_statements_summary_by_digest' AND COLUMN_NAME = 'SUM_CPU_TIME'")
            self.cpu_column = bool(self.cur.fetchone()[0])
        for name in METRICS:
            self.cur.execute("SET GLOBAL innodb_monitor_enable = %s", (name,))
        self.labels = Labels()
        # What reading the counters costs by itself (SHOW GLOBAL STATUS reads rows too): taken off each delta.
        first = self.snapshot()
        self.own = diff(self.snapshot(), first)

    # -------------------------------------------------------------------- the three drains

    def counted(self, loop: str, name: str, n: int) -> Result:
        dsn = self.prepare(loop, name, n)
        self.instrument(True)
        self.wait_purged()  # what the drain before left
        if self.performance_schema:
            if loop != "bare":
                self.calibrate(dsn)
            self.cur.execute("TRUNCATE TABLE performance_schema.events_statements_summary_by_digest")
            self.cur.execute("TRUNCATE TABLE performance_schema.table_io_waits_summary_by_index_usage")
        before, cpu = self.snapshot(), server_cpu(self.bench)
        self.drain(loop, dsn, name, n)
        cpu_after = server_cpu(self.bench)
        after = self.snapshot()
        result = Result(n, queue_table(loop), status=minus(diff(after, before), self.own),
                        server_cpu_counted=cpu_since(cpu_after, cpu))
        if self.performance_schema:
            result.statements = self.statements(dsn.database)
            result.indexes = self.index_usage(dsn.database)
        if self.wait_purged(before.get("metric.trx_rseg_history_len", 0.0)):
            result.purged = minus(diff(self.snapshot(), before), self.own)
        self.done(loop, dsn, n)
        return result

    def timed(self, loop: str, name: str, n: int, result: Result) -> None:
        dsn = self.prepare(loop, name, n)
        self.instrument(False)
        self.wait_purged()  # what the drain before left
        level, cpu = self.history_length(), server_cpu(self.bench)
        self.drain(loop, dsn, name, n)
        result.server_cpu = cpu_since(server_cpu(self.bench), cpu)
        if self.wait_purged(level):
            result.server_cpu_purged = cpu_since(server_cpu(self.bench), cpu)
        self.instrument(True)
        self.done(loop, dsn, n)

    def changes(self, loop: str, name: str, n: int, result: Result) -> None:
        dsn = self.prepare(loop, name, n)
        conn = self.bench.connect(dsn)
        cur = conn.cursor()
        create_counting_triggers(cur, dsn.database, self.mariadb)
        self.drain(loop, dsn, name, n)
        cur.execute(f"SELECT tbl, idx, SUM(n) FROM {CHANGES_TABLE} GROUP BY tbl, idx")
        result.changes = {f"{tbl}.{idx}": float(total) for tbl, idx, total in cur.fetchall()}
        table = queue_table(loop)
        cur.execute(f"ANALYZE TABLE {table}")
        cur.fetchall()
        cur.execute("SELECT DATA_LENGTH, TABLE_ROWS FROM information_schema.TABLES"
                    " WHERE TABLE_SCHEMA = DATABASE() AND TABLE_NAME = %s", (table,))
        length, rows = cur.fetchone()
        result.row_bytes = float(length) / float(rows) if rows else float("nan")
        conn.close()
        self.done(loop, dsn, n)

    # -------------------------------------------------------------------- drains

    def prepare(self, loop: str, name: str, n: int) -> mysqlq.Dsn:
        """A fresh database holding ``n`` ready jobs for ``loop``."""
        dsn = self.bench.fresh(name, migrate=loop != "bare")
        conn = self.bench.connect(dsn)
        cur = conn.cursor()
        if loop == "bare":
            bench_bare.create_table(cur)
            bench_bare.fill(cur, [payload_bytes(i) for i in range(n)])
        else:
            fill_jobs(cur, n)
        conn.close()
        return dsn

    def drain(self, loop: str, dsn: mysqlq.Dsn, name: str, n: int) -> None:
        """K burst workers (or bare drainers) on ``dsn``, until every one of them has left."""
        timeout = max(120.0, n / 20)
        if loop == "mysqlq":
            workers = self.bench.workers(dsn, K, "--burst", tag=name)
            try:
                for worker, proc in workers.procs.items():
                    if proc.wait(timeout) != 0:
                        raise RuntimeError(f"{name}: worker {worker} exited with {proc.returncode}:\n"
                                           + tail(workers.log))
            finally:
                workers.stop()
            workers.log.unlink(missing_ok=True)
            return
        args = [sys.executable, str(HERE / "bare.py"), "drain", "--conn",
                json.dumps(connect_kwargs(dsn, dsn.database)), "--batch", BATCH]
        if loop == "ceiling":
            args += ["--statements", ceiling_statements()]
        procs = [subprocess.Popen(args, stdout=subprocess.PIPE, env=clean_env({})) for _ in range(K)]
        for proc in procs:
            proc.communicate(timeout=timeout)
        if any(proc.returncode for proc in procs):
            raise RuntimeError(f"{name}: a bare drainer failed")

    def done(self, loop: str, dsn: mysqlq.Dsn, n: int) -> None:
        """Check that every job was done, then drop the database."""
        conn = self.bench.connect(dsn)
        cur = conn.cursor()
        if loop == "bare":
            cur.execute("SELECT COUNT(*) FROM job_queue WHERE status = 2")
            found: Any = int(cur.fetchone()[0])
        else:
            cur.execute(f"SELECT COUNT(*) FROM {every_job('status')} WHERE status = 'done'")
            found = int(cur.fetchone()[0])
            if found != n:
                found = status_counts(cur)
        conn.close()
        if found != n:
            raise RuntimeError(f"{dsn.database}: expected {n} done jobs, found {found}")
        self.bench.drop(dsn.database)

    # -------------------------------------------------------------------- the server's counters

    def instrument(self, on: bool) -> None:
        if self.performance_schema:
            self.cur.execute("UPDATE performance_schema.setup_consumers SET ENABLED = %s"
                             " WHERE NAME = 'global_instrumentation'", ("YES" if on else "NO",))

    def snapshot(self) -> dict[str, float]:
        """Every numeric global status variable, and the INNODB_METRICS counters of METRICS."""
        found: dict[str, float] = {}
        self.cur.execute("SHOW GLOBAL STATUS")
        for name, value in self.cur.fetchall():
            try:
                found[str(name)] = float(value)
            except (TypeError, ValueError):
                continue
        self.cur.execute("SELECT NAME, COUNT FROM information_schema.INNODB_METRICS WHERE NAME IN ("
                         + ", ".join(["%s"] * len(METRICS)) + ")", METRICS)
        for name, count in self.cur.fetchall():
            found[f"metric.{name}"] = float(count)
        return found

    def history_length(self) -> float:
        self.cur.execute("SELECT COUNT FROM information_schema.INNODB_METRICS WHERE NAME = 'trx_rseg_history_len'")
        row = self.cur.fetchone()
        return float(row[0]) if row else 0.0

    def wait_purged(self, level: float = 0.0) -> bool:
        """Until purge has shortened the history list to ``level`` (where it was before the drain),
        or has made no progress for PURGE_STILL seconds, or PURGE_WAIT seconds have passed; whether
        it got there. (MariaDB purges at once; MySQL leaves a short history list for its purge's
        next round, up to seconds later, which this does not wait for.)"""
        deadline = time.monotonic() + PURGE_WAIT
        length, still_since = self.history_length(), time.monotonic()
        while length > level and time.monotonic() < deadline and time.monotonic() - still_since < PURGE_STILL:
            time.sleep(0.05)
            now = self.history_length()
            if now < length:
                still_since = time.monotonic()
            length = now
        return length <= level

    def calibrate(self, dsn: mysqlq.Dsn) -> None:
        """Learn the digests of the statements the worker sends several to a query (its claim's query:
        the ended batch's completion, the claim, the read-back). MariaDB shows each later statement's
        digest with the first one's text, so they are named by running the queries once (claiming and
        completing nothing) and reading the digests of this connection's last statements, in order."""
        fixed = {"worker_id": 0, "worker": "serverwork", "lease_us": 0, "queue": "default", "limit": 0,
                 "batch_id": 0, "ended_batch_id": 0}
        conn = MySQLdb.connect(autocommit=True, charset="utf8mb4", client_flag=CLIENT.MULTI_STATEMENTS,
                               **connect_kwargs(dsn, dsn.database))
        try:
            cur = conn.cursor()
            for ended, names in ((False, ("claim_batch", "fetch_batch")),
                                 (True, ("complete_batch", "claim_batch", "fetch_batch"))):
                cur.execute(claims.claim_query(ended), fixed)
                while cur.nextset():
                    pass
                cur.execute("SELECT DIGEST FROM performance_schema.events_statements_history"
                            " WHERE THREAD_ID = (SELECT THREAD_ID FROM performance_schema.threads"
                            "                     WHERE PROCESSLIST_ID = CONNECTION_ID())"
                            " ORDER BY EVENT_ID DESC LIMIT %s", (len(names),))
                digests = [str(row[0]) for row in reversed(cur.fetchall())]
                self.labels.digests.update(zip(digests, names, strict=True))
        finally:
            conn.close()

    def statements(self, database: str) -> dict[str, dict[str, float]]:
        """The drain's statements by digest (named after mysqlq's queries or the bare loop's), summed."""
        cpu = ", SUM_CPU_TIME" if self.cpu_column else ", 0"
        self.cur.execute("SELECT DIGEST, DIGEST_TEXT, COUNT_STAR, SUM_TIMER_WAIT, SUM_LOCK_TIME, SUM_ROWS_EXAMINED,"
                         f" SUM_ROWS_AFFECTED, SUM_ROWS_SENT{cpu}"
                         " FROM performance_schema.events_statements_summary_by_digest WHERE SCHEMA_NAME = %s",
                         (database,))
        found: dict[str, dict[str, float]] = {}
        for digest, text, calls, timer, lock, examined, affected, sent, cpu_ps in self.cur.fetchall():
            sums = found.setdefault(self.labels.name(str(digest), str(text or "")), {})
            for key, value in (("calls", calls), ("time_us", timer / 1e6), ("lock_us", lock / 1e6),
                               ("rows_examined", examined), ("rows_affected", affected), ("rows_sent", sent),
                               ("cpu_us", (cpu_ps or 0) / 1e6)):
                sums[key] = sums.get(key, 0.0) + float(value)
        return found

    def index_usage(self, database: str) -> dict[str, dict[str, float]]:
        """Rows fetched, inserted, updated and deleted through each index (performance_schema's own
        attribution: the index a statement reached the row by; NULL, no index: inserts and scans)."""
        self.cur.execute("SELECT OBJECT_NAME, INDEX_NAME, COUNT_FETCH, COUNT_INSERT, COUNT_UPDATE, COUNT_DELETE,"
                         " SUM_TIMER_WAIT FROM performance_schema.table_io_waits_summary_by_index_usage"
                         " WHERE OBJECT_SCHEMA = %s AND COUNT_STAR > 0", (database,))
        return {f"{table}.{index or '(none)'}": {"fetch": float(f), "insert": float(i), "update": float(u),
                                                 "delete": float(d), "time_us": float(t) / 1e6}
                for table, index, f, i, u, d, t in self.cur.fetchall()}


def queue_table(loop: str) -> str:
    return "job_queue" if loop == "bare" else "mysqlq_jobs"


def diff(after: dict[str, float], before: dict[str, float]) -> dict[str, float]:
    return {name: value - before[name] for name, value in after.items() if name in before}


def minus(delta: dict[str, float], own: dict[str, float]) -> dict[str, float]:
    """A delta less what the measurement itself added (gauges such as the history length stay)."""
    return {name: value - (own.get(name, 0.0) if not name.endswith("history_len") else 0.0)
            for name, value in delta.items()}


# ---------------------------------------------------------------------------- statements' names


class Labels:
    """Names digests after the statement they come from: mysqlq's named queries (``claim_batch`` …)
    or the bare loop's (``bare claim`` …), by their words with every value left out; a digest
    matching none is named by its first words."""

    def __init__(self) -> None:
        known = {**queries(), "bare claim": bench_bare.CLAIM, "bare fetch": bench_bare.FETCH,
                 "bare ack": bench_bare.ACK}
        self.known: dict[str, list[str]] = {str(name): words(str(sql)) for name, sql in known.items()}
        self.digests: dict[str, str] = {}  # learnt by Probe.calibrate

    def name(self, digest: str, digest_text: str) -> str:
        if digest in self.digests:
            return self.digests[digest]
        found = words(digest_text)
        best, length = "", 0
        for name, known in self.known.items():
            common = 0
            for a, b in zip(found, known, strict=False):
                if a != b:
                    break
                common += 1
            exact = common == len(found) == len(known)
            if exact:
                return name
            if common > length:
                best, length = name, common
        if length >= min(12, len(found)) and length > 3:
            return best
        return " ".join(digest_text.split()[:8])[:60]


_STRING = re.compile(r"'(?:[^'\\]|\\.)*'")
_PLACEHOLDER = re.compile(r"%\(\w+\)s|%s|\{\w+\}")
_WORD = re.compile(r"[a-z_][a-z0-9_]*")
_NOISE = {"null"}  # a digest shows NULL where the statement had a value, and as it had NULL


def words(sql: str) -> list[str]:
    """The identifiers and keywords of a statement, lower case, without its values."""
    text = _PLACEHOLDER.sub(" ", _STRING.sub(" ", sql)).replace("`", "").lower()
    return [w for w in _WORD.findall(text) if w not in _NOISE]


# ---------------------------------------------------------------------------- counting index changes


def create_counting_triggers(cur: Any, database: str, mariadb: bool) -> None:
    """Triggers on every table of ``database`` that count, per connection (no lock shared between
    workers), per index, the rows whose key in it changed; the clustered records rewritten (every
    update); and the columns an update changed. An insert or delete counts once in every index."""
    cur.execute(f"CREATE TABLE {CHANGES_TABLE} (tbl VARCHAR(64) NOT NULL, idx VARCHAR(80) NOT NULL,"
                " conn BIGINT UNSIGNED NOT NULL, n BIGINT NOT NULL, PRIMARY KEY (tbl, idx, conn)) ENGINE=InnoDB")
    cur.execute("SELECT TABLE_NAME, INDEX_NAME, COLUMN_NAME FROM information_schema.STATISTICS"
                " WHERE TABLE_SCHEMA = %s AND TABLE_NAME <> %s AND COLUMN_NAME IS NOT NULL"
                " ORDER BY TABLE_NAME, INDEX_NAME, SEQ_IN_INDEX", (database, CHANGES_TABLE))
    indexes: dict[str, dict[str, list[str]]] = {}
    for table, index, column in cur.fetchall():
        indexes.setdefault(str(table), {}).setdefault(str(index), []).append(str(column))
    cur.execute("SELECT TABLE_NAME, COLUMN_NAME FROM information_schema.COLUMNS WHERE TABLE_SCHEMA = %s"
                " AND TABLE_NAME <> %s ORDER BY TABLE_NAME, ORDINAL_POSITION", (database, CHANGES_TABLE))
    columns: dict[str, list[str]] = {}
    for table, column in cur.fetchall():
        columns.setdefault(str(table), []).append(str(column))
    # MySQL 8.0.20+ deprecates VALUES() in ON DUPLICATE KEY UPDATE (a warning per statement); MariaDB
    # has no row alias.
    add = (" ON DUPLICATE KEY UPDATE n = n + VALUES(n)" if mariadb
           else f" AS c ON DUPLICATE KEY UPDATE n = {CHANGES_TABLE}.n + c.n")

    def counting(table: str, values: Sequence[tuple[str, str]]) -> str:
        rows = ", ".join(f"('{table}', '{idx}', CONNECTION_ID(), {expr})" for idx, expr in values)
        return f"INSERT INTO {CHANGES_TABLE} (tbl, idx, conn, n) VALUES {rows}{add}"

    def changed(column: str) -> str:
        return f"(NOT (OLD.`{column}` <=> NEW.`{column}`))"

    for table, by_index in indexes.items():
        updated = [("(rows rewritten)", "1"),
                   ("(columns changed)", " + ".join(changed(c) for c in columns[table]))]
        updated += [(index, "(" + " OR ".join(changed(c) for c in cols) + ")")
                    for index, cols in by_index.items() if index != "PRIMARY"]
        once = [(index, "1") for index in by_index]
        for event, values in (("UPDATE", updated), ("INSERT", once), ("DELETE", once)):
            cur.execute(f"CREATE TRIGGER `sw_{table}_{event.lower()}` AFTER {event} ON `{table}` FOR EACH ROW "
                        + counting(table, values))


# ---------------------------------------------------------------------------- figures and the report


def statement_per_job(results: Sequence[Result], label: str, key: str) -> float:
    """The median over the runs of a statement's figure divided by the run's jobs."""
    return median([r.statements.get(label, {}).get(key, 0.0) / r.jobs for r in results])


def index_per_job(results: Sequence[Result], index: str, key: str) -> float:
    return median([r.indexes.get(index, {}).get(key, 0.0) / r.jobs for r in results])


HANDLER_READS = ("Handler_read_first", "Handler_read_key", "Handler_read_last", "Handler_read_next",
                 "Handler_read_prev", "Handler_read_rnd", "Handler_read_rnd_next", "Handler_read_rnd_deleted",
                 "Handler_read_retry")


def redo_bytes(status: dict[str, float]) -> float:
    """The redo log generated: LSN advance (MariaDB: Innodb_lsn_current; MySQL: Innodb_redo_log_current_lsn)."""
    for name in ("Innodb_lsn_current", "Innodb_redo_log_current_lsn"):
        if name in status:
            return status[name]
    return float("nan")


def secondary_changes(result: Result, table: str) -> float:
    prefix = f"{table}."
    return sum(v for k, v in result.changes.items()
               if k.startswith(prefix) and not k.endswith((".PRIMARY", ")")))


@dataclass
class Row:
    key: str  # the metric's name in the figure lines (``_job`` added: per job)
    what: str  # its name in the table
    get: Callable[[Result], float]  # a run's total
    scale: float = 1.0  # per job × scale (e.g. per 1,000 jobs)
    per_job: bool = True  # False: the total is the figure (a row's width)

    def value(self, result: Result) -> float:
        return self.get(result) / result.jobs * self.scale if self.per_job else self.get(result)

    @property
    def metric(self) -> str:
        if not self.per_job:
            return self.key
        return self.key + ("_job" if self.scale == 1 else f"_per_{self.scale:g}_jobs")


def main_rows(results: dict[str, list[Result]]) -> list[Row]:
    def status(name: str) -> Callable[[Result], float]:
        return lambda r: r.status.get(name, float("nan"))

    def purged(name: str) -> Callable[[Result], float]:
        return lambda r: r.purged.get(name, float("nan"))

    def statement_sum(key: str) -> Callable[[Result], float]:
        return lambda r: sum(s[key] for s in r.statements.values()) if r.statements else float("nan")

    def queue_table_changes(index: str) -> Callable[[Result], float]:
        return lambda r: r.changes.get(f"{r.table}.{index}", float("nan"))

    rows = [
        Row("server_us", "server CPU, µs (instrumentation off)", lambda r: r.server_cpu * 1e6),
        Row("server_us_purged", "server CPU until purge caught up, µs", lambda r: r.server_cpu_purged * 1e6),
        Row("server_us_counted", "server CPU with performance_schema collecting, µs",
            lambda r: r.server_cpu_counted * 1e6),
        Row("statements", "statements", statement_sum("calls")),
        Row("statement_us", "statement time (performance_schema timer), µs", statement_sum("time_us")),
        Row("rows_examined", "rows examined (performance_schema)", statement_sum("rows_examined")),
        Row("rows_affected", "rows affected", statement_sum("rows_affected")),
        Row("handler_reads", "handler reads (Handler_read_*)",
            lambda r: sum(r.status.get(n, 0.0) for n in HANDLER_READS)),
        Row("handler_update", "Handler_update", status("Handler_update")),
        Row("handler_write", "Handler_write", status("Handler_write")),
        Row("handler_commit", "Handler_commit", status("Handler_commit")),
    ]
    if any("Innodb_rows_read" in r.status for rs in results.values() for r in rs):
        rows += [Row("innodb_rows_read", "Innodb_rows_read", status("Innodb_rows_read")),
                 Row("innodb_rows_updated", "Innodb_rows_updated", status("Innodb_rows_updated"))]
    rows += [
        Row("rows_rewritten", "queue table: clustered records rewritten", queue_table_changes("(rows rewritten)")),
        Row("columns_changed", "queue table: columns changed", queue_table_changes("(columns changed)")),
        Row("entries_changed", "queue table: secondary index entries changed",
            lambda r: secondary_changes(r, r.table)),
    ]
    indexes = sorted({k.split(".", 1)[1] for rs in results.values() for r in rs for k in r.changes
                      if k.startswith(f"{r.table}.") and not k.endswith((".PRIMARY", ")"))})
    rows += [Row(f"entries_changed_{index}", f"— of which {index}", queue_table_changes(index)) for index in indexes]
    rows += [
        Row("row_bytes", "queue table: bytes per row (data length / rows)", lambda r: r.row_bytes, per_job=False),
        Row("redo_bytes", "redo log generated, bytes", lambda r: redo_bytes(r.status)),
        Row("log_written_bytes", "Innodb_os_log_written, bytes", status("Innodb_os_log_written")),
        Row("undo_pages_purged", "undo log pages purged, per 1,000 jobs", purged("metric.purge_undo_log_pages"),
            1000),
        Row("write_transactions", "write transactions committed, per 1,000 jobs", status("metric.trx_rw_commits"),
            1000),
    ]
    return rows


def figures_of(results: dict[str, list[Result]]) -> list[Figure]:
    """One line per loop (the per-job totals), per loop and statement, per loop and index."""
    figures = []
    for loop, rs in results.items():
        fig = Figure("serverwork", {"loop": loop, "n": str(rs[0].jobs)}, spread=("server_us_job",))
        for row in main_rows(results):
            fig.add_list(row.metric, [row.value(r) for r in rs])
        figures.append(fig)
        for label in sorted({s for r in rs for s in r.statements}):
            sfig = Figure("serverwork", {"loop": loop, "statement": label.replace(" ", "_")})
            for key in ("calls", "time_us", "rows_examined", "rows_affected", "rows_sent", "lock_us", "cpu_us"):
                sfig.add_list(f"{key}_job", [r.statements.get(label, {}).get(key, 0.0) / r.jobs for r in rs])
            figures.append(sfig)
        for index in sorted({i for r in rs for i in [*r.indexes, *r.changes]}):
            ifig = Figure("serverwork", {"loop": loop, "index": index.replace(" ", "_")})
            for key in ("fetch", "insert", "update", "delete", "time_us"):
                ifig.add_list(f"{key}_job", [r.indexes.get(index, {}).get(key, 0.0) / r.jobs for r in rs])
            ifig.add_list("changed_job", [r.changes.get(index, 0.0) / r.jobs for r in rs])
            figures.append(ifig)
    return figures


def cell(value: float) -> str:
    return "—" if value != value else fmt(value)  # NaN: not measured (or no such index in that loop)


def report(results: dict[str, list[Result]], bench: Bench) -> str:
    """Three markdown tables: per job, side by side; per statement; per index."""
    lines = [f"Per job, {results['mysqlq'][0].jobs} no-op jobs drained by {K} processes, medians of "
             f"{len(results['mysqlq'])} run(s); {bench.server_info}", "",
             "| per job | " + " | ".join(LOOP_TITLES[loop] for loop in LOOPS) + " |",
             "|---|" + "---|" * len(LOOPS)]
    for row in main_rows(results):
        cells = [cell(median([row.value(r) for r in results[loop]])) for loop in LOOPS]
        lines.append(f"| {row.what} | " + " | ".join(cells) + " |")
    timed_cpu = any(s.get("cpu_us") for rs in results.values() for r in rs for s in r.statements.values())
    keys = ["calls", "time_us", *(["cpu_us"] if timed_cpu else []), "lock_us", "rows_examined", "rows_affected",
            "rows_sent"]
    lines += ["", "By statement (performance_schema's digests; µs of its statement timer"
              + (" and of its CPU timer" if timed_cpu else "") + "), per job; statements under 1 % of the loop's "
              "time and run less than once per 200 jobs (start-up, the leader, polls) summed as *the rest*:", "",
              "| loop | statement | calls | time µs | " + ("CPU µs | " if timed_cpu else "")
              + "lock µs | rows examined | rows affected | rows sent |",
              "|---|---|" + "---|" * len(keys)]
    for loop in LOOPS:
        rs = results[loop]
        labels = {s for r in rs for s in r.statements}
        values = {s: [statement_per_job(rs, s, key) for key in keys] for s in labels}
        total = sum(v[1] for v in values.values())
        rest = [0.0] * len(keys)
        shown = 0
        for label in sorted(labels, key=lambda s: -values[s][1]):
            if values[label][1] < total / 100 and values[label][0] < 0.005:
                rest = [a + b for a, b in zip(rest, values[label], strict=True)]
                continue
            shown += 1
            lines.append(f"| {loop} | {label} | " + " | ".join(fmt(v) for v in values[label]) + " |")
        if len(labels) > shown:
            lines.append(f"| {loop} | *the rest* ({len(labels) - shown} statements) | "
                         + " | ".join(fmt(v) for v in rest) + " |")
    lines += ["", "By index (performance_schema's table I/O by the index a statement used; `changed`: rows whose "
              "key in that index changed, counted by triggers on another drain), per job:", "",
              "| loop | table.index | fetch | insert | update | delete | I/O time µs | changed |",
              "|---|---|---|---|---|---|---|---|"]
    for loop in LOOPS:
        rs = results[loop]
        for index in sorted({i for r in rs for i in [*r.indexes, *r.changes]}):
            counts = [index_per_job(rs, index, key) for key in ("fetch", "insert", "update", "delete", "time_us")]
            changed = median([r.changes.get(index, 0.0) / r.jobs for r in rs])
            if index.endswith(")") or max([*counts[:4], changed]) * rs[0].jobs < 1.5:
                continue  # the clustered records and columns are in the first table; one-offs of start-up
            lines.append(f"| {loop} | {index} | " + " | ".join(fmt(v) for v in counts) + f" | {fmt(changed)} |")
    return "\n".join(lines)
