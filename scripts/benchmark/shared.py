"""What the workloads of docs/performance.md share: their sizes, mysqlq's default settings, and the
drains they time (mysqlq's workers, the bare-SQL loop, jobs that wait), with the CPU each side spends.

Worker processes are real ``mysqlq worker`` subprocesses with default settings except what the
workload names.
"""

from __future__ import annotations

import json
import pathlib
import resource
import subprocess
import sys
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

from mysqlq_harness.jobs import every_job
from mysqlq_harness.waiting import wait_for

import mysqlq
from benchmark import bare as bench_bare
from benchmark.common import (
    CLK_TCK,
    HERE,
    Bench,
    clean_env,
    connect_kwargs,
    fill_jobs,
    payload_bytes,
    pending,
    proc_cpu_ticks,
    status_counts,
    wait_drained,
)
from mysqlq.store import claims
from mysqlq.store.sql import query

DEFAULTS = mysqlq.Settings(dsn=mysqlq.Dsn())
BATCH = str(DEFAULTS.batch_size)  # the default claim size: the bare loop is run at the same one


@dataclass(frozen=True)
class Sizes:
    """How big each workload is: full (as docs/performance.md defines them) or --quick."""

    w1_jobs: int
    w2_seconds: float
    w3_seconds: float
    w4_singles: int
    w4_bulk: int
    w5_history: int
    w6_jobs: int  # a drain that lasts well past the kill: 5,000 could end before the bench looked (~0.15 s)
    strategy_jobs: int
    strategy_jobs_batch1: int
    w7_jobs: int
    w1_warm_jobs: int = 50_000

    @classmethod
    def for_mode(cls, quick: bool) -> Sizes:
        if quick:
            return cls(w1_jobs=5000, w2_seconds=3, w3_seconds=10, w4_singles=1000, w4_bulk=5000,
                       w5_history=200_000, w6_jobs=20_000, strategy_jobs=3000, strategy_jobs_batch1=600, w7_jobs=1000,
                       w1_warm_jobs=10_000)
        return cls(w1_jobs=20_000, w2_seconds=10, w3_seconds=30, w4_singles=5000, w4_bulk=20_000,
                   w5_history=2_000_000, w6_jobs=20_000, strategy_jobs=5000, strategy_jobs_batch1=1500, w7_jobs=2000)


@dataclass
class Drain:
    jobs: int
    wall: float  # from starting the processes until every job is done
    steady: float  # from the first claim to the last recorded outcome
    startup: float  # from starting the processes until the first claim
    cpu: float = float("nan")  # CPU seconds (user + system) of the drain's processes, start-up included
    server_cpu: float = float("nan")  # CPU seconds of the server meanwhile (a private server only)

    @property
    def jobs_s(self) -> float:
        return self.jobs / self.wall

    @property
    def steady_jobs_s(self) -> float:
        return self.jobs / self.steady if self.steady > 0 else float("nan")

    @property
    def cpu_us_job(self) -> float:
        return self.cpu * 1e6 / self.jobs

    @property
    def server_us_job(self) -> float:
        return self.server_cpu * 1e6 / self.jobs


def children_cpu() -> float:
    """CPU seconds used so far by this process's finished children (the drain's processes, once reaped):
    load on a shared machine stretches wall time far more than it does CPU time."""
    usage = resource.getrusage(resource.RUSAGE_CHILDREN)
    return usage.ru_utime + usage.ru_stime


def drain_mysqlq(bench: Bench, name: str, k: int, n: int, options: Sequence[str] = (),
                 global_options: Sequence[str] = (), dsn: mysqlq.Dsn | None = None,
                 after_fill: Callable[[Any], None] | None = None, env: dict[str, str] | None = None,
                 history: bool = True, fill: Callable[[mysqlq.Dsn], None] | None = None) -> Drain:
    """W1: put N jobs in the table, start K workers, time until every job is done.

    With ``dsn`` the jobs go into that (existing) database, e.g. one holding history (W5);
    ``after_fill`` changes the jobs (on the cursor) before the workers start; ``env`` is added to theirs;
    ``fill`` puts the N jobs in the database instead of fill_jobs (through the Producer API, say).
    Without ``history`` the installation keeps none (`mysqlq history off --all`): the jobs are deleted
    as they complete, and the drain's steady time is its wall time (no row is left to time it by).
    """
    own = dsn is None
    if dsn is None:
        dsn = bench.fresh(name)
    conn = bench.connect(dsn)
    cur = conn.cursor()
    cur.execute("SET time_zone = '+00:00'")  # mysqlq stores UTC
    cur.execute(f"SELECT COALESCE(MAX(id), 0) FROM {every_job('id')}")
    since = int(cur.fetchone()[0])
    if fill is None:
        fill_jobs(cur, n)
    else:
        fill(dsn)
    if after_fill is not None:
        after_fill(cur)
    if not history:
        cur.execute("INSERT INTO mysqlq_queues (name, keep_done) VALUES ('', 0) ON DUPLICATE KEY UPDATE keep_done = 0")
    started_wall = time.time()
    started = time.perf_counter()
    cpu, server = children_cpu(), server_cpu(bench)
    workers = bench.workers(dsn, k, *options, tag=name, global_options=global_options, env=env)
    try:
        ended = wait_drained(cur, workers, timeout=max(120.0, n / 50))
        server = cpu_since(server_cpu(bench), server)
    finally:
        workers.stop()
    cpu = children_cpu() - cpu
    if not history:
        cur.execute(f"SELECT COUNT(*) FROM {every_job('id')} WHERE id > %s", (since,))
        left = int(cur.fetchone()[0])
        if left:
            raise RuntimeError(f"{name}: expected every job deleted as it completed, found {status_counts(cur)}")
        cur.execute("DELETE FROM mysqlq_queues WHERE name = ''")
        conn.close()
        if own:
            bench.drop(dsn.database)
            workers.log.unlink(missing_ok=True)
        return Drain(n, ended - started, ended - started, 0.0, cpu, server)
    cur.execute("SELECT COUNT(*), UNIX_TIMESTAMP(MIN(started_at)), UNIX_TIMESTAMP(MAX(finished_at)),"
                f" SUM(status = 'done') FROM {every_job('id, status, started_at, finished_at')} WHERE id > %s",
                (since,))
    count, first, last, done = cur.fetchone()
    if int(done or 0) != n or int(count) != n:
        raise RuntimeError(f"{name}: expected {n} done jobs, found {status_counts(cur)}")
    conn.close()
    if own:
        bench.drop(dsn.database)
        workers.log.unlink(missing_ok=True)
    return Drain(n, ended - started, float(last) - float(first), float(first) - started_wall, cpu, server)


def ceiling_statements() -> str:
    """mysqlq's own claim, read-back and batch ack, for bare.py's ``--statements`` (the W1 ceiling),
    and the queries the worker sends them in (one per batch: the ended batch's ack, the claim, the
    read-back). Its jobs have no dedupe key, so the completion is the worker's for such a batch: without
    the statement that marks forever-keyed jobs done in place."""
    return json.dumps({"claim": query("claim_batch"), "fetch": query("fetch_batch"), "ack": query("complete_batch"),
                       "first": claims.claim_query(False), "next": claims.claim_query(True, in_place=False),
                       "ended_sets": len(claims.batch_completion(False, in_place=False)),
                       "waiting": "SELECT 1 FROM mysqlq_jobs WHERE running_batch = 0 AND status = 'ready'"
                                  " AND queue = 'default' LIMIT 1"})


def drain_bare(bench: Bench, name: str, k: int, n: int, batch: int = DEFAULTS.batch_size, claim: str = "update",
               isolation: str | None = None, ceiling: bool = False) -> Drain:
    """The bare-SQL reference loop: K processes of bare.py on a fresh job_queue table. With ``ceiling``,
    the same loop runs mysqlq's own statements on a fresh mysqlq_jobs, in the worker's queries (one per
    batch: the ended batch's ack, the claim, the read-back): what the schema allows
    with nothing around the statements (no checks, no outcomes kept, no logs, no start-up)."""
    dsn = bench.fresh(name, migrate=ceiling)
    conn = bench.connect(dsn)
    cur = conn.cursor()
    if ceiling:
        fill_jobs(cur, n)
    else:
        bench_bare.create_table(cur)
        bench_bare.fill(cur, [payload_bytes(i) for i in range(n)])
    args = [sys.executable, str(HERE / "bare.py"), "drain", "--conn",
            json.dumps(connect_kwargs(dsn, dsn.database)), "--batch", str(batch), "--claim", claim]
    if isolation:
        args += ["--isolation", isolation]
    if ceiling:
        args += ["--statements", ceiling_statements()]
    started_wall = time.time()
    started = time.perf_counter()
    cpu, server = children_cpu(), server_cpu(bench)
    procs = [subprocess.Popen(args, stdout=subprocess.PIPE, env=clean_env({})) for _ in range(k)]
    outputs = [proc.communicate(timeout=max(120.0, n / 50))[0] for proc in procs]
    ended = time.perf_counter()
    cpu, server = children_cpu() - cpu, cpu_since(server_cpu(bench), server)
    if any(proc.returncode for proc in procs):
        raise RuntimeError(f"{name}: a bare drainer failed")
    results = [json.loads(out) for out in outputs]
    jobs = sum(r["jobs"] for r in results)
    cur.execute(f"SELECT COUNT(*) FROM {every_job('status')} WHERE status = 'done'" if ceiling
                else "SELECT COUNT(*) FROM job_queue WHERE status = 2")
    if jobs != n or int(cur.fetchone()[0]) != n:
        raise RuntimeError(f"{name}: the bare loop did {jobs} of {n} jobs")
    first = min(r["first"] for r in results if r["first"] is not None)
    last = max(r["last"] for r in results if r["last"] is not None)
    conn.close()
    bench.drop(dsn.database)
    return Drain(n, ended - started, last - first, first - started_wall, cpu, server)


def cpu_since(now: float | None, before: float | None) -> float:
    """CPU seconds between two server_cpu() readings; NaN when the server is not ours to read."""
    return now - before if now is not None and before is not None else float("nan")


def server_cpu(bench: Bench) -> float | None:
    pid = bench.server_pid
    return proc_cpu_ticks(pid) / CLK_TCK if pid else None


class ServerCpu:
    """The server's CPU seconds summed over timed stretches (``with meter: …``), e.g. one side of
    alternating blocks; NaN when the server is not ours to read. ``/proc`` counts in ticks of 10 ms:
    sum stretches that add up to a second or more."""

    def __init__(self, bench: Bench) -> None:
        self.bench = bench
        self.seconds = 0.0
        self._before: float | None = None

    def __enter__(self) -> ServerCpu:
        self._before = server_cpu(self.bench)
        return self

    def __exit__(self, *exc: object) -> None:
        self.seconds += cpu_since(server_cpu(self.bench), self._before)

    def us_per(self, jobs: int) -> float:
        return self.seconds * 1e6 / jobs


def rss_kib(pid: int) -> int:
    """Resident set size of a process, from /proc/PID/status (0 once it is gone)."""
    try:
        for line in pathlib.Path(f"/proc/{pid}/status").read_text().splitlines():
            if line.startswith("VmRSS:"):
                return int(line.split()[1])
    except OSError:
        pass
    return 0


@dataclass
class WaitDrain:
    jobs: int
    wall: float  # from starting the processes until every job is done
    steady: float  # from the first job's start to the last job's end
    rss_mib: float  # the largest resident set of one worker seen during the run
    per_worker: dict[str, int]


def drain_waiting(bench: Bench, name: str, k: int, jobs: Sequence[bytes], handler: str,
                  options: Sequence[str] = ()) -> WaitDrain:
    """Put ``jobs`` (payloads) for ``handler`` in a fresh table, start K workers, wait until all are done
    (and, for ``--burst`` workers, until they have left by themselves)."""
    dsn = bench.fresh(name)
    conn = bench.connect(dsn)
    cur = conn.cursor()
    fill_jobs(cur, len(jobs), handler=handler, payloads=jobs)
    started = time.perf_counter()
    workers = bench.workers(dsn, k, *options, tag=name)
    burst = "--burst" in options
    rss = [0]  # the largest resident set seen (KiB)

    def finished() -> bool:
        if not pending(cur) and not (burst and workers.pids):
            return True
        workers.check_alive()
        rss[0] = max([rss[0], *(rss_kib(pid) for pid in workers.pids)])
        return False

    try:
        wait_for(finished, f"{name}: every job to be finished", max(120.0, len(jobs) / 5), interval=0.01)
        ended = time.perf_counter()
    finally:
        workers.stop()
    cur.execute("SELECT COUNT(*), SUM(status = 'done'),"
                " TIMESTAMPDIFF(MICROSECOND, MIN(started_at), MAX(finished_at))"
                f" FROM {every_job('status, started_at, finished_at')}")
    count, done, span_us = cur.fetchone()
    if int(count) != len(jobs) or int(done or 0) != len(jobs):
        raise RuntimeError(f"{name}: expected {len(jobs)} done jobs, found {status_counts(cur)}")
    cur.execute(f"SELECT worker, COUNT(*) FROM {every_job('worker')} GROUP BY worker")
    per_worker = {str(worker): int(n) for worker, n in cur.fetchall()}
    conn.close()
    bench.drop(dsn.database)
    workers.log.unlink(missing_ok=True)
    return WaitDrain(len(jobs), ended - started, span_us / 1e6, rss[0] / 1024, per_worker)
