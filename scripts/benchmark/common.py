"""Plumbing for ``scripts/bench``: the server, fresh databases, worker processes, figures and their lines.

Nothing here measures anything by itself; the workload modules (:mod:`benchmark.drain` …) do.
"""

from __future__ import annotations

import compileall
import contextlib
import json
import os
import pathlib
import shutil
import signal
import statistics
import subprocess
import sys
import tempfile
import time
import urllib.parse
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field
from typing import Any

import MySQLdb
from mysqlq_harness.jobs import every_job
from mysqlq_harness.lifecycle import child_env
from mysqlq_harness.waiting import stop_processes, wait_for

import mysqlq

HERE = pathlib.Path(__file__).resolve().parent  # bare.py and producer.py run from here as scripts of their own
BIN = pathlib.Path(sys.executable).parent
MYSQLQ = str(BIN / "mysqlq")
DB_PREFIX = "mysqlq_bench_"
PAD = "x" * 80  # payloads {"n": i, "pad": PAD} are ~100 bytes of JSON
CLK_TCK = os.sysconf("SC_CLK_TCK")


def payload(n: int) -> dict[str, Any]:
    return {"n": n, "pad": PAD}


def payload_bytes(n: int) -> bytes:
    return json.dumps(payload(n), separators=(",", ":")).encode()


# ---------------------------------------------------------------------------- figures


def median(values: Sequence[float]) -> float:
    return float(statistics.median(values)) if values else float("nan")


def percentile(values: Sequence[float], p: float) -> float:
    """Linear-interpolated percentile (p in 0..100) of unsorted values."""
    if not values:
        return float("nan")
    ordered = sorted(values)
    rank = (len(ordered) - 1) * p / 100
    low = int(rank)
    high = min(low + 1, len(ordered) - 1)
    return ordered[low] + (ordered[high] - ordered[low]) * (rank - low)


def fmt(value: float) -> str:
    """Numbers as they appear in the output: 3 significant-ish digits, no exponent."""
    if value != value:  # NaN
        return "nan"
    magnitude = abs(value)
    if magnitude >= 100:
        return f"{value:.0f}"
    if magnitude >= 10:
        return f"{value:.1f}"
    if magnitude >= 1:
        return f"{value:.2f}"
    return f"{value:.3f}"


@dataclass
class Figure:
    """One output line: ``workload label=… metric=median metric_min=… metric_max=… …``.

    ``spread`` names the metrics whose min and max are printed next to the median.
    """

    workload: str
    labels: dict[str, str]
    values: dict[str, list[float]] = field(default_factory=dict)
    spread: tuple[str, ...] = ()

    def add(self, **metrics: float) -> None:
        for name, value in metrics.items():
            self.values.setdefault(name, []).append(float(value))

    def add_list(self, name: str, values: Sequence[float]) -> None:
        self.values.setdefault(name, []).extend(float(v) for v in values)

    def get(self, metric: str) -> float:
        return median(self.values.get(metric, []))

    def line(self) -> str:
        parts = [self.workload, *(f"{k}={v}" for k, v in self.labels.items())]
        for name, values in self.values.items():
            parts.append(f"{name}={fmt(median(values))}")
            if name in self.spread and len(values) > 1:
                parts.append(f"{name}_min={fmt(min(values))}")
                parts.append(f"{name}_max={fmt(max(values))}")
        runs = max((len(v) for v in self.values.values()), default=0)
        parts.append(f"runs={runs}")
        return " ".join(parts)


def write_json(path: str, figures: Sequence[Figure], context: dict[str, Any]) -> None:
    """The figures as JSON, for programs: each with its labels, and per metric the median, min, max
    and every run's value (null where not measured); ``context`` says where and how they were measured."""

    def number(value: float) -> float | None:
        return None if value != value else value  # NaN is no JSON

    found = []
    for fig in figures:
        metrics = {name: {"median": number(median(values)), "min": number(min(values)), "max": number(max(values)),
                          "runs": [number(v) for v in values]}
                   for name, values in fig.values.items() if values}
        found.append({"workload": fig.workload, "labels": fig.labels, "metrics": metrics})
    text = json.dumps({**context, "figures": found}, indent=1, ensure_ascii=False)
    pathlib.Path(path).write_text(text + "\n")


def emit(figure: Figure) -> Figure:
    print(figure.line(), flush=True)
    return figure


def note(text: str) -> None:
    """Progress and context on stderr, so stdout holds only figures and the table."""
    print(f"# {text}", file=sys.stderr, flush=True)


# ---------------------------------------------------------------------------- server and databases


def connect_kwargs(dsn: mysqlq.Dsn, database: str | None = None) -> dict[str, Any]:
    """mysqlclient connect() arguments for a DSN (plain JSON-able values, for bare.py)."""
    kwargs: dict[str, Any] = {"user": dsn.user}
    if dsn.password:
        kwargs["passwd"] = dsn.password
    if dsn.unix_socket:
        kwargs["unix_socket"] = dsn.unix_socket
    else:
        kwargs.update(host=dsn.host, port=dsn.port)
    if database:
        kwargs["database"] = database
    return kwargs


def with_database(dsn: mysqlq.Dsn, database: str) -> mysqlq.Dsn:
    return mysqlq.Dsn(host=dsn.host, port=dsn.port, user=dsn.user, password=dsn.password, database=database,
                      unix_socket=dsn.unix_socket)


def dsn_url(dsn: mysqlq.Dsn) -> str:
    """The DSN as a URL the CLI accepts (with the password: it goes on a child's command line only)."""
    auth = urllib.parse.quote(dsn.user, safe="")
    if dsn.password:
        auth += ":" + urllib.parse.quote(dsn.password, safe="")
    if dsn.unix_socket:
        sock = urllib.parse.quote(dsn.unix_socket, safe="/")
        return f"mysql://{auth}@localhost/{dsn.database}?unix_socket={sock}"
    tls = "" if dsn.ssl_mode == "PREFERRED" else f"?ssl_mode={dsn.ssl_mode}"
    return f"mysql://{auth}@{dsn.host}:{dsn.port}/{dsn.database}{tls}"


class Bench:
    """The server under test, a scratch directory, and helpers every workload uses."""

    def __init__(self, quick: bool, runs: int, options: Sequence[str] = ()) -> None:
        """``options``: further options for the private server (none for the workloads: they measure
        a server with its default settings)."""
        self.quick = quick
        self.runs = runs
        self.tmp = pathlib.Path(tempfile.mkdtemp(prefix="mysqlq-bench-"))
        self.hint_dir = self.tmp / "hints"
        self.hint_dir.mkdir(mode=0o700)
        self.server: Any = None
        given = os.environ.get("MYSQLQ_DSN")
        if given:
            self.base = mysqlq.Dsn.parse(given)
            self.where = f"MYSQLQ_DSN ({self.base.redacted()})"
        elif os.environ.get("MYSQLQ_BENCH_SERVER") == "mysql":
            from mysqlq_harness.mysql import PrivateMySQL

            self.server = PrivateMySQL(self.tmp / "mysql", die_with_parent=True, options=options)
            self.server.start()
            self.base = mysqlq.Dsn.parse(self.server.dsn)
            self.where = "a private MySQL mysqld (mysqlq_harness.mysql, default server settings)"
        else:
            from mysqlq_harness.mariadb import PrivateMariaDB

            self.server = PrivateMariaDB(self.tmp / "mariadb", die_with_parent=True, options=options)
            self.server.start()
            self.base = mysqlq.Dsn.parse(self.server.dsn)
            self.where = "a private mariadbd (mysqlq_harness.mariadb, default server settings)"
        self.admin = MySQLdb.connect(autocommit=True, charset="utf8mb4", **connect_kwargs(self.base))
        self.cur = self.admin.cursor()
        try:
            self.cur.execute("SELECT @@transaction_isolation")
        except MySQLdb.OperationalError:  # MariaDB before 11.1 knows only tx_isolation
            self.cur.execute("SELECT @@tx_isolation")
        isolation = self.cur.fetchone()[0]
        self.cur.execute("SELECT VERSION(), @@innodb_buffer_pool_size, @@innodb_flush_log_at_trx_commit")
        version, pool, flush = self.cur.fetchone()
        self.server_version = str(version)
        self.server_isolation = str(isolation).replace("-", " ")
        self.server_info = (f"{version}, buffer pool {int(pool) >> 20} MiB, isolation {self.server_isolation}, "
                            f"innodb_flush_log_at_trx_commit={flush}")
        self._databases: set[str] = set()
        self.processes: list[subprocess.Popen[bytes]] = []
        self._migrate = _in_process_migrate()
        compile_package()

    @property
    def server_pid(self) -> int | None:
        return self.server.pid if self.server is not None else None

    def close(self) -> None:
        for proc in self.processes:
            if proc.poll() is None:
                proc.kill()
                proc.wait()
        for name in list(self._databases):
            with contextlib.suppress(MySQLdb.Error):
                self.drop(name)
        self.admin.close()
        if self.server is not None:
            self.server.stop()
        shutil.rmtree(self.tmp, ignore_errors=True)

    def fresh(self, name: str, migrate: bool = True) -> mysqlq.Dsn:
        """A new empty database (dropped first if left over), with mysqlq's schema when ``migrate``."""
        database = DB_PREFIX + name
        self.cur.execute(f"DROP DATABASE IF EXISTS `{database}`")
        self.cur.execute(f"CREATE DATABASE `{database}`")
        self._databases.add(database)
        dsn = with_database(self.base, database)
        if migrate:
            self._migrate(dsn)
        return dsn

    def drop(self, database: str) -> None:
        self.cur.execute(f"DROP DATABASE IF EXISTS `{database}`")
        self._databases.discard(database)

    def connect(self, dsn: mysqlq.Dsn) -> Any:
        return MySQLdb.connect(autocommit=True, charset="utf8mb4", **connect_kwargs(dsn, dsn.database))

    def settings(self, dsn: mysqlq.Dsn, **changes: Any) -> mysqlq.Settings:
        """Producer settings: defaults, with the bench's own hint directory."""
        return mysqlq.Settings(dsn=dsn, hint_dir=str(self.hint_dir), **changes)

    # -------------------------------------------------------------------- workers

    def workers(self, dsn: mysqlq.Dsn, k: int, *options: str, tag: str, global_options: Sequence[str] = (),
                env: dict[str, str] | None = None, host: Sequence[str] = ()) -> Workers:
        """Start K ``mysqlq worker`` processes with default settings plus ``options``; stderr to a log file."""
        return Workers(self, dsn, k, options, tag, global_options, env or {}, host)

    def spawn(self, args: Sequence[str], *, env: dict[str, str], log: pathlib.Path) -> subprocess.Popen[bytes]:
        with log.open("ab") as err:
            proc = subprocess.Popen(list(args), stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=err,
                                    env=env)
        self.processes.append(proc)
        return proc

    def questions(self) -> int:
        self.cur.execute("SHOW GLOBAL STATUS LIKE 'Questions'")
        return int(self.cur.fetchone()[1])


def compile_package() -> None:
    """Write mysqlq's bytecode before any worker starts, as ``pip install`` does for a real install.

    An editable install under ``PYTHONDONTWRITEBYTECODE`` (set on some machines) would otherwise
    compile every module from source at each worker's start, about 60 ms of CPU that no deployed
    worker pays, and the drains count start-up.
    """
    with contextlib.suppress(OSError):
        compileall.compile_dir(pathlib.Path(mysqlq.__file__).parent, quiet=2)


def _in_process_migrate() -> Any:
    """Migrate through the library when its internals are where we expect, else through the CLI."""
    try:
        from mysqlq.store.db import Database
        from mysqlq.store.schema import migrate

        def run(dsn: mysqlq.Dsn) -> None:
            db = Database(dsn)
            try:
                db.run(lambda cur: migrate(cur, dsn.database))
            finally:
                db.close()

        return run
    except ImportError:
        def cli(dsn: mysqlq.Dsn) -> None:
            subprocess.run([MYSQLQ, "--dsn", dsn_url(dsn), "migrate"], check=True, stdout=subprocess.DEVNULL)

        return cli


def clean_env(extra: dict[str, str]) -> dict[str, str]:
    """The environment for children: no MYSQLQ_* settings of the caller, no systemd of its, plus ``extra``."""
    return child_env(extra, keep_settings=False)


class Workers:
    """K ``mysqlq worker`` processes named ``<tag>-<i>``."""

    def __init__(self, bench: Bench, dsn: mysqlq.Dsn, k: int, options: Sequence[str], tag: str,
                 global_options: Sequence[str], env: dict[str, str], host: Sequence[str] = ()) -> None:
        self.host = list(host)  # a command prefix that runs them on another (test) host: ip netns exec NS
        self.bench = bench
        self.dsn = dsn
        self.options = list(options)
        self.tag = tag
        self.global_options = list(global_options)
        self.env = clean_env({"MYSQLQ_HINT_DIR": str(bench.hint_dir), **env})
        self.log = bench.tmp / f"{tag}.log"
        self.procs: dict[str, subprocess.Popen[bytes]] = {}
        self.started = time.perf_counter()
        for _ in range(k):
            self.add()

    def add(self) -> str:
        name = f"{self.tag}-{len(self.procs) + 1}"
        args = [*self.host, MYSQLQ, "--dsn", dsn_url(self.dsn), *self.global_options, "worker", "--name", name,
                *self.options]
        self.procs[name] = self.bench.spawn(args, env=self.env, log=self.log)
        return name

    @property
    def pids(self) -> list[int]:
        return [p.pid for p in self.procs.values() if p.poll() is None]

    def cpu_seconds(self) -> float:
        """utime + stime of the live workers (all threads), from /proc/PID/stat."""
        total = 0
        for pid in self.pids:
            total += proc_cpu_ticks(pid)
        return total / CLK_TCK

    def wait_registered(self, cur: Any, count: int, timeout: float = 30.0) -> None:
        """Until ``count`` workers are in the registry (i.e. started and connected)."""

        def registered() -> bool:
            cur.execute("SELECT COUNT(*) FROM mysqlq_workers")
            if cur.fetchone()[0] >= count:
                return True
            self.check_alive()
            return False

        wait_for(registered, f"workers {self.tag} to register (see {self.log})", timeout, interval=0.02)

    def check_alive(self) -> None:
        for name, proc in self.procs.items():
            if proc.poll() is not None and proc.returncode not in (0, -signal.SIGKILL):
                raise RuntimeError(f"worker {name} exited with {proc.returncode}; see {self.log}:\n"
                                   + tail(self.log))

    def stop(self, timeout: float = 15.0) -> None:
        """SIGTERM every worker and wait; SIGKILL whoever is still there after ``timeout``."""
        stop_processes(self.procs.values(), timeout)
        bad = {name: p.returncode for name, p in self.procs.items() if p.returncode not in (0, -signal.SIGKILL)}
        if bad:
            note(f"workers exited abnormally: {bad}; log {self.log}")

    def __enter__(self) -> Workers:
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop()


def proc_cpu_ticks(pid: int) -> int:
    try:
        stat = pathlib.Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return 0
    fields = stat.rsplit(")", 1)[1].split()
    return int(fields[11]) + int(fields[12])  # utime, stime (fields 14 and 15 of proc(5))


def tail(path: pathlib.Path, lines: int = 15) -> str:
    try:
        return "\n".join(path.read_text(errors="replace").splitlines()[-lines:])
    except OSError:
        return ""


# ---------------------------------------------------------------------------- jobs in the table

JOB_COLUMNS = "queue, handler, payload, status, priority, run_at, max_attempts, enqueued_at"
JOB_VALUES = "('default', %s, %s, 'ready', 0, NOW(6), 5, NOW(6))"
FILL_CHUNK = 1000


def fill_jobs(cur: Any, n: int, handler: str = "bench.noop", payloads: Sequence[bytes] | None = None) -> None:
    """Put ``n`` ready jobs in ``mysqlq_jobs``, as ``Producer.enqueue_many`` would, but in multi-row INSERTs.

    (``enqueue_many`` itself is measured in W4; this is only W1's setup, kept fast.)
    """
    data = payloads if payloads is not None else [payload_bytes(i) for i in range(n)]
    for start in range(0, n, FILL_CHUNK):
        chunk = data[start : start + FILL_CHUNK]
        params: list[Any] = []
        for item in chunk:
            params += [handler, item]
        cur.execute(f"INSERT INTO mysqlq_jobs ({JOB_COLUMNS}) VALUES " + ", ".join([JOB_VALUES] * len(chunk)), params)


def pending(cur: Any) -> bool:
    """Is any job not finished yet? (Cheap index probes: the running rows of mysqlq_jobs_live, and its
    ready, scheduled, blocked and waiting ranges; a probe by status alone would read the history.)"""
    # (running_batch 0 counts as "none" too: a token is never 0)
    cur.execute("SELECT EXISTS(SELECT 1 FROM mysqlq_jobs WHERE running_batch > 0)"
                " OR EXISTS(SELECT 1 FROM mysqlq_jobs WHERE (running_batch IS NULL OR running_batch = 0)"
                "           AND status IN ('ready', 'scheduled', 'blocked', 'waiting'))")
    return bool(cur.fetchone()[0])


def wait_drained(cur: Any, workers: Workers | None, timeout: float, interval: float = 0.01) -> float:
    """Poll until every job is finished (:func:`pending`); returns time.perf_counter() at that moment."""

    def drained() -> bool:
        if not pending(cur):
            return True
        if workers is not None:
            workers.check_alive()
        return False

    wait_for(drained, "every job to be finished", timeout, interval)
    return time.perf_counter()


def recorded_latencies(record: pathlib.Path, sent: int, name: str) -> list[float]:
    """The start-minus-enqueue times (ms) bench.latency wrote to ``record``: one a job sent, or an error."""
    latencies = [float(line) for line in record.read_text().split()]
    if len(latencies) != sent:
        raise RuntimeError(f"{name}: {sent} jobs sent, {len(latencies)} latencies recorded")
    return latencies


def status_counts(cur: Any) -> dict[str, int]:
    """Every job's status, live or moved to the history (an older commit's schema, --against, has no
    history table: its live table then)."""
    cur.execute("SELECT COUNT(*) FROM information_schema.TABLES WHERE TABLE_SCHEMA = DATABASE()"
                " AND TABLE_NAME = 'mysqlq_jobs_history'")
    jobs = every_job("status") if cur.fetchone()[0] else "mysqlq_jobs"
    cur.execute(f"SELECT status, COUNT(*) FROM {jobs} GROUP BY status")
    return {str(status): int(count) for status, count in cur.fetchall()}


@contextlib.contextmanager
def timer() -> Iterator[list[float]]:
    """``with timer() as t: …`` then ``t[0]`` is the elapsed seconds."""
    box: list[float] = []
    started = time.perf_counter()
    try:
        yield box
    finally:
        box.append(time.perf_counter() - started)
