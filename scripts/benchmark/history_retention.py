"""retention: deleting a large history's old rows in batches, against dropping day partitions.

``scripts/bench --only retention`` (``MYSQLQ_BENCH_SERVER=mysql`` for MySQL; ``--quick``: 200,000 rows
instead of 2,000,000; one run unless ``--runs`` says more). It asks how mysqlq should delete old
history once finished jobs live in a history table of their own, and measures on one private server:

- **delete**: a history table shaped like ``mysqlq_jobs`` (no generated columns, no ready, scheduled
  or dedupe index; ``PRIMARY KEY (id)`` and ``(status, queue, finished_at)``) holding N done jobs
  whose ``finished_at`` spreads evenly over the 10 days before today (UTC), ~100-byte payloads.
  Everything that finished more than 7 days before today is deleted as retention does it today:
  batches of 1,000, each a plain read of the next ids on the index from where the last batch
  stopped, then one autocommit DELETE of those ids by primary key; on one table with the read
  ordered ``BY finished_at, id`` (**delete**), on another filled alike with it ordered as today's
  statement is, ``BY queue, finished_at, id`` (**delete_as_today**; the plans of both are printed).
  Then ``OPTIMIZE TABLE`` of the first (the rebuild that would give the space back), timed as well.
- **partitioned**: the same rows in a second table, converted to ``PARTITION BY RANGE COLUMNS
  (finished_at)``, one partition per day and one for ``MAXVALUE`` (``PRIMARY KEY (id, finished_at)``)
  by ``ALTER TABLE … PARTITION BY`` (**convert**: it copies the table); then the same rows removed by
  ``ALTER TABLE … DROP PARTITION`` (**drop**); then what keeping partitions ahead costs:
  ``REORGANIZE PARTITION`` of the (empty) ``MAXVALUE`` partition into a new day and itself
  (**reorganize**), and ``ADD PARTITION`` on a table whose last partition is a day (**add**), once
  more while another session holds a transaction that read the table (**add_behind_reader**: DDL
  waits for its metadata lock, and the writes queue behind the DDL).
- Through every step, a **writer** thread inserts single done rows into the table the step works on
  (as completions would), one every 5 ms, and times each; ``rest`` is the same writer with nothing
  else going on, for comparison.

Each step reports its wall seconds, the server's CPU seconds (utime + stime of its process, from
``/proc``; ``_purged``: until InnoDB's purge has caught up with the deleted rows), the rows it
removed, the table's size after it (``data_length + index_length`` and ``data_free`` of
``information_schema.TABLES`` after ``ANALYZE TABLE``; and the bytes of its ``.ibd`` files, when the
server's data directory is readable) and the writer's p50 / p99 / max latency in ms. Last, the cost
of 2,000 lookups by ``id`` alone on each table (a partitioned table cannot prune on ``id``).

It is a script, not a test: nothing is asserted. With ``MYSQLQ_DSN`` it uses that server (and reads
no CPU or files).
"""

from __future__ import annotations

import contextlib
import datetime as dt
import pathlib
import random
import threading
import time
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field
from typing import Any

import MySQLdb

import mysqlq
from benchmark.common import (
    Bench,
    Figure,
    emit,
    fmt,
    median,
    note,
    payload_bytes,
    percentile,
    write_json,
)
from benchmark.shared import cpu_since, server_cpu

DAYS = 10  # the history spans the 10 days before today
KEEP_DAYS = 7  # retention keeps what finished in the last 7 days
AHEAD_DAYS = 2  # partitions kept ready past today
BATCH = 1000  # retention's batch (the default retention_batch)
FILL_STEP = 200  # thousands of rows per INSERT … SELECT of the fill
WRITER_PACE = 0.005  # seconds between the writer's inserts
REST_SECONDS = 5.0
READER_HOLD = 2.0  # seconds the reader's transaction stays open during add_behind_reader
LOOKUPS = 2000
PURGE_WAIT = 300.0  # seconds to wait at most for purge after a step
PURGE_STILL = 2.0  # seconds without progress after which purge is taken to be done
PLAIN = "history_rows"
TODAY = "history_rows_today"
PARTED = "history_days"

COLUMNS = """
  `id` bigint unsigned NOT NULL AUTO_INCREMENT,
  `queue` varchar(100) NOT NULL,
  `handler` varchar(100) NOT NULL,
  `payload` mediumblob NOT NULL,
  `status` enum('ready','scheduled','running','done','dead','cancelled','blocked','waiting') NOT NULL,
  `priority` smallint NOT NULL DEFAULT 0,
  `run_at` datetime(6) NOT NULL,
  `attempts` smallint unsigned NOT NULL DEFAULT 0,
  `max_attempts` smallint unsigned NOT NULL,
  `time_limit` int unsigned DEFAULT NULL,
  `batch_id` bigint unsigned DEFAULT NULL,
  `worker_id` bigint unsigned DEFAULT NULL,
  `worker` varchar(255) DEFAULT NULL,
  `lease_until` datetime(6) DEFAULT NULL,
  `enqueued_at` datetime(6) NOT NULL,
  `started_at` datetime(6) DEFAULT NULL,
  `finished_at` datetime(6) NOT NULL,
  `dedupe_key` varchar(191) DEFAULT NULL,
  `last_error` mediumtext DEFAULT NULL,
  `dedupe_scope` enum('forever','active') NOT NULL DEFAULT 'forever',
  `concurrency_key` varchar(191) DEFAULT NULL,
  `result` mediumblob DEFAULT NULL,
  `dependents` tinyint(1) DEFAULT NULL,
  `waiting_for` int unsigned DEFAULT NULL,
  `snoozes` smallint unsigned NOT NULL DEFAULT 0,
  `progress` float DEFAULT NULL,
  `progress_note` varchar(200) DEFAULT NULL,
  `tags` varchar(700) DEFAULT NULL,
  `trace_context` varchar(600) DEFAULT NULL,
  `run_trace_context` varchar(600) DEFAULT NULL"""
FILL_COLUMNS = ("id, queue, handler, payload, status, priority, run_at, attempts, max_attempts, batch_id, worker_id,"
                " worker, enqueued_at, started_at, finished_at")
WRITE = ("INSERT INTO {table} (queue, handler, payload, status, priority, run_at, attempts, max_attempts, batch_id,"
         " worker_id, worker, enqueued_at, started_at, finished_at) VALUES ('default', 'bench.noop', %s, 'done', 0,"
         " UTC_TIMESTAMP(6), 1, 5, 1, 1, 'bench-writer', UTC_TIMESTAMP(6), UTC_TIMESTAMP(6), UTC_TIMESTAMP(6))")
# Retention's two statements (mysqlq/store/sql/ops.sql: expired_jobs, delete_jobs) on the history's index.
# ``{order}``: today's ``queue, finished_at, id``, or the same walk ordered by ``finished_at, id`` (the
# queue is fixed by the WHERE clause either way; MariaDB 10.11 sorts the whole rest of the range for
# the first, and reads the index in order for the second).
EXPIRED = ("SELECT id, finished_at FROM {table} FORCE INDEX (history_state)"
           " WHERE status = 'done' AND queue = 'default' AND finished_at < %(cutoff)s"
           "   AND (finished_at > %(after_at)s OR (finished_at = %(after_at)s AND id > %(after_id)s))"
           " ORDER BY {order} LIMIT %(limit)s")
ORDERS = {TODAY: "queue, finished_at, id", PLAIN: "finished_at, id"}
DELETE = "DELETE FROM {table} WHERE id IN ({ids}) AND status = 'done' AND finished_at < %s"


# ---------------------------------------------------------------------------- the tables


def day_name(day: dt.date) -> str:
    return f"p{day:%Y%m%d}"


def day_partitions(days: Sequence[dt.date], maxvalue: bool) -> str:
    """One partition per day (each holds the rows that finished on that day), and MAXVALUE's if asked."""
    parts = [f"PARTITION {day_name(day)} VALUES LESS THAN ('{day + dt.timedelta(days=1)} 00:00:00')" for day in days]
    if maxvalue:
        parts.append("PARTITION pmax VALUES LESS THAN (MAXVALUE)")
    return "PARTITION BY RANGE COLUMNS (finished_at) (" + ", ".join(parts) + ")"


def create_history(cur: Any, table: str) -> None:
    cur.execute(f"CREATE TABLE {table} ({COLUMNS}, PRIMARY KEY (id),"
                " KEY history_state (status, queue, finished_at))"
                " ENGINE=InnoDB DEFAULT CHARSET=utf8mb4 COLLATE=utf8mb4_bin")


def create_numbers(cur: Any, count: int) -> None:
    """A table ``numbers`` of 0 … count-1 (the fill joins it with itself)."""
    cur.execute("CREATE TABLE numbers (n int unsigned NOT NULL PRIMARY KEY) ENGINE=InnoDB")
    for start in range(0, count, 1000):
        values = ", ".join(f"({n})" for n in range(start, min(start + 1000, count)))
        cur.execute(f"INSERT INTO numbers (n) VALUES {values}")


def fill(cur: Any, table: str, rows: int, start: dt.datetime, span: dt.timedelta) -> None:
    """``rows`` done jobs, ids 1…rows, finished_at rising evenly from ``start`` over ``span``;
    payloads as benchmark.common.payload_bytes makes them."""
    step_us = span / dt.timedelta(microseconds=1) / rows
    thousands = -(-rows // 1000)
    for low in range(0, thousands, FILL_STEP):
        cur.execute(
            f"INSERT INTO {table} ({FILL_COLUMNS})"
            " SELECT n + 1, 'default', 'bench.noop', CONCAT('{\"n\":', n, ',\"pad\":\"', REPEAT('x', 80), '\"}'),"
            " 'done', 0, f - INTERVAL 2 SECOND, 1, 5, n DIV 100 + 1, 1, 'bench-history', f - INTERVAL 2 SECOND,"
            " f - INTERVAL 1 SECOND, f"
            " FROM (SELECT a.n * 1000 + b.n AS n, %s + INTERVAL FLOOR((a.n * 1000 + b.n) * %s) MICROSECOND AS f"
            "       FROM numbers a CROSS JOIN numbers b WHERE a.n >= %s AND a.n < %s AND b.n < 1000) s"
            " WHERE n < %s ORDER BY n",
            (start, step_us, low, min(low + FILL_STEP, thousands), rows))


@dataclass
class Size:
    """A table's size: information_schema's (after ANALYZE TABLE) and its files' on disk."""

    data_index: float = float("nan")  # data_length + index_length, bytes
    free: float = float("nan")  # data_free, bytes
    files: float = float("nan")  # the .ibd files' sizes, bytes (NaN: the data directory is not readable)


def table_size(cur: Any, datadir: pathlib.Path | None, database: str, table: str) -> Size:
    cur.execute(f"ANALYZE TABLE {table}")
    cur.fetchall()
    cur.execute("SELECT data_length + index_length, data_free FROM information_schema.TABLES"
                " WHERE table_schema = %s AND table_name = %s", (database, table))
    data_index, free = cur.fetchone()
    size = Size(float(data_index), float(free))
    if datadir is not None and (datadir / database).is_dir():
        files = [*(datadir / database).glob(f"{table}.ibd"), *(datadir / database).glob(f"{table}#[Pp]#*.ibd")]
        size.files = float(sum(f.stat().st_size for f in files))
    return size


def server_datadir(bench: Bench) -> pathlib.Path | None:
    datadir = getattr(bench.server, "datadir", None)
    return pathlib.Path(datadir) if datadir is not None else None


# ---------------------------------------------------------------------------- the writer


class Writer:
    """Single-row INSERTs of done jobs into ``table`` from a thread of its own, one every WRITER_PACE
    seconds (no catching up after a slow one), each timed: ``times`` holds (start, end) of each."""

    def __init__(self, bench: Bench, dsn: mysqlq.Dsn, table: str) -> None:
        self.conn = bench.connect(dsn)
        self.table = table
        self.times: list[tuple[float, float]] = []
        self.errors: list[str] = []
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name=f"writer-{table}", daemon=True)

    def _run(self) -> None:
        cur = self.conn.cursor()
        sql = WRITE.format(table=self.table)
        due = time.perf_counter()
        n = 0
        while not self._stop.is_set():
            started = time.perf_counter()
            try:
                cur.execute(sql, (payload_bytes(n),))
            except MySQLdb.Error as e:
                self.errors.append(str(e))
                if len(self.errors) > 10:
                    return
            self.times.append((started, time.perf_counter()))
            n += 1
            due = max(due + WRITER_PACE, time.perf_counter())
            self._stop.wait(max(0.0, due - time.perf_counter()))

    def __enter__(self) -> Writer:
        self._thread.start()
        time.sleep(0.2)  # the first inserts happen before the step starts
        return self

    def during(self, start: float, end: float) -> list[float]:
        """The latencies (ms) of the inserts that were under way at some moment from ``start`` to ``end``."""
        return [(e - s) * 1000 for s, e in self.times if e >= start and s <= end]

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        self._thread.join()
        self.conn.close()
        if self.errors:
            note(f"writer into {self.table}: {len(self.errors)} errors, the first: {self.errors[0]}")


# ---------------------------------------------------------------------------- one step, measured


@dataclass
class Step:
    """What one step cost."""

    seconds: float = float("nan")
    server_cpu: float = float("nan")
    server_cpu_purged: float = float("nan")
    purge_seconds: float = float("nan")  # from the step's end until purge caught up
    rows: float = float("nan")
    size: Size = field(default_factory=Size)
    writes: list[float] = field(default_factory=list)
    write_errors: int = 0


class Purge:
    """InnoDB's history list (undo not yet purged), from information_schema.INNODB_METRICS."""

    def __init__(self, cur: Any) -> None:
        self.cur = cur
        cur.execute("SET GLOBAL innodb_monitor_enable = 'trx_rseg_history_len'")

    def length(self) -> float:
        self.cur.execute("SELECT COUNT FROM information_schema.INNODB_METRICS WHERE NAME = 'trx_rseg_history_len'")
        row = self.cur.fetchone()
        return float(row[0]) if row else 0.0

    def wait(self, level: float) -> bool:
        """Until the history list is back to ``level``, or has not shortened for PURGE_STILL seconds,
        or PURGE_WAIT seconds have passed; whether it got there."""
        deadline = time.monotonic() + PURGE_WAIT
        length, still_since = self.length(), time.monotonic()
        while length > level and time.monotonic() < deadline and time.monotonic() - still_since < PURGE_STILL:
            time.sleep(0.1)
            now = self.length()
            if now < length:
                still_since = time.monotonic()
            length = now
        return length <= level


class Study:
    """The tables of one run and the steps on them."""

    def __init__(self, bench: Bench, rows: int) -> None:
        self.bench = bench
        self.rows = rows
        self.dsn = bench.fresh("retention", migrate=False)
        self.conn = bench.connect(self.dsn)
        self.cur = self.conn.cursor()
        self.cur.execute("SET time_zone = '+00:00'")
        with contextlib.suppress(MySQLdb.OperationalError):  # MySQL caches information_schema.TABLES' sizes
            self.cur.execute("SET SESSION information_schema_stats_expiry = 0")
        self.purge = Purge(self.cur)
        self.datadir = server_datadir(bench)
        self.cur.execute("SELECT UTC_DATE()")
        self.today: dt.date = self.cur.fetchone()[0]
        self.first_day = self.today - dt.timedelta(days=DAYS)
        self.cutoff = dt.datetime.combine(self.today - dt.timedelta(days=KEEP_DAYS), dt.time())
        self.past_days = [self.first_day + dt.timedelta(days=i) for i in range(DAYS)]

    def close(self) -> None:
        self.conn.close()
        self.bench.drop(self.dsn.database)

    def setup(self) -> dict[str, float]:
        """Both tables, filled alike (the partitioned one still plain: ``convert`` partitions it)."""
        filled = {}
        create_numbers(self.cur, max(1000, -(-self.rows // 1000)))
        for table in (PLAIN, TODAY, PARTED):
            create_history(self.cur, table)
            note(f"retention: filling {table} with {self.rows:,} done jobs over {self.first_day} … {self.today}")
            started = time.perf_counter()
            fill(self.cur, table, self.rows, dt.datetime.combine(self.first_day, dt.time()), dt.timedelta(days=DAYS))
            filled[table] = time.perf_counter() - started
        self.purge.wait(0.0)
        return filled

    @contextlib.contextmanager
    def measured(self, table: str, step: Step, purge: bool = False) -> Iterator[None]:
        """Time the body with the writer inserting into ``table``; the server's CPU around it (and, with
        ``purge``, until purge caught up); the table's size after."""
        self.purge.wait(self.purge.length())  # nothing left from the step before
        level = self.purge.length()
        with Writer(self.bench, self.dsn, table) as writer:
            cpu = server_cpu(self.bench)
            started = time.perf_counter()
            yield
            ended = time.perf_counter()
            step.server_cpu = cpu_since(server_cpu(self.bench), cpu)
            step.seconds = ended - started
        step.writes = writer.during(started, ended)
        step.write_errors = len(writer.errors)
        if purge:
            if not self.purge.wait(level):
                note(f"retention: purge had not caught up after {time.perf_counter() - ended:.0f} s")
            step.purge_seconds = time.perf_counter() - ended
            step.server_cpu_purged = cpu_since(server_cpu(self.bench), cpu)
        step.size = table_size(self.cur, self.datadir, self.dsn.database, table)

    # -------------------------------------------------------------------- the steps

    def rest(self) -> Step:
        step = Step(rows=0)
        with self.measured(PLAIN, step):
            time.sleep(REST_SECONDS)
        return step

    def plan(self, table: str) -> str:
        """EXPLAIN's access type and Extra for the first batch's read of ``table`` (MySQL 9 may default
        to another format than the table: it is asked for by name there; MariaDB knows no such name)."""
        explain = "EXPLAIN " if "mariadb" in self.bench.server_version.lower() else "EXPLAIN FORMAT=TRADITIONAL "
        self.cur.execute(explain + EXPIRED.format(table=table, order=ORDERS[table]),
                         {"cutoff": self.cutoff, "after_at": dt.datetime(1970, 1, 1), "after_id": 0, "limit": BATCH})
        names = [d[0].lower() for d in self.cur.description]
        row = dict(zip(names, self.cur.fetchone(), strict=True))
        if "type" not in row:
            return " ".join(str(value) for value in row.values())
        return f"{row['type']} on {row['key']}: {row['extra']}"

    def delete(self, table: str) -> Step:
        """Retention: read the next BATCH ids on the index, delete them by primary key, again."""
        step = Step()
        deleted = 0
        after_at, after_id = dt.datetime(1970, 1, 1), 0
        read = EXPIRED.format(table=table, order=ORDERS[table])
        with self.measured(table, step, purge=True):
            while True:
                self.cur.execute(read, {"cutoff": self.cutoff, "after_at": after_at, "after_id": after_id,
                                        "limit": BATCH})
                found = self.cur.fetchall()
                if found:
                    ids = [int(row[0]) for row in found]
                    deleted += self.cur.execute(DELETE.format(table=table, ids=", ".join(["%s"] * len(ids))),
                                                (*ids, self.cutoff))
                    after_id, after_at = ids[-1], found[-1][1]
                if len(found) < BATCH:
                    break
        step.rows = deleted
        return step

    def optimize(self) -> Step:
        """OPTIMIZE TABLE (InnoDB: a rebuild): what giving the deleted rows' space back costs."""
        step = Step(rows=0)
        with self.measured(PLAIN, step, purge=True):
            self.cur.execute(f"OPTIMIZE TABLE {PLAIN}")
            self.cur.fetchall()
        return step

    def convert(self) -> Step:
        """The filled plain table partitioned by day: the key must hold finished_at; the table is copied."""
        step = Step(rows=0)
        days = [*self.past_days, *(self.today + dt.timedelta(days=i) for i in range(AHEAD_DAYS))]
        with self.measured(PARTED, step, purge=True):
            self.cur.execute(f"ALTER TABLE {PARTED} DROP PRIMARY KEY, ADD PRIMARY KEY (id, finished_at) "
                             + day_partitions(days, maxvalue=True))
        return step

    def drop(self) -> Step:
        """The days that ended before the cutoff, dropped."""
        old = [day for day in self.past_days if day < self.cutoff.date()]  # days wholly before the cutoff
        names = ", ".join(day_name(day) for day in old)
        self.cur.execute(f"SELECT COUNT(*) FROM {PARTED} PARTITION ({names})")
        rows = int(self.cur.fetchone()[0])
        step = Step(rows=rows)
        with self.measured(PARTED, step, purge=True):
            self.cur.execute(f"ALTER TABLE {PARTED} DROP PARTITION {names}")
        return step

    def reorganize(self) -> Step:
        """One more day split off the (empty) MAXVALUE partition."""
        day = self.today + dt.timedelta(days=AHEAD_DAYS)
        step = Step(rows=0)
        with self.measured(PARTED, step):
            self.cur.execute(f"ALTER TABLE {PARTED} REORGANIZE PARTITION pmax INTO ("
                             f"PARTITION {day_name(day)} VALUES LESS THAN ('{day + dt.timedelta(days=1)} 00:00:00'),"
                             " PARTITION pmax VALUES LESS THAN (MAXVALUE))")
        self.cur.execute(f"ALTER TABLE {PARTED} DROP PARTITION pmax")  # for add: its last partition a day
        return step

    def add(self, offset: int) -> Step:
        step = Step(rows=0)
        with self.measured(PARTED, step):
            self.add_partition(offset)
        return step

    def add_partition(self, offset: int) -> None:
        day = self.today + dt.timedelta(days=offset)
        self.cur.execute(f"ALTER TABLE {PARTED} ADD PARTITION (PARTITION {day_name(day)}"
                         f" VALUES LESS THAN ('{day + dt.timedelta(days=1)} 00:00:00'))")

    def add_behind_reader(self, offset: int) -> Step:
        """ADD PARTITION while another session's transaction has read the table and stays open
        READER_HOLD seconds more: the DDL waits for the metadata lock, and the writer's inserts behind it."""
        reader = self.bench.connect(self.dsn)
        step = Step(rows=0)
        try:
            rcur = reader.cursor()
            with self.measured(PARTED, step):
                rcur.execute("START TRANSACTION")
                rcur.execute(f"SELECT id FROM {PARTED} ORDER BY id DESC LIMIT 1")
                rcur.fetchall()
                timer = threading.Timer(READER_HOLD, reader.commit)
                timer.start()
                try:
                    self.add_partition(offset)
                finally:
                    timer.join()
        finally:
            reader.close()
        return step

    def lookups(self, table: str) -> float:
        """µs per SELECT of one row by id alone (ids that retention kept), median of LOOKUPS."""
        rng = random.Random(1)
        low = int(self.rows * (DAYS - KEEP_DAYS) / DAYS) + 1
        ids = [rng.randint(low, self.rows) for _ in range(LOOKUPS)]
        times = []
        for job_id in ids:
            started = time.perf_counter()
            self.cur.execute(f"SELECT id, status, finished_at, payload FROM {table} WHERE id = %s", (job_id,))
            self.cur.fetchall()
            times.append((time.perf_counter() - started) * 1e6)
        return median(times)

    def partitions(self) -> int:
        self.cur.execute("SELECT COUNT(*) FROM information_schema.PARTITIONS WHERE table_schema = %s"
                         " AND table_name = %s", (self.dsn.database, PARTED))
        return int(self.cur.fetchone()[0])


# ---------------------------------------------------------------------------- a run, its figures, its table


@dataclass
class Run:
    steps: dict[str, Step]
    plans: dict[str, str]  # table -> the plan of its first read
    lookup_us: dict[str, float]  # table -> µs per lookup by id
    partitions: int  # the partitioned table's partitions at the end


def one_run(bench: Bench, rows: int) -> Run:
    study = Study(bench, rows)
    try:
        filled = study.setup()
        steps = {"fill": Step(seconds=filled[PLAIN], rows=rows,
                              size=table_size(study.cur, study.datadir, study.dsn.database, PLAIN))}
        note("retention: the writer alone")
        steps["rest"] = study.rest()
        plans = {table: study.plan(table) for table in (PLAIN, TODAY)}
        note(f"retention: deleting what finished before {study.cutoff} in batches of {BATCH}, in index order")
        steps["delete"] = study.delete(PLAIN)
        note("retention: the same, the read ordered as today's (queue, finished_at, id)")
        steps["delete_as_today"] = study.delete(TODAY)
        note("retention: OPTIMIZE TABLE")
        steps["optimize"] = study.optimize()
        note("retention: partitioning the second table by day (ALTER TABLE … PARTITION BY)")
        steps["convert"] = study.convert()
        note("retention: DROP PARTITION of the same days")
        steps["drop"] = study.drop()
        note("retention: REORGANIZE PARTITION pmax, ADD PARTITION, ADD PARTITION behind an open reader")
        steps["reorganize"] = study.reorganize()
        steps["add"] = study.add(AHEAD_DAYS + 1)
        steps["add_behind_reader"] = study.add_behind_reader(AHEAD_DAYS + 2)
        note(f"retention: {LOOKUPS} lookups by id on each table")
        lookup_us = {table: study.lookups(table) for table in (PLAIN, PARTED)}
        return Run(steps, plans, lookup_us, study.partitions())
    finally:
        study.close()


TABLE_OF = {"fill": PLAIN, "rest": PLAIN, "delete": PLAIN, "delete_as_today": TODAY, "optimize": PLAIN}  # else PARTED


def figures_of(runs: Sequence[Run], rows: int) -> list[Figure]:
    figures = []
    for name in runs[0].steps:
        fig = Figure("retention", {"step": name, "table": TABLE_OF.get(name, PARTED), "n": str(rows)},
                     spread=("seconds",))
        for run in runs:
            step = run.steps[name]
            fig.add(seconds=step.seconds, server_cpu_s=step.server_cpu, server_cpu_purged_s=step.server_cpu_purged,
                    purge_s=step.purge_seconds, rows=step.rows, bytes=step.size.data_index,
                    free_bytes=step.size.free, file_bytes=step.size.files)
            if name != "fill":
                fig.add(writes=len(step.writes), write_errors=step.write_errors,
                        write_p50_ms=percentile(step.writes, 50), write_p99_ms=percentile(step.writes, 99),
                        write_max_ms=max(step.writes, default=float("nan")))
        figures.append(fig)
    lookups = Figure("retention", {"step": "lookup_by_id", "n": str(rows)})
    for run in runs:
        lookups.add(plain_us=run.lookup_us[PLAIN], partitioned_us=run.lookup_us[PARTED],
                    partitions=run.partitions)
    figures.append(lookups)
    return figures


TITLES = {
    "fill": f"the plain table, filled ({PLAIN})",
    "rest": "the writer alone",
    "delete": f"DELETE in batches of {BATCH}, read in index order (finished_at, id)",
    "delete_as_today": f"DELETE in batches of {BATCH}, read as today (ORDER BY queue, finished_at, id)",
    "optimize": "OPTIMIZE TABLE after it (gives the space back)",
    "convert": "ALTER TABLE … PARTITION BY (the filled table, by day)",
    "drop": "ALTER TABLE … DROP PARTITION (the same days)",
    "reorganize": "REORGANIZE PARTITION pmax (empty) into a day and pmax",
    "add": "ADD PARTITION (last partition a day)",
    "add_behind_reader": f"ADD PARTITION, a reader's transaction open {READER_HOLD:.0f} s",
}


def mib(value: float) -> str:
    return cell(value / 2**20)


def cell(value: float) -> str:
    return "—" if value != value else fmt(value)


def report(runs: Sequence[Run]) -> str:
    """The figures as a Markdown table (medians of the runs)."""

    def med(name: str, get: Any) -> float:
        return median([get(run.steps[name]) for run in runs])

    lines = ["| step | wall s | server CPU s (until purged) | rows removed | size after, MiB: data+index / free / "
             "files | writer p50 / p99 / max ms (inserts) |", "|---|---|---|---|---|---|"]
    for name in runs[0].steps:
        cpu = cell(med(name, lambda s: s.server_cpu))
        purged = med(name, lambda s: s.server_cpu_purged)
        if purged == purged:
            cpu += f" ({fmt(purged)})"
        size = " / ".join(mib(med(name, lambda s, k=k: getattr(s.size, k))) for k in ("data_index", "free", "files"))
        writes = "" if name == "fill" else " / ".join(
            cell(med(name, lambda s, p=p: percentile(s.writes, p))) for p in (50, 99, 100))
        writes += "" if name == "fill" else f" ({med(name, lambda s: len(s.writes)):,.0f})"
        lines.append(f"| {TITLES[name]} | {cell(med(name, lambda s: s.seconds))} | {cpu} | "
                     f"{med(name, lambda s: s.rows):,.0f} | {size} | {writes} |")
    plain = median([run.lookup_us[PLAIN] for run in runs])
    parted = median([run.lookup_us[PARTED] for run in runs])
    lines.append("")
    lines.append(f"lookup by id alone, µs (median of {LOOKUPS}): plain {fmt(plain)}, partitioned {fmt(parted)} "
                 f"({runs[0].partitions} partitions)")
    for table, order in ORDERS.items():
        lines.append(f"plan of the first read ORDER BY {order}: {runs[0].plans[table]}")
    return "\n".join(lines)


def main(quick: bool, runs: int, json_path: str | None = None) -> int:
    rows = 200_000 if quick else 2_000_000
    started = time.perf_counter()
    bench = Bench(quick, runs)
    figures: list[Figure] = []
    try:
        print(f"# server: {bench.where}: {bench.server_info}")
        print(f"# retention: {rows:,} done jobs over the {DAYS} days before today, those older than {KEEP_DAYS} days "
              f"removed; writer every {WRITER_PACE * 1000:.0f} ms; runs={runs}", flush=True)
        results = []
        for run in range(runs):
            note(f"retention run {run + 1}")
            results.append(one_run(bench, rows))
        figures = [emit(fig) for fig in figures_of(results, rows)]
        print()
        print(report(results))
    finally:
        bench.close()
    if json_path:
        write_json(json_path, figures, {"section": "retention", "server": bench.server_info, "rows": rows})
    print(f"\n# total {time.perf_counter() - started:.0f} s")
    return 0
