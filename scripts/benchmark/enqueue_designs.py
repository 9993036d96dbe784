"""W4flag: what the flag design's second row costs an enqueue (the producer's rate and the server's CPU).

The flag design (w1flag.py) keeps every ready job's narrow row in ``mysqlq_ready`` beside its wide row
in ``mysqlq_jobs``: an enqueue writes two rows instead of one. Measured here, each on a fresh database
of its own and from one client connection, in alternation (blocks of 250 enqueues, the order rotated
block by block, so that other work on the machine lands on every variant alike), 5,000 single
enqueues of W4's payload sent as mysqlq would send them:

* ``today``: the one autocommit ``insert_job`` (``mysqlq.store.jobs.insert_rendered``, as ``enqueue``);
* ``multi``: both rows in one round trip, ``START TRANSACTION; INSERT INTO mysqlq_jobs …; INSERT INTO
  mysqlq_ready (job_id, queue, priority) VALUES (LAST_INSERT_ID(), q, p); COMMIT`` as one query on a
  connection that takes several statements (``connect(multi_statements=True)``), every result read;
* ``today_tx``: today's insert inside a caller's transaction, as ``enqueue_on`` sends it: BEGIN, the
  INSERT (the driver binding the row), COMMIT (the reference of ``tx``);
* ``tx``: the same with the narrow row as a second INSERT (its id known from the first's OK packet),
  BEGIN, two INSERTs, COMMIT: four round trips;
* ``multi_lean``: ``multi`` on a wide table without ``mysqlq_jobs_ready`` (the design leaves that index
  empty: every row's entry is NULL; a later schema could drop it once no producer of an earlier version
  inserts rows that only it finds);
* ``split``: today's single autocommit INSERT into ``split``'s live table (designs.py): ``mysqlq_jobs``
  with only its primary key and the claim's index ``(queue, batch_id, priority, id)``, no second row;
* ``trigger``: today's single autocommit INSERT on a table with an AFTER INSERT trigger that writes the
  narrow row when ``NEW.status = 'ready'``;
* ``bare``: the reference autocommit INSERT into ``job_queue`` (W4's reference, bare.py).

The flag variants' databases get the prototype's tables (w1flag.SETUP) and ``ready_queue`` defaults to
NULL there (the design leaves the wide table's ready index empty). For each: enqueues/s, the server's
CPU per enqueue (µs, from /proc), InnoDB's fsyncs and redo bytes per enqueue (SHOW GLOBAL STATUS),
the server's write system calls per enqueue (/proc/PID/io), and the ratios to ``today`` taken run by
run (``ratio_today``: its rate over today's; ``server_vs_today``: its server CPU over today's).

Then ``enqueue_many`` of 20,000 jobs, 3 times a run per variant in rotated order: ``today`` (mysqlq's
BulkInsert: chunks of 1,000 rows in one transaction, each rendered while the server inserts the one
before); ``select`` (the same, and after each chunk ``INSERT INTO mysqlq_ready … SELECT id, queue,
priority FROM mysqlq_jobs WHERE id BETWEEN first AND first + rows - 1 AND status = 'ready'``, where
``first`` is the chunk's first id from its OK packet: enqueue_many learns no ids otherwise, and a range
per chunk, not one for the whole transaction, keeps other producers' chunks out of it); ``select_lean``
(``select`` without ``mysqlq_jobs_ready``); ``split`` (today's chunks into the live table); ``trigger``
(today's chunks on the trigger's table); ``bare`` (bare.py's multi-row fill, autocommit).

Every flag database is checked at the end: one narrow row per wide row.
"""

from __future__ import annotations

import contextlib
import time
from collections.abc import Callable
from typing import Any

import MySQLdb

import mysqlq
from benchmark import bare as bench_bare
from benchmark.common import Bench, Figure, connect_kwargs, emit, note, payload, payload_bytes
from benchmark.shared import ServerCpu, Sizes
from benchmark.w1flag import SETUP as FLAG_SETUP
from mysqlq.core.jobs import job_row
from mysqlq.producer.enqueue import BULK_CHUNK
from mysqlq.store import jobs as store
from mysqlq.store.db import connect, transaction

SINGLES = ("today", "multi", "multi_lean", "split", "today_tx", "tx", "trigger", "bare")
BULKS = ("today", "select", "select_lean", "split", "trigger", "bare")
FLAGGED = {"multi", "multi_lean", "tx", "trigger", "select", "select_lean"}
LEAN = {"multi_lean", "select_lean"}  # the wide table without mysqlq_jobs_ready
BLOCK = 250  # single enqueues per variant per block
BULK_ROUNDS = 3  # enqueue_many calls per variant per run
QUEUE, PRIORITY = "default", 0

READY_DEFAULT_NULL = "ALTER TABLE mysqlq_jobs ALTER COLUMN ready_queue SET DEFAULT NULL"
DROP_READY_INDEX = "ALTER TABLE mysqlq_jobs DROP INDEX mysqlq_jobs_ready"
SPLIT_SHAPE = ("ALTER TABLE mysqlq_jobs DROP INDEX mysqlq_jobs_ready, DROP INDEX mysqlq_jobs_dedupe,"
               " DROP INDEX mysqlq_jobs_state, DROP INDEX mysqlq_jobs_scheduled,"
               " MODIFY batch_id BIGINT UNSIGNED NOT NULL DEFAULT 0,"
               " ADD KEY mysqlq_live_claim (queue, batch_id, priority, id)")
TRIGGER = """CREATE TRIGGER mysqlq_jobs_ready_row AFTER INSERT ON mysqlq_jobs FOR EACH ROW
BEGIN
  IF NEW.status = 'ready' THEN
    INSERT INTO mysqlq_ready (job_id, queue, priority) VALUES (NEW.id, NEW.queue, NEW.priority);
  END IF;
END"""
NARROW_LAST = b"INSERT INTO mysqlq_ready (job_id, queue, priority) VALUES (LAST_INSERT_ID(), %s, %s)"
NARROW_BOUND = "INSERT INTO mysqlq_ready (job_id, queue, priority) VALUES (%s, %s, %s)"
NARROW_RANGE = ("INSERT INTO mysqlq_ready (job_id, queue, priority) SELECT id, queue, priority FROM mysqlq_jobs"
                " WHERE id BETWEEN {first} AND {last} AND status = 'ready'")
STATUS = ("Innodb_data_fsyncs", "Innodb_os_log_fsyncs", "Innodb_os_log_written")  # (MariaDB 10.11: no log fsyncs)
APP_USER = "mysqlq_bench_app"


def counters(bench: Bench) -> dict[str, int]:
    """InnoDB's fsyncs and redo bytes so far (SHOW GLOBAL STATUS), and the server's write system calls
    (/proc/PID/io, a private server only): each durable commit is at least one write of the redo log."""
    names = ", ".join(f"'{name}'" for name in STATUS)
    bench.cur.execute(f"SHOW GLOBAL STATUS WHERE Variable_name IN ({names})")
    found = {str(name): int(value) for name, value in bench.cur.fetchall()}
    pid = bench.server_pid
    if pid:
        with contextlib.suppress(OSError, StopIteration, ValueError), open(f"/proc/{pid}/io") as io:
            found["syscw"] = int(next(line for line in io if line.startswith("syscw:")).split()[1])
    return found


class Meter:
    """Wall seconds, the server's CPU and its counters, summed over the stretches of one variant."""

    def __init__(self, bench: Bench) -> None:
        self.bench = bench
        self.server = ServerCpu(bench)
        self.seconds = 0.0
        self.counts: dict[str, int] = {}

    @contextlib.contextmanager
    def measure(self) -> Any:
        before = counters(self.bench)
        with self.server:
            started = time.perf_counter()
            yield
            self.seconds += time.perf_counter() - started
        for name, value in counters(self.bench).items():
            if name in before:
                self.counts[name] = self.counts.get(name, 0) + value - before[name]


def flag_tables(cur: Any, trigger: bool, lean: bool = False) -> str | None:
    """The prototype's tables; with ``trigger``, the trigger too; with ``lean``, the wide table without
    its ready index (which the design leaves empty). Returns the server's refusal, if any."""
    for statement in FLAG_SETUP:
        cur.execute(statement)
    cur.execute(READY_DEFAULT_NULL)
    if lean:
        cur.execute(DROP_READY_INDEX)
    if trigger:
        try:
            cur.execute(TRIGGER)
        except MySQLdb.Error as exc:
            return f"{exc.args[0]}: {exc.args[1] if len(exc.args) > 1 else exc}"
    return None


def trigger_as_app_user(bench: Bench, dsn: mysqlq.Dsn) -> str:
    """Whether a user with every privilege on the database (and none global, as an application's) may
    create the trigger: "yes", or the server's refusal."""
    cur = bench.cur
    cur.execute(f"DROP USER IF EXISTS '{APP_USER}'@'%'")
    cur.execute(f"DROP USER IF EXISTS '{APP_USER}'@'localhost'")
    for host in ("%", "localhost"):
        cur.execute(f"CREATE USER '{APP_USER}'@'{host}' IDENTIFIED BY 'bench-app-pw'")
        cur.execute(f"GRANT ALL PRIVILEGES ON `{dsn.database}`.* TO '{APP_USER}'@'{host}'")
    try:
        kwargs = connect_kwargs(dsn, dsn.database)
        kwargs.update(user=APP_USER, passwd="bench-app-pw")
        conn = MySQLdb.connect(autocommit=True, charset="utf8mb4", **kwargs)
        try:
            app = conn.cursor()
            app.execute("DROP TRIGGER IF EXISTS mysqlq_jobs_ready_row")
            app.execute(TRIGGER)
            return "yes"
        except MySQLdb.Error as exc:
            return f"refused ({exc.args[0]}: {exc.args[1] if len(exc.args) > 1 else exc})"
        finally:
            conn.close()
    finally:
        for host in ("%", "localhost"):
            cur.execute(f"DROP USER IF EXISTS '{APP_USER}'@'{host}'")


def server_settings(bench: Bench) -> str:
    found = []
    for name in ("log_bin", "sync_binlog", "binlog_format", "innodb_flush_log_at_trx_commit",
                 "innodb_autoinc_lock_mode", "log_bin_trust_function_creators"):
        try:
            bench.cur.execute(f"SELECT @@{name}")
            found.append(f"{name}={bench.cur.fetchone()[0]}")
        except MySQLdb.Error:
            found.append(f"{name}=?")
    return ", ".join(found)


# ---------------------------------------------------------------------------- single enqueues


def _row(settings: mysqlq.Settings, i: int) -> tuple[Any, ...]:
    return job_row(settings, "bench.noop", payload(i), QUEUE, 0.0, None, PRIORITY, None, None, None, "forever", None)


def single_senders(bench: Bench, dsns: dict[str, mysqlq.Dsn], conns: list[Any],
                   n: int) -> dict[str, Callable[[range], None]]:
    """For each variant, a function that enqueues jobs ``numbers`` (0..n) one by one on its own connection."""
    renderer = store.RowRenderer()
    senders: dict[str, Callable[[range], None]] = {}

    def opened(variant: str, multi: bool = False) -> Any:
        conn = connect(dsns[variant], multi_statements=multi)
        conns.append(conn)
        return conn

    def autocommit_sender(conn: Any, settings: mysqlq.Settings) -> Callable[[range], None]:
        def send(numbers: range) -> None:
            for i in numbers:
                store.insert_rendered(conn, _row(settings, i), renderer)
        return send

    for variant in ("today", "split", "trigger"):
        if variant in dsns:
            senders[variant] = autocommit_sender(opened(variant), bench.settings(dsns[variant]))

    def multi_sender(variant: str) -> Callable[[range], None]:
        multi_conn, multi_settings = opened(variant, multi=True), bench.settings(dsns[variant])
        narrow = NARROW_LAST % (multi_conn.literal(QUEUE), multi_conn.literal(PRIORITY))

        def send_multi(numbers: range) -> None:
            conn, literal = multi_conn, multi_conn.literal
            for i in numbers:
                insert = renderer.statement("insert_job", (_row(multi_settings, i),), literal)
                conn.query(b"START TRANSACTION;" + insert + b";" + narrow + b";COMMIT")
                conn.next_result()  # the INSERT into mysqlq_jobs
                job_id = int(conn.insert_id())
                while conn.next_result() == 0:  # the narrow INSERT, the COMMIT
                    pass
                if not job_id:
                    raise RuntimeError(f"{variant}: no id from the INSERT")
        return send_multi

    senders["multi"] = multi_sender("multi")
    senders["multi_lean"] = multi_sender("multi_lean")

    def tx_sender(variant: str, narrow_row: bool) -> Callable[[range], None]:
        conn, settings = opened(variant), bench.settings(dsns[variant])

        def send(numbers: range) -> None:
            for i in numbers:
                row = _row(settings, i)
                with transaction(conn), conn.cursor() as cur:  # as a caller's transaction around enqueue_on
                    job_id = store.insert_job(cur, row)
                    if narrow_row and cur.rowcount == 1:  # a new job (a taken dedupe key: the existing one's id)
                        cur.execute(NARROW_BOUND, (job_id, QUEUE, PRIORITY))
        return send

    senders["today_tx"] = tx_sender("today_tx", False)
    senders["tx"] = tx_sender("tx", True)

    bare_conn = bench.connect(dsns["bare"])
    conns.append(bare_conn)
    bare_cur = bare_conn.cursor()
    bench_bare.create_table(bare_cur)
    bare_payloads = [payload_bytes(i) for i in range(n + 1)]

    def send_bare(numbers: range) -> None:
        bench_bare.insert_loop(bare_cur, bare_payloads[numbers.start : numbers.stop])

    senders["bare"] = send_bare
    return senders


# ---------------------------------------------------------------------------- enqueue_many


def bulk_senders(bench: Bench, dsns: dict[str, mysqlq.Dsn], conns: list[Any],
                 n: int) -> dict[str, Callable[[int], None]]:
    """For each variant, a function that enqueues ``n`` jobs (the round's) in one enqueue_many."""
    renderer = store.RowRenderer()
    jobs = [mysqlq.Job("bench.noop", payload(i)) for i in range(n)]
    senders: dict[str, Callable[[int], None]] = {}

    def chunks(settings: mysqlq.Settings) -> Any:
        rows = [job.row(settings) for job in jobs]
        for start in range(0, len(rows), BULK_CHUNK):
            yield rows[start : start + BULK_CHUNK]

    def today_sender(variant: str) -> Callable[[int], None]:
        conn = connect(dsns[variant])
        conns.append(conn)
        settings = bench.settings(dsns[variant])

        def send(_: int) -> None:  # Producer._insert_all without the jobs that wait or have tags
            with transaction(conn), conn.cursor() as cur, store.bulk_insert(cur, renderer) as bulk:
                total = 0
                for rows in chunks(settings):
                    total += bulk.send(rows)
                total += bulk.wait()
            if total != n:
                raise RuntimeError(f"bulk {variant}: {total} of {n} rows inserted")
        return send

    senders["today"] = today_sender("today")
    senders["split"] = today_sender("split")
    if "trigger" in dsns:
        senders["trigger"] = today_sender("trigger")

    def select_sender(variant: str) -> Callable[[int], None]:
        select_conn = connect(dsns[variant])
        conns.append(select_conn)
        select_settings = bench.settings(dsns[variant])

        def send_select(_: int) -> None:
            conn = select_conn
            with transaction(conn):
                pending = chunks(select_settings)
                rows = next(pending, None)
                statement = renderer.statement("insert_jobs", rows, conn.literal) if rows else None
                while statement is not None and rows is not None:
                    conn.send_query(statement)
                    sent = len(rows)
                    rows = next(pending, None)  # rendered while the server inserts the chunk before
                    statement = renderer.statement("insert_jobs", rows, conn.literal) if rows else None
                    conn.read_query_result()
                    if conn.affected_rows():
                        first = int(conn.insert_id())  # the chunk's first new id
                        conn.query(NARROW_RANGE.format(first=first, last=first + sent - 1).encode())
                        if conn.affected_rows() != sent:
                            raise RuntimeError(f"bulk {variant}: {conn.affected_rows()} narrow rows for {sent}")
        return send_select

    senders["select"] = select_sender("select")
    senders["select_lean"] = select_sender("select_lean")
    bare_conn = bench.connect(dsns["bare"])
    conns.append(bare_conn)
    bare_cur = bare_conn.cursor()
    bench_bare.create_table(bare_cur)
    bare_payloads = [payload_bytes(i) for i in range(n)]
    senders["bare"] = lambda _: bench_bare.fill(bare_cur, bare_payloads)
    return senders


# ---------------------------------------------------------------------------- the section


def fresh_databases(bench: Bench, variants: tuple[str, ...], tag: str,
                    refused: dict[str, str]) -> dict[str, mysqlq.Dsn]:
    dsns: dict[str, mysqlq.Dsn] = {}
    for variant in variants:
        dsn = bench.fresh(f"w4flag_{tag}_{variant}", migrate=variant != "bare")
        if variant in FLAGGED:
            conn = bench.connect(dsn)
            try:
                refusal = flag_tables(conn.cursor(), trigger=variant == "trigger", lean=variant in LEAN)
            finally:
                conn.close()
            if refusal:
                refused.setdefault("trigger", refusal)
                bench.drop(dsn.database)
                continue
        if variant == "split":
            conn = bench.connect(dsn)
            try:
                conn.cursor().execute(SPLIT_SHAPE)
            finally:
                conn.close()
        dsns[variant] = dsn
    return dsns


def check_narrow_rows(bench: Bench, dsns: dict[str, mysqlq.Dsn]) -> None:
    for variant, dsn in dsns.items():
        if variant not in FLAGGED:
            continue
        conn = bench.connect(dsn)
        try:
            cur = conn.cursor()
            cur.execute("SELECT (SELECT COUNT(*) FROM mysqlq_jobs), (SELECT COUNT(*) FROM mysqlq_ready),"
                        " (SELECT COUNT(*) FROM mysqlq_ready r JOIN mysqlq_jobs j ON j.id = r.job_id)")
            wide, narrow, joined = (int(v) for v in cur.fetchone())
        finally:
            conn.close()
        if not wide == narrow == joined:
            raise RuntimeError(f"W4flag {variant}: {wide} jobs, {narrow} narrow rows, {joined} matching")


def _add(figures: dict[str, Figure], meters: dict[str, Meter], jobs: int) -> None:
    today = meters["today"]
    for variant, meter in meters.items():
        jobs_s = jobs / meter.seconds
        server_us = meter.server.us_per(jobs)
        counts = meter.counts
        figures[variant].add(jobs_s=jobs_s, server_us_job=server_us, ratio_today=today.seconds / meter.seconds,
                             server_vs_today=server_us / today.server.us_per(jobs))
        for name, key in (("Innodb_data_fsyncs", "data_fsyncs_job"), ("Innodb_os_log_fsyncs", "log_fsyncs_job"),
                          ("Innodb_os_log_written", "redo_bytes_job"), ("syscw", "server_writes_job")):
            if name in counts:
                figures[variant].add(**{key: counts[name] / jobs})


def w4_flag(bench: Bench, sizes: Sizes) -> list[Figure]:
    n, bulk_n = sizes.w4_singles, sizes.w4_bulk
    spread = ("jobs_s", "server_us_job", "ratio_today", "server_vs_today")
    singles = {v: Figure("W4flag", {"mode": "single", "variant": v, "n": str(n)}, spread=spread) for v in SINGLES}
    bulks = {v: Figure("W4flag", {"mode": "bulk", "variant": v, "n": str(bulk_n)}, spread=spread) for v in BULKS}
    refused: dict[str, str] = {}
    note(f"W4flag: the server's settings: {server_settings(bench)}")
    probe = bench.fresh("w4flag_probe")
    try:
        conn = bench.connect(probe)
        try:
            flag_tables(conn.cursor(), trigger=False)
        finally:
            conn.close()
        note(f"W4flag: may a user with ALL PRIVILEGES on the database only create the trigger? "
             f"{trigger_as_app_user(bench, probe)}")
    finally:
        bench.drop(probe.database)
    for run in range(bench.runs):
        note(f"W4flag run {run + 1}: {n} single enqueues per variant ({', '.join(SINGLES)}) in blocks of {BLOCK}, "
             f"the order rotated; then {BULK_ROUNDS} × enqueue_many of {bulk_n} per variant ({', '.join(BULKS)})")
        dsns = fresh_databases(bench, SINGLES, f"r{run}", refused)
        conns: list[Any] = []
        try:
            senders = single_senders(bench, dsns, conns, n)
            for send in senders.values():  # connected, statements warm: one job each, not timed
                send(range(n, n + 1))
            meters = {v: Meter(bench) for v in senders}
            order = list(senders)
            for block, start in enumerate(range(0, n, BLOCK)):
                numbers = range(start, min(start + BLOCK, n))
                turn = block % len(order)
                for variant in order[turn:] + order[:turn]:
                    with meters[variant].measure():
                        senders[variant](numbers)
            _add(singles, meters, n)
            check_narrow_rows(bench, dsns)
        finally:
            for conn in conns:
                conn.close()
            for dsn in dsns.values():
                bench.drop(dsn.database)
        dsns = fresh_databases(bench, BULKS, f"bulk_r{run}", refused)
        conns = []
        try:
            bulk_sending = bulk_senders(bench, dsns, conns, bulk_n)
            meters = {v: Meter(bench) for v in bulk_sending}
            order = list(bulk_sending)
            for round_ in range(BULK_ROUNDS):
                turn = round_ % len(order)
                for variant in order[turn:] + order[:turn]:
                    with meters[variant].measure():
                        bulk_sending[variant](round_)
            _add(bulks, meters, BULK_ROUNDS * bulk_n)
            check_narrow_rows(bench, dsns)
        finally:
            for conn in conns:
                conn.close()
            for dsn in dsns.values():
                bench.drop(dsn.database)
    if refused:
        note(f"W4flag: the server refused the trigger, so it is left out: {refused['trigger']}")
    return [emit(f) for f in [*singles.values(), *bulks.values()] if f.values]
