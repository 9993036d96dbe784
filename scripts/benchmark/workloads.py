"""The workloads of docs/performance.md (W1–W8) and the claim-strategy comparison, each a function of a Bench.

Every function runs its workload ``bench.runs`` times, prints one line per figure as soon as it is
known, and returns the figures (for the summary table).  Worker processes are real ``mysqlq worker``
subprocesses with default settings except what the workload names.
"""

from __future__ import annotations

import asyncio
import collections
import contextlib
import json
import math
import os
import pathlib
import re
import resource
import signal
import socket
import subprocess
import sys
import threading
import time
from collections.abc import Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from typing import Any

import MySQLdb
from mysqlq_harness import netns as netns_hosts
from mysqlq_harness.waiting import TimedOut, wait_done, wait_for

import mysqlq
from benchmark import bare as bench_bare
from benchmark.common import (
    CLK_TCK,
    DB_PREFIX,
    HERE,
    MYSQLQ,
    Bench,
    Figure,
    Workers,
    clean_env,
    connect_kwargs,
    dsn_url,
    emit,
    fill_jobs,
    note,
    payload,
    payload_bytes,
    pending,
    percentile,
    proc_cpu_ticks,
    recorded_latencies,
    status_counts,
    timer,
    wait_drained,
    with_database,
)
from benchmark.producer import paced
from mysqlq.producer.enqueue import BULK_CHUNK
from mysqlq.store import claims, schema
from mysqlq.store.db import Database
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


# ---------------------------------------------------------------------------- one drain


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
                 global_options: Sequence[str] = (), dsn: mysqlq.Dsn | None = None) -> Drain:
    """W1: put N jobs in the table, start K workers, time until every job is done.

    With ``dsn`` the jobs go into that (existing) database, e.g. one holding history (W5).
    """
    own = dsn is None
    if dsn is None:
        dsn = bench.fresh(name)
    conn = bench.connect(dsn)
    cur = conn.cursor()
    cur.execute("SET time_zone = '+00:00'")  # mysqlq stores UTC
    cur.execute("SELECT COALESCE(MAX(id), 0) FROM mysqlq_jobs")
    since = int(cur.fetchone()[0])
    fill_jobs(cur, n)
    started_wall = time.time()
    started = time.perf_counter()
    cpu, server = children_cpu(), server_cpu(bench)
    workers = bench.workers(dsn, k, *options, tag=name, global_options=global_options)
    try:
        ended = wait_drained(cur, workers, timeout=max(120.0, n / 50))
        server = cpu_since(server_cpu(bench), server)
    finally:
        workers.stop()
    cpu = children_cpu() - cpu
    cur.execute("SELECT COUNT(*), UNIX_TIMESTAMP(MIN(started_at)), UNIX_TIMESTAMP(MAX(finished_at)),"
                " SUM(status = 'done') FROM mysqlq_jobs WHERE id > %s", (since,))
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
    read-back)."""
    return json.dumps({"claim": query("claim_batch"), "fetch": query("fetch_batch"), "ack": query("complete_batch"),
                       "first": claims.claim_query(False), "next": claims.claim_query(True),
                       "waiting": "SELECT 1 FROM mysqlq_jobs WHERE ready_queue = 'default' LIMIT 1"})


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
    cur.execute("SELECT COUNT(*) FROM mysqlq_jobs WHERE status = 'done'" if ceiling
                else "SELECT COUNT(*) FROM job_queue WHERE status = 2")
    if jobs != n or int(cur.fetchone()[0]) != n:
        raise RuntimeError(f"{name}: the bare loop did {jobs} of {n} jobs")
    first = min(r["first"] for r in results if r["first"] is not None)
    last = max(r["last"] for r in results if r["last"] is not None)
    conn.close()
    bench.drop(dsn.database)
    return Drain(n, ended - started, last - first, first - started_wall, cpu, server)


# ---------------------------------------------------------------------------- W1


def w1(bench: Bench, sizes: Sizes) -> list[Figure]:
    n = sizes.w1_jobs
    mq = {k: Figure("W1", {"k": str(k), "batch": BATCH, "n": str(n)}, spread=("jobs_s",)) for k in (2, 4)}
    bare = {k: Figure("W1", {"k": str(k), "batch": BATCH, "n": str(n), "loop": "bare"}, spread=("jobs_s",))
            for k in (2, 4)}
    quiet = Figure("W1", {"k": "2", "batch": BATCH, "n": str(n), "log_level": "warning"}, spread=("jobs_s",))
    # One slot is the loop as it was before workers had slots: the default must not be slower.
    one = Figure("W1", {"k": "2", "batch": BATCH, "n": str(n), "concurrency": "1"}, spread=("jobs_s",))
    ratios: dict[int, list[tuple[float, float]]] = {2: [], 4: []}
    quiet_ratio: list[float] = []
    for run in range(bench.runs):
        for k in (2, 4):
            note(f"W1 run {run + 1}: K={k} mysqlq, then bare")
            d = drain_mysqlq(bench, f"w1_k{k}_r{run}", k, n)
            if k == 2:  # right after the default, so that both see the same load
                note(f"W1 run {run + 1}: K=2 mysqlq --concurrency 1")
                o = drain_mysqlq(bench, f"w1_one_r{run}", 2, n, options=["--concurrency", "1"])
                one.add(jobs_s=o.jobs_s, steady_jobs_s=o.steady_jobs_s, startup_s=o.startup,
                        cpu_us_job=o.cpu_us_job)
            b = drain_bare(bench, f"w1b_k{k}_r{run}", k, n)
            c = drain_bare(bench, f"w1c_k{k}_r{run}", k, n, ceiling=True)
            mq[k].add(jobs_s=d.jobs_s, steady_jobs_s=d.steady_jobs_s, startup_s=d.startup, cpu_us_job=d.cpu_us_job,
                      server_us_job=d.server_us_job, ceiling_ratio_bare=c.jobs_s / b.jobs_s,
                      ceiling_ratio_bare_steady=c.steady_jobs_s / b.steady_jobs_s,
                      ceiling_server_us_job=c.server_us_job)
            bare[k].add(jobs_s=b.jobs_s, steady_jobs_s=b.steady_jobs_s, cpu_us_job=b.cpu_us_job,
                        server_us_job=b.server_us_job)
            ratios[k].append((d.jobs_s / b.jobs_s, d.steady_jobs_s / b.steady_jobs_s))
        note(f"W1 run {run + 1}: K=2 mysqlq --log-level warning")
        q = drain_mysqlq(bench, f"w1_quiet_r{run}", 2, n, global_options=["--log-level", "warning"])
        quiet.add(jobs_s=q.jobs_s, steady_jobs_s=q.steady_jobs_s, startup_s=q.startup)
        quiet_ratio.append(q.jobs_s / bare[2].values["jobs_s"][-1])
    for k in (2, 4):
        mq[k].add_list("bare_jobs_s", bare[k].values["jobs_s"])
        mq[k].add_list("ratio_bare", [r[0] for r in ratios[k]])
        mq[k].add_list("ratio_bare_steady", [r[1] for r in ratios[k]])
        mq[k].spread = ("jobs_s", "ratio_bare")
    quiet.add_list("ratio_bare", quiet_ratio)
    quiet.add_list("ratio_default_logging", [a / b for a, b in zip(quiet.values["jobs_s"], mq[2].values["jobs_s"],
                                                                    strict=True)])
    one.add_list("ratio_bare", [a / b for a, b in zip(one.values["jobs_s"], bare[2].values["jobs_s"], strict=True)])
    one.add_list("cpu_default_vs_one_slot", [a / b for a, b in zip(mq[2].values["cpu_us_job"],
                                                                     one.values["cpu_us_job"], strict=True)])
    one.add_list("default_vs_one_slot", [a / b for a, b in zip(mq[2].values["jobs_s"], one.values["jobs_s"],
                                                                 strict=True)])
    return [emit(f) for f in (mq[2], bare[2], mq[4], bare[4], quiet, one)]


# ---------------------------------------------------------------------------- W1 warm


WARM_IDLE = 1.0  # seconds the started workers sit idle before the backlog appears


def w1_warm(bench: Bench, sizes: Sizes) -> list[Figure]:
    """W1 as a daemon lives: K workers already started and idle, then a backlog appears in one commit
    (and the producer's hint); time from that commit to the last job done. The bare loop is run the
    same way: K drainers waiting (looking every 5 ms), then the same backlog in one commit."""
    n = sizes.w1_warm_jobs
    figures = []
    for k in (2, 4):
        mq = Figure("W1warm", {"k": str(k), "batch": BATCH, "n": str(n)}, spread=("jobs_s", "ratio_bare"))
        for run in range(bench.runs):
            note(f"W1warm run {run + 1}: K={k} idle mysqlq workers, then {n} jobs in one commit; then bare")
            jobs_s = warm_mysqlq(bench, f"w1w_k{k}_r{run}", k, n)
            bare_s = warm_bare(bench, f"w1wb_k{k}_r{run}", k, n)
            ceiling_s = warm_bare(bench, f"w1wc_k{k}_r{run}", k, n, ceiling=True)
            mq.add(jobs_s=jobs_s, bare_jobs_s=bare_s, ratio_bare=jobs_s / bare_s, ceiling_ratio_bare=ceiling_s / bare_s)
        figures.append(emit(mq))
    return figures


def warm_mysqlq(bench: Bench, name: str, k: int, n: int) -> float:
    """Jobs per second from the backlog's commit to the last job's outcome (its finished_at)."""
    dsn = bench.fresh(name)
    conn = bench.connect(dsn)
    cur = conn.cursor()
    cur.execute("SET time_zone = '+00:00'")  # mysqlq stores UTC
    workers = bench.workers(dsn, k, tag=name)
    try:
        workers.wait_registered(cur, k)
        time.sleep(WARM_IDLE)  # past start-up: idle, waiting on hints
        cur.execute("BEGIN")
        fill_jobs(cur, n)
        cur.execute("COMMIT")
        committed = time.time()
        mysqlq.notify(bench.settings(dsn), ["default"])  # what a producer sends after its commit
        wait_drained(cur, workers, timeout=max(120.0, n / 50))
    finally:
        workers.stop()
    cur.execute("SELECT SUM(status = 'done'), UNIX_TIMESTAMP(MAX(finished_at)) FROM mysqlq_jobs")
    done, last = cur.fetchone()
    conn.close()
    if int(done or 0) != n:
        raise RuntimeError(f"{name}: expected {n} done jobs, found {status_counts(cur)}")
    bench.drop(dsn.database)
    workers.log.unlink(missing_ok=True)
    return n / (float(last) - committed)


def warm_bare(bench: Bench, name: str, k: int, n: int, ceiling: bool = False) -> float:
    """The bare loop run the same way: K drainers waiting, then the backlog in one commit (with
    ``ceiling``: mysqlq's own statements on mysqlq_jobs, see drain_bare)."""
    dsn = bench.fresh(name, migrate=ceiling)
    conn = bench.connect(dsn)
    cur = conn.cursor()
    if not ceiling:
        bench_bare.create_table(cur)
    payloads = [payload_bytes(i) for i in range(n)]
    args = [sys.executable, str(HERE / "bare.py"), "drain", "--conn",
            json.dumps(connect_kwargs(dsn, dsn.database)), "--batch", BATCH, "--wait", "120"]
    if ceiling:
        args += ["--statements", ceiling_statements()]
    procs = [subprocess.Popen(args, stdout=subprocess.PIPE, env=clean_env({})) for _ in range(k)]
    time.sleep(WARM_IDLE)
    cur.execute("BEGIN")
    if ceiling:
        fill_jobs(cur, n, payloads=payloads)
    else:
        bench_bare.fill(cur, payloads)
    cur.execute("COMMIT")
    committed = time.time()
    outputs = [proc.communicate(timeout=max(120.0, n / 50))[0] for proc in procs]
    if any(proc.returncode for proc in procs):
        raise RuntimeError(f"{name}: a bare drainer failed")
    results = [json.loads(out) for out in outputs]
    if sum(r["jobs"] for r in results) != n:
        raise RuntimeError(f"{name}: the bare drainers did {sum(r['jobs'] for r in results)} of {n} jobs")
    conn.close()
    bench.drop(dsn.database)
    return n / (max(r["last"] for r in results if r["last"]) - committed)


# ---------------------------------------------------------------------------- W2


W2_K = 4  # issue 41's case: four workers with default settings, every one hinted for each commit
W2_HANDLER = "bench.latency_io"  # notes start − enqueue, then one small INSERT on its own connection
W2_INTERVAL = 0.02  # one job every 20 ms
BENCH_IO_TABLE = "CREATE TABLE bench_io (id BIGINT AUTO_INCREMENT PRIMARY KEY, job_id BIGINT NOT NULL)"


def w2(bench: Bench, sizes: Sizes) -> list[Figure]:
    """Latency of a steady stream, one job every 20 ms, to four idle workers whose handler does one small
    INSERT: with the producer beside the workers (unix socket hint), with no hint (polling only), and
    on another host; then two workers whose handler only notes the latency (W2 as it was first measured).

    Each figure also sums ``hints_postponed`` from the workers' last log lines: wake-ups the hint
    budget delayed, which on a steady stream of real jobs should stay 0 (issue 41's regression).
    """
    poll = DEFAULTS.poll_interval
    figures = []
    for hint, k, handler in ((True, W2_K, W2_HANDLER), (False, W2_K, W2_HANDLER), (True, 2, "bench.latency")):
        fig = Figure("W2", {"hint": "on" if hint else "off", "poll_interval_s": f"{poll:g}", "k": str(k),
                            "handler": handler}, spread=("p50_ms", "p99_ms", "hints_postponed"))
        for run in range(bench.runs):
            note(f"W2 run {run + 1}: hint {'on' if hint else 'off'}, {k} workers, one {handler} job every "
                 f"{W2_INTERVAL * 1000:g} ms for {sizes.w2_seconds:g} s")
            name = f"w2_{'hint' if hint else 'poll'}_k{k}_r{run}"
            add_latencies(fig, *latency_run(bench, name, hint, sizes.w2_seconds, k, handler))
        figures.append(emit(fig))
    reason = netns_hosts.unavailable()
    if reason:
        note(f"W2 remote left out: {reason}")
        return figures
    fig = Figure("W2", {"hint": "remote", "poll_interval_s": f"{poll:g}", "k": str(W2_K), "handler": W2_HANDLER},
                 spread=("p50_ms", "p99_ms", "hints_postponed"))
    with RemoteLab(bench) as lab:
        for run in range(bench.runs):
            note(f"W2 run {run + 1}: remote (producer, {W2_K} workers and server on three test hosts), "
                 f"one {W2_HANDLER} job every {W2_INTERVAL * 1000:g} ms for {sizes.w2_seconds:g} s")
            add_latencies(fig, *remote_latency_run(bench, lab, f"w2_remote_r{run}", sizes.w2_seconds))
    figures.append(emit(fig))
    return figures


def add_latencies(fig: Figure, latencies: list[float], postponed: int) -> None:
    fig.add(p50_ms=percentile(latencies, 50), p95_ms=percentile(latencies, 95), p99_ms=percentile(latencies, 99),
            max_ms=max(latencies), jobs=len(latencies), hints_postponed=postponed)


def latency_env(record: pathlib.Path, dsn: mysqlq.Dsn) -> dict[str, str]:
    """The workers' environment for W2's handlers: where bench.latency notes, whom bench.latency_io writes to."""
    return {"MYSQLQ_BENCH_LATENCY_FILE": str(record), "MYSQLQ_BENCH_IO_DSN": dsn_url(dsn)}


def check_io(cur: Any, handler: str, sent: int, name: str) -> None:
    """Every bench.latency_io job wrote its row (the INSERT was really made)."""
    if handler != W2_HANDLER:
        return
    cur.execute("SELECT COUNT(*) FROM bench_io")
    rows = int(cur.fetchone()[0])
    if rows != sent:
        raise RuntimeError(f"{name}: {sent} jobs sent, {rows} rows written by {handler}")


POSTPONED = re.compile(r"\bhints_postponed=(\d+)")


def hints_postponed(workers: Workers, k: int) -> int:
    """The hinted wake-ups the workers' budgets postponed, summed over their ``worker.stopped`` lines
    (which carry ``hints_postponed`` when a listener ran; none with the hint off: 0)."""
    lines = workers.log.read_text(errors="replace").splitlines() if workers.log.exists() else []
    stopped = [line for line in lines if " worker.stopped " in line]
    if len(stopped) < k:
        note(f"{workers.tag}: {len(stopped)} of {k} workers logged worker.stopped; hints_postponed counts those")
    return sum(int(found.group(1)) for found in map(POSTPONED.search, stopped) if found)


def latency_run(bench: Bench, name: str, hint: bool, seconds: float, k: int = W2_K, handler: str = W2_HANDLER,
                interval: float = W2_INTERVAL) -> tuple[list[float], int]:
    """One W2 run on this host: the latencies (ms) of the jobs sent, and the wake-ups postponed."""
    dsn = bench.fresh(name)
    conn = bench.connect(dsn)
    cur = conn.cursor()
    cur.execute(BENCH_IO_TABLE)
    record = bench.tmp / f"{name}.latency"
    record.unlink(missing_ok=True)
    options = [] if hint else ["--no-hint"]
    workers = bench.workers(dsn, k, *options, tag=name, env=latency_env(record, dsn))
    try:
        workers.wait_registered(cur, k)
        time.sleep(1.0)  # listeners bound, first poll done: the workers are idle
        with mysqlq.Producer(bench.settings(dsn, hint=hint)) as producer:
            producer.enqueue("bench.noop", payload(0))  # connect (and check the schema) before timing
            sent = paced(producer, seconds, interval, handler)
        wait_drained(cur, workers, timeout=DEFAULTS.poll_interval * 3 + 10)
    finally:
        workers.stop()
    latencies = recorded_latencies(record, sent, name)
    check_io(cur, handler, sent, name)
    postponed = hints_postponed(workers, k)
    conn.close()
    bench.drop(dsn.database)
    workers.log.unlink(missing_ok=True)
    return latencies, postponed


class RemoteLab:
    """Three test hosts (mysqlq_harness.netns): a private server on ``db``, the producer, the workers.

    The server has the same settings as the bench's own; the bench reaches it through its unix
    socket, the producer and the workers over TCP, each host with its own hint directory.
    """

    def __init__(self, bench: Bench) -> None:
        from mysqlq_harness.mariadb import PrivateMariaDB

        self.hosts = netns_hosts.Hosts(["db", "producer", "workers"])
        self.hosts.up()
        try:
            self.server = PrivateMariaDB(bench.tmp / "remote-mariadb", die_with_parent=True,
                                         bind_address=self.hosts.address("db"), netns=self.hosts.namespace("db"))
            self.server.start()
        except BaseException:
            self.hosts.down()
            raise
        self.admin = mysqlq.Dsn.parse(self.server.dsn)
        self.tcp = mysqlq.Dsn.parse(self.server.tcp_dsn)

    def __enter__(self) -> RemoteLab:
        return self

    def __exit__(self, *exc: object) -> None:
        try:
            self.server.stop()
        finally:
            self.hosts.down()


def remote_latency_run(bench: Bench, lab: RemoteLab, name: str, seconds: float, k: int = W2_K,
                       handler: str = W2_HANDLER, interval: float = W2_INTERVAL) -> tuple[list[float], int]:
    """One W2 run across test hosts (the server on ``db``, the producer and K workers on hosts of their own)."""
    database = DB_PREFIX + name
    admin = MySQLdb.connect(autocommit=True, charset="utf8mb4", **connect_kwargs(lab.admin))
    admin.cursor().execute(f"CREATE DATABASE `{database}`")
    admin.close()
    dsn = with_database(lab.tcp, database)
    local = with_database(lab.admin, database)
    migrate = Database(local)
    migrate.run(lambda cur: schema.migrate(cur, database))
    migrate.close()
    conn = bench.connect(local)
    cur = conn.cursor()
    cur.execute(BENCH_IO_TABLE)
    record = bench.tmp / f"{name}.latency"
    record.unlink(missing_ok=True)
    producer_hints = bench.tmp / f"{name}-producer-hints"
    producer_hints.mkdir()
    workers = bench.workers(dsn, k, tag=name, env=latency_env(record, dsn), host=lab.hosts.enter("workers"))
    try:
        workers.wait_registered(cur, k)
        time.sleep(1.0)  # listeners bound, addresses recorded, first poll done: the workers are idle
        env = clean_env({"MYSQLQ_HINT_DIR": str(producer_hints)})
        result = subprocess.run([*lab.hosts.enter("producer"), sys.executable, str(HERE / "producer.py"),
                                 dsn_url(dsn), str(seconds), str(interval), handler], env=env, capture_output=True,
                                text=True, check=True)
        sent = int(result.stdout.strip())
        wait_drained(cur, workers, timeout=DEFAULTS.poll_interval * 3 + 10)
    finally:
        workers.stop()
    latencies = recorded_latencies(record, sent, name)
    check_io(cur, handler, sent, name)
    postponed = hints_postponed(workers, k)
    cur.execute(f"DROP DATABASE `{database}`")
    conn.close()
    workers.log.unlink(missing_ok=True)
    return latencies, postponed


# ---------------------------------------------------------------------------- W3


def w3(bench: Bench, sizes: Sizes, k: int = 4, settle: float = 3.0) -> list[Figure]:
    """Idle cost; then the same idle workers flooded with forged hints, and with validly signed ones."""
    figures = []
    for flood in (None, "forged", "signed"):
        labels = {"k": str(k), "window_s": f"{sizes.w3_seconds:g}"}
        if flood:
            labels.update(flood=flood, datagrams_s_per_worker=str(FLOOD_RATE))
        fig = Figure("W3", labels, spread=("queries_s_per_worker", "cpu_pct_per_worker"))
        for run in range(bench.runs):
            note(f"W3 run {run + 1}: {k} idle workers" + (f", flooded with {flood} hints" if flood else "")
                 + f", {sizes.w3_seconds:g} s window after {settle:g} s to settle")
            idle_run(bench, fig, f"w3_{flood or 'idle'}_r{run}", k, sizes.w3_seconds, settle, flood)
        figures.append(emit(fig))
    return figures


FLOOD_RATE = 1000  # datagrams per second sent to each worker


def idle_run(bench: Bench, fig: Figure, name: str, k: int, seconds: float, settle: float, flood: str | None) -> None:
    dsn = bench.fresh(name)
    conn = bench.connect(dsn)
    cur = conn.cursor()
    own = -bench.questions() + bench.questions()  # what one reading adds by itself
    options = ["--hint-bind", "127.0.0.1:0"] if flood else []
    workers = bench.workers(dsn, k, *options, tag=name)
    stop = threading.Event()
    try:
        workers.wait_registered(cur, k)
        time.sleep(settle)
        if flood:
            cur.execute("SELECT hint_addr, hint_key FROM mysqlq_workers")
            targets = [(addr.rsplit(":", 1)[0], int(addr.rsplit(":", 1)[1]), bytes(key) if flood == "signed"
                        else os.urandom(32)) for addr, key in cur.fetchall()]
            threading.Thread(target=flood_hints, args=(targets, stop), daemon=True).start()
        server0 = server_cpu(bench)
        cpu0 = workers.cpu_seconds()
        q0 = bench.questions()
        t0 = time.perf_counter()
        time.sleep(seconds)
        q1 = bench.questions()
        t1 = time.perf_counter()
        cpu1 = workers.cpu_seconds()
        server1 = server_cpu(bench)
        workers.check_alive()
    finally:
        stop.set()
        workers.stop()
    window = t1 - t0
    queries = (q1 - q0 - own) / window
    fig.add(queries_s=queries, queries_s_per_worker=queries / k,
            cpu_pct_per_worker=100 * (cpu1 - cpu0) / window / k,
            worker_cpu_s=(cpu1 - cpu0))
    if server0 is not None and server1 is not None:
        fig.add(server_cpu_pct=100 * (server1 - server0) / window)
    conn.close()
    bench.drop(dsn.database)
    workers.log.unlink(missing_ok=True)


def flood_hints(targets: list[tuple[str, int, bytes]], stop: threading.Event) -> None:
    """FLOOD_RATE fresh hints a second to each target (a fresh nonce each: replays would be dropped)."""
    from mysqlq.hint import wire

    with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as sock:
        tick = time.perf_counter()
        while not stop.is_set():
            for host, port, key in targets:
                for _ in range(FLOOD_RATE // 100):
                    sock.sendto(wire.encode(key, "default", 0), (host, port))
            tick += 0.01
            time.sleep(max(0.0, tick - time.perf_counter()))


def cpu_since(now: float | None, before: float | None) -> float:
    """CPU seconds between two server_cpu() readings; NaN when the server is not ours to read."""
    return now - before if now is not None and before is not None else float("nan")


def server_cpu(bench: Bench) -> float | None:
    pid = bench.server_pid
    return proc_cpu_ticks(pid) / CLK_TCK if pid else None


# ---------------------------------------------------------------------------- W4


# The single enqueues and the bare INSERTs alternate in blocks, and each run times several bulk
# enqueues of sizes.w4_bulk jobs alternating with as many bare multi-row fills: a burst of other
# work on the machine then lands on both sides of a ratio, not on one.
W4_BLOCKS = 10
W4_BULK_PAIRS = 4


def _timed_fill(cur: Any, payloads: list[bytes]) -> float:
    with timer() as t:
        bench_bare.fill(cur, payloads)
    return t[0]


def _rendered_inserts(producer: mysqlq.Producer, n: int) -> list[bytes]:
    """The statements ``enqueue`` sends for jobs 0..n-1 of W4, made in advance: sent in a plain loop,
    they are the ceiling of any producer of this schema (the server's work alone, no Python around it)."""
    rows = [mysqlq.Job("bench.noop", payload(i)).row(producer.settings) for i in range(n)]
    with producer.pool.database() as db:
        literal = db.conn.literal
        return [producer.renderer.statement("insert_job", (row,), literal) for row in rows]


def _rendered_bulk(producer: mysqlq.Producer, jobs: list[mysqlq.Job]) -> list[bytes]:
    """The multi-row INSERTs ``enqueue_many(jobs)`` sends (its chunks), made in advance: its ceiling."""
    rows = [job.row(producer.settings) for job in jobs]
    with producer.pool.database() as db:
        literal = db.conn.literal
        return [producer.renderer.statement("insert_jobs", rows[start : start + BULK_CHUNK], literal)
                for start in range(0, len(rows), BULK_CHUNK)]


def _timed_statements(cur: Any, statements: list[bytes]) -> float:
    with timer() as t:
        for statement in statements:
            cur.execute(statement)
    return t[0]


def w4(bench: Bench, sizes: Sizes) -> list[Figure]:
    single = Figure("W4", {"mode": "single", "n": str(sizes.w4_singles)}, spread=("jobs_s", "ratio_bare"))
    bulk = Figure("W4", {"mode": "bulk", "n": str(sizes.w4_bulk)}, spread=("jobs_s", "ratio_bare"))
    threads = Figure("W4", {"mode": "threads", "threads": str(W4_THREADS), "n": str(sizes.w4_singles)},
                     spread=("jobs_s", "ratio_bare"))
    loop = Figure("W4", {"mode": "async", "in_flight": str(W4_IN_FLIGHT)}, spread=("jobs_s", "lag_p99_ms"))
    for run in range(bench.runs):
        note(f"W4 run {run + 1}: {sizes.w4_singles} single enqueues vs bare INSERTs (alternating in "
             f"{W4_BLOCKS} blocks), {W4_BULK_PAIRS} × {sizes.w4_bulk} in bulk vs bare multi-row INSERTs (alternating)")
        dsn = bench.fresh(f"w4_r{run}")
        conn = bench.connect(dsn)
        cur = conn.cursor()
        bench_bare.create_table(cur)
        bare_payloads = [payload_bytes(i) for i in range(sizes.w4_singles)]
        bulk_payloads = [payload_bytes(i) for i in range(sizes.w4_bulk)]
        with mysqlq.Producer(bench.settings(dsn)) as producer:
            producer.enqueue("bench.noop", payload(0))  # connect before timing
            bench_bare.insert_loop(cur, bare_payloads[:1])
            rendered = _rendered_inserts(producer, sizes.w4_singles)
            mysqlq_s = bare_s = rendered_s = 0.0
            step = -(-sizes.w4_singles // W4_BLOCKS)
            for block, start in enumerate(range(0, sizes.w4_singles, step)):
                numbers = range(start, min(start + step, sizes.w4_singles))
                if block % 2:  # every other block the bare loop goes first
                    bare_s += bench_bare.insert_loop(cur, bare_payloads[numbers.start : numbers.stop])
                with timer() as t:
                    for i in numbers:
                        producer.enqueue("bench.noop", payload(i))
                mysqlq_s += t[0]
                rendered_s += _timed_statements(cur, rendered[numbers.start : numbers.stop])
                if not block % 2:
                    bare_s += bench_bare.insert_loop(cur, bare_payloads[numbers.start : numbers.stop])
            jobs = [mysqlq.Job("bench.noop", payload(i)) for i in range(sizes.w4_bulk)]
            rendered_bulk = _rendered_bulk(producer, jobs)
            bulk_s = bare_bulk_s = rendered_bulk_s = 0.0
            for pair in range(W4_BULK_PAIRS):
                if pair % 2:  # every other pair the bare INSERTs go first
                    bare_bulk_s += _timed_fill(cur, bulk_payloads)
                with timer() as tb:
                    producer.enqueue_many(jobs)
                bulk_s += tb[0]
                rendered_bulk_s += _timed_statements(cur, [b"BEGIN", *rendered_bulk, b"COMMIT"])
                if not pair % 2:
                    bare_bulk_s += _timed_fill(cur, bulk_payloads)
        single.add(jobs_s=sizes.w4_singles / mysqlq_s, bare_jobs_s=sizes.w4_singles / bare_s,
                   ratio_bare=bare_s / mysqlq_s, ceiling_ratio_bare=bare_s / rendered_s)
        bulk.add(jobs_s=W4_BULK_PAIRS * sizes.w4_bulk / bulk_s,
                 bare_multirow_jobs_s=W4_BULK_PAIRS * sizes.w4_bulk / bare_bulk_s, ratio_bare=bare_bulk_s / bulk_s,
                 ceiling_ratio_bare=bare_bulk_s / rendered_bulk_s)
        threads.add(**w4_threads(bench, dsn, sizes.w4_singles))
        loop.add(**w4_async(bench, dsn))
        conn.close()
        bench.drop(dsn.database)
    return [emit(single), emit(bulk), emit(threads), emit(loop)]


W4_THREADS = 8
W4_IN_FLIGHT = 1000


def w4_threads(bench: Bench, dsn: mysqlq.Dsn, n: int) -> dict[str, float]:
    """One Producer shared by 8 threads (its pool), against 8 threads each with its own bare connection."""
    per = n // W4_THREADS
    payloads = [payload_bytes(i) for i in range(per)]

    def bare(_: int) -> float:
        conn = bench.connect(dsn)
        try:
            return bench_bare.insert_loop(conn.cursor(), payloads)
        finally:
            conn.close()

    with mysqlq.Producer(bench.settings(dsn), pool_size=W4_THREADS) as producer, \
            ThreadPoolExecutor(W4_THREADS) as pool:
        list(pool.map(lambda i: producer.enqueue("bench.noop", payload(i)), range(W4_THREADS)))  # connect all
        with timer() as t:
            list(pool.map(lambda t: [producer.enqueue("bench.noop", payload(i)) for i in range(per)],
                          range(W4_THREADS)))
        with timer() as tb:
            list(pool.map(bare, range(W4_THREADS)))
    return {"jobs_s": W4_THREADS * per / t[0], "bare_jobs_s": W4_THREADS * per / tb[0], "ratio_bare": tb[0] / t[0]}


async def _lag_while(work: Any) -> tuple[float, list[float]]:
    """Run ``work`` (a coroutine) while a 1 ms timer measures how late the event loop wakes it."""
    lags: list[float] = []
    done = asyncio.Event()

    async def ticker() -> None:
        while not done.is_set():
            started = time.perf_counter()
            await asyncio.sleep(0.001)
            lags.append(time.perf_counter() - started - 0.001)

    tick = asyncio.create_task(ticker())
    started = time.perf_counter()
    await work
    elapsed = time.perf_counter() - started
    done.set()
    await tick
    return elapsed, lags


def w4_async(bench: Bench, dsn: mysqlq.Dsn) -> dict[str, float]:
    """1,000 aenqueue calls in flight: the rate, and the event loop's lag meanwhile (p50, p99); the same
    rows through an async driver (aiomysql, as many connections) for comparison, when it is installed."""

    async def main() -> dict[str, float]:
        with mysqlq.Producer(bench.settings(dsn)) as producer:
            await producer.aenqueue("bench.noop", payload(0))
            elapsed, lags = await _lag_while(asyncio.gather(
                *(producer.aenqueue("bench.noop", payload(i)) for i in range(W4_IN_FLIGHT))))
        found = {"jobs_s": W4_IN_FLIGHT / elapsed, "lag_p50_ms": percentile(lags, 50) * 1e3,
                 "lag_p99_ms": percentile(lags, 99) * 1e3}
        try:
            import aiomysql  # type: ignore[import-untyped]
        except ImportError:
            return found
        from mysqlq.store.jobs import NAMES
        statement = query("insert_job").replace("{rows}", query("job_values_due"))
        keep = [n for n, name in enumerate(NAMES) if name not in ("run_at", "delay_us")]
        options: dict[str, Any] = {"user": dsn.user, "password": dsn.password or "", "db": dsn.database,
                                   "autocommit": True, "minsize": 8, "maxsize": 8}
        options.update({"unix_socket": dsn.unix_socket} if dsn.unix_socket else {"host": dsn.host, "port": dsn.port})
        pool = await aiomysql.create_pool(**options)
        settings = bench.settings(dsn)

        async def one(i: int) -> None:
            row = mysqlq.Job("bench.noop", payload(i)).row(settings)
            values = [v.decode() if isinstance(v, bytes) else v for v in (row[n] for n in keep)]
            async with pool.acquire() as conn, conn.cursor() as cur:
                await cur.execute(statement, values)

        try:
            elapsed, lags = await _lag_while(asyncio.gather(*(one(i) for i in range(W4_IN_FLIGHT))))
        finally:
            pool.close()
            await pool.wait_closed()
        found.update(async_driver_jobs_s=W4_IN_FLIGHT / elapsed, async_driver_lag_p99_ms=percentile(lags, 99) * 1e3)
        return found

    return asyncio.run(main())


# ---------------------------------------------------------------------------- W5

HISTORY_COLUMNS = ("queue, handler, payload, status, priority, run_at, attempts, max_attempts, batch_id, worker_id,"
                   " worker, enqueued_at, started_at, finished_at")


def fill_history(cur: Any, rows: int) -> None:
    """``rows`` done jobs, by INSERT … SELECT doubling; ids and timestamps rise together (1 ms apart)."""
    cur.execute(f"INSERT INTO mysqlq_jobs ({HISTORY_COLUMNS}) VALUES ('default', 'bench.noop', %s, 'done', 0,"
                " NOW(6) - INTERVAL 2 HOUR, 1, 5, 1, 1, 'bench-history', NOW(6) - INTERVAL 2 HOUR,"
                " NOW(6) - INTERVAL 2 HOUR, NOW(6) - INTERVAL 2 HOUR)", (payload_bytes(0),))
    count = 1
    while count < rows:
        step = min(count, rows - count, 250_000)
        shift = f"INTERVAL {count * 1000} MICROSECOND"
        cur.execute(
            f"INSERT INTO mysqlq_jobs ({HISTORY_COLUMNS}) SELECT queue, handler, payload, status, priority,"
            f" run_at + {shift}, attempts, max_attempts, FLOOR(RAND() * 9000000000000000000), worker_id, worker,"
            f" enqueued_at + {shift}, started_at + {shift}, finished_at + {shift}"
            f" FROM mysqlq_jobs ORDER BY id LIMIT {step}")
        count += step


def purge(bench: Bench, dsn: mysqlq.Dsn, cur: Any) -> tuple[str, int]:
    """Delete every done job: ``mysqlq purge`` when this mysqlq has it, else chunked DELETEs."""
    cur.execute("SELECT COUNT(*) FROM mysqlq_jobs WHERE status = 'done'")
    before = int(cur.fetchone()[0])
    help_text = subprocess.run([MYSQLQ, "purge", "--help"], capture_output=True, text=True, check=False)
    if help_text.returncode == 0 and "--done-older-than" in help_text.stdout:
        subprocess.run([MYSQLQ, "--dsn", dsn_url(dsn), "purge", "--done-older-than", "0"], check=True,
                       stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, env=clean_env({}))
        how = "mysqlq-purge"
    else:
        while cur.execute("DELETE FROM mysqlq_jobs WHERE status = 'done' LIMIT 10000"):
            pass
        how = "delete-chunks-10000"
    cur.execute("SELECT COUNT(*) FROM mysqlq_jobs WHERE status = 'done'")
    return how, before - int(cur.fetchone()[0])


def w5(bench: Bench, sizes: Sizes, k: int = 2) -> list[Figure]:
    n = sizes.w1_jobs
    history = sizes.w5_history
    empty = Figure("W5", {"history": "0", "k": str(k), "n": str(n)}, spread=("jobs_s",))
    full = Figure("W5", {"history": str(history), "k": str(k), "n": str(n)}, spread=("jobs_s", "ratio_empty"))
    purged = Figure("W5", {"history": "purged", "k": str(k), "n": str(n)}, spread=("jobs_s", "ratio_empty"))
    dsn = bench.fresh("w5_history")
    conn = bench.connect(dsn)
    cur = conn.cursor()
    note(f"W5: filling {history} done rows")
    with timer() as tf:
        fill_history(cur, history)
    fill_fig = Figure("W5", {"step": "fill", "rows": str(history)})
    fill_fig.add(seconds=tf[0])
    for run in range(bench.runs):
        note(f"W5 run {run + 1}: K={k} drain on an empty table, then with {history} done rows")
        e = drain_mysqlq(bench, f"w5_empty_r{run}", k, n)
        f = drain_mysqlq(bench, f"w5_full_r{run}", k, n, dsn=dsn)
        empty.add(jobs_s=e.jobs_s, steady_jobs_s=e.steady_jobs_s)
        full.add(jobs_s=f.jobs_s, steady_jobs_s=f.steady_jobs_s, ratio_empty=f.jobs_s / e.jobs_s,
                 ratio_empty_steady=f.steady_jobs_s / e.steady_jobs_s)
    note("W5: purging the done rows")
    with timer() as tp:
        how, deleted = purge(bench, dsn, cur)
    purge_fig = Figure("W5", {"step": "purge", "how": how, "rows": str(deleted)})
    purge_fig.add(seconds=tp[0], rows_s=deleted / tp[0])
    for run in range(bench.runs):
        note(f"W5 run {run + 1}: K={k} drain after the purge")
        p = drain_mysqlq(bench, f"w5_purged_r{run}", k, n, dsn=dsn)
        base = empty.values["jobs_s"][run]
        purged.add(jobs_s=p.jobs_s, steady_jobs_s=p.steady_jobs_s, ratio_empty=p.jobs_s / base,
                   ratio_empty_steady=p.steady_jobs_s / empty.values["steady_jobs_s"][run])
    conn.close()
    bench.drop(dsn.database)
    return [emit(f) for f in (fill_fig, empty, full, purge_fig, purged)]


# ---------------------------------------------------------------------------- W6

STRIDE = 1000.0  # seconds: W6 job i carries t = T0 - i*STRIDE, so bench.latency records i*1e6 ms + its delay


def w6(bench: Bench, sizes: Sizes, k: int = 3) -> list[Figure]:
    """Recovery: K workers drain bench.latency jobs; a fifth into the drain one of them is caught holding
    a claim (SIGSTOP, read its running jobs, SIGKILL) and killed.

    ``recovery_s``: from the kill until every job it held is claimed by another worker; ``done_s``: until
    they are done; ``lost``: jobs of the round not done at the end (must be 0); ``ran_twice``: jobs whose
    handler ran more than once (each job's payload ``t`` encodes its index, which bench.latency's record
    gives back); ``reclaimed_jobs``: jobs with attempts > 1.  Each setting kills the reaper leader and
    another worker alternately (a replacement worker is started after each round), with the process-list
    check on (defaults) and off (``--lease 10 --heartbeat-interval 2``: recovery then waits for the lease).
    """
    figures = []
    for check in (True, False):
        options = [] if check else ["--no-processlist-check", "--lease", "10", "--heartbeat-interval", "2"]
        beat = DEFAULTS.heartbeat_interval if check else 2.0
        labels = {"processlist_check": "on" if check else "off", "k": str(k), "n": str(sizes.w6_jobs)}
        if not check:
            labels.update(lease_s="10", heartbeat_s="2")
        by_victim = {v: Figure("W6", {**labels, "victim": v}, spread=("recovery_s",)) for v in ("other", "leader")}
        recovery_run(bench, sizes, check, options, beat, k, by_victim)
        figures += [emit(by_victim["other"]), emit(by_victim["leader"])]
    return figures


def recovery_run(bench: Bench, sizes: Sizes, check: bool, options: list[str], beat: float, k: int,
                 figures: dict[str, Figure]) -> None:
    name = f"w6_{'plist' if check else 'lease'}"
    dsn = bench.fresh(name)
    conn = bench.connect(dsn)
    cur = conn.cursor()
    record = bench.tmp / f"{name}.latency"
    workers = bench.workers(dsn, k, *options, tag=name, env={"MYSQLQ_BENCH_LATENCY_FILE": str(record)})
    settings = bench.settings(dsn)
    n = sizes.w6_jobs
    rounds = [v for _ in range(bench.runs) for v in ("other", "leader")]
    try:
        workers.wait_registered(cur, k)
        # Right after a server (re)start the reaper ignores the process list for two heartbeats
        # (+1 s): long-running workers on a long-running server are the case measured here.
        settle = 2 * beat + 2 - server_uptime(cur)
        if settle > 0:
            note(f"W6 {name}: waiting {settle:.0f} s until the server has been up for two heartbeats")
            time.sleep(settle)
        for index, victim_kind in enumerate(rounds):
            note(f"W6 {name} round {index + 1}/{len(rounds)}: kill -9 the {victim_kind} worker holding a claim")
            base = index * n
            t0 = time.time()
            cur.execute("SELECT COALESCE(MAX(id), 0) FROM mysqlq_jobs")
            since = int(cur.fetchone()[0])
            fill_jobs(cur, n, "bench.latency",
                      [json.dumps({"t": t0 - (base + i) * STRIDE}).encode() for i in range(n)])
            mysqlq.notify(settings, ["default"])
            victim = pick_victim(cur, workers, dsn.database, victim_kind)
            wait_done(cur, n // 5, since=since, interval=0.01)  # well into the drain, not at its first claim
            held, killed_at = kill_holding(cur, workers, victim)
            held_list = sorted(held)
            reclaimed, done = rerun_times(cur, workers, name, victim, held_list, killed_at)
            wait_drained(cur, workers, timeout=120)
            cur.execute("SELECT COUNT(*), SUM(status = 'done'), SUM(attempts > 1) FROM mysqlq_jobs WHERE id > %s",
                        (since,))
            total, ok, again = (int(x or 0) for x in cur.fetchone())
            runs = executions(record, base, n)
            figures[victim_kind].add(recovery_s=reclaimed or 0.0, done_s=done, held=len(held_list),
                                     lost=n - ok + (total - n), not_run=sum(1 for c in runs if c == 0),
                                     ran_twice=sum(1 for c in runs if c > 1), reclaimed_jobs=again)
            workers.add()  # a replacement, so the next round has K again
            workers.wait_registered(cur, k)
    finally:
        workers.stop()
    conn.close()
    bench.drop(dsn.database)
    workers.log.unlink(missing_ok=True)


def rerun_times(cur: Any, workers: Workers, name: str, victim: str, held: list[int],
                killed_at: float) -> tuple[float | None, float]:
    """Seconds from the victim's kill until other workers had claimed every job it held, and until they
    had done them all."""
    marks = ", ".join(["%s"] * len(held))
    moments: dict[str, float] = {}

    def re_run() -> bool:
        cur.execute(f"SELECT SUM(worker <> %s), SUM(status = 'done' AND worker <> %s) FROM mysqlq_jobs"
                    f" WHERE id IN ({marks})", (victim, victim, *held))
        moved, finished = (int(x or 0) for x in cur.fetchone())
        now = time.perf_counter()
        if "reclaimed" not in moments and moved == len(held):
            moments["reclaimed"] = now - killed_at
        if finished == len(held):
            moments["done"] = now - killed_at
        return "done" in moments

    try:
        wait_for(re_run, f"{name}: the killed worker's jobs to be re-run", 120, interval=0.02)
    except TimedOut:
        explain_stuck(cur, workers, victim, held)
        raise
    return moments.get("reclaimed"), moments["done"]


def explain_stuck(cur: Any, workers: Workers, victim: str, held: list[int]) -> None:
    """What the log, the held jobs and the registry say when a killed worker's jobs are not re-run."""
    lines = workers.log.read_text(errors="replace").splitlines() if workers.log.exists() else []
    routine = ("job.done", "batch.claimed")
    note("\n".join([f"# {workers.log.name}, all but routine lines:",
                    *[line for line in lines if not any(r in line for r in routine)]]))
    marks = ", ".join(["%s"] * len(held))
    cur.execute(f"SELECT id, status, worker, worker_id, batch_id, attempts, lease_until FROM mysqlq_jobs"
                f" WHERE id IN ({marks}) LIMIT 5", tuple(held))
    note(f"# held jobs now: {cur.fetchall()}")
    cur.execute("SELECT id, name, pid, connection_id, heartbeat_at FROM mysqlq_workers")
    note(f"# registry: {cur.fetchall()}; victim {victim} pid {workers.procs[victim].pid}")


def executions(record: Any, base: int, n: int) -> list[int]:
    """How many times each job of this round ran, decoded from bench.latency's records."""
    counts: collections.Counter[int] = collections.Counter()
    for line in record.read_text().split():
        with contextlib.suppress(ValueError):
            counts[math.floor(float(line) / (STRIDE * 1000))] += 1
    return [counts[base + i] for i in range(n)]


def server_uptime(cur: Any) -> float:
    cur.execute("SHOW GLOBAL STATUS LIKE 'Uptime'")
    return float(cur.fetchone()[1])


def pick_victim(cur: Any, workers: Workers, database: str, kind: str) -> str:
    """The name of the live worker leading the reaper (``leader``) or of another live one."""
    live = {name for name, proc in workers.procs.items() if proc.poll() is None}

    def victim() -> str | None:
        cur.execute("""SELECT w.name FROM mysqlq_workers w JOIN mysqlq_leaders l ON l.worker_id = w.id
                        WHERE l.role = 'reaper' AND l.lease_until > NOW(6)""")
        row = cur.fetchone()
        leader = str(row[0]) if row else None
        if leader not in live:
            return None
        return leader if kind == "leader" else sorted(live - {leader})[0]

    return wait_for(victim, "a reaper leader among the live workers", 30, interval=0.05)


def kill_holding(cur: Any, workers: Workers, victim: str, timeout: float = 30.0) -> tuple[set[int], float]:
    """Watch the victim until it holds a claim, freeze it, note the jobs it still holds, then SIGKILL it."""
    pid = workers.procs[victim].pid

    def holding() -> set[int]:
        cur.execute("SELECT id FROM mysqlq_jobs WHERE worker = %s AND status = 'running'", (victim,))
        return {int(row[0]) for row in cur.fetchall()}

    def caught() -> tuple[set[int], float] | None:
        # Frozen only once it is seen holding jobs: frozen at every look, a victim caught between two
        # batches could barely claim again before the other workers had drained everything.
        if not holding():
            if not pending(cur):
                raise RuntimeError(f"worker {victim} never held a claim")
            return None
        os.kill(pid, signal.SIGSTOP)
        # A statement the victim sent just before it stopped (its batch's final ack, say) still
        # completes on the server: let it land, or jobs read as "running" here end "done" by the
        # victim itself and are never re-run by anyone.
        time.sleep(0.05)
        held = holding()
        if held:
            os.kill(pid, signal.SIGKILL)
            killed_at = time.perf_counter()
            workers.procs[victim].wait()
            return held, killed_at
        os.kill(pid, signal.SIGCONT)
        if not pending(cur):
            raise RuntimeError(f"worker {victim} never held a claim")
        return None

    return wait_for(caught, f"worker {victim} to be caught holding a claim", timeout, interval=0.005)


# ---------------------------------------------------------------------------- strategies


def strategies(bench: Bench, sizes: Sizes, k: int = 2) -> list[Figure]:
    """W1 K=2 for each claim strategy, isolation level, outcome-write mode and batch size."""
    n, n1 = sizes.strategy_jobs, sizes.strategy_jobs_batch1
    server = bench.server_isolation
    other = "READ COMMITTED" if server == "REPEATABLE READ" else "REPEATABLE READ"
    rr = server.lower().replace(" ", "-")
    rc = other.lower().replace(" ", "-")
    # (dimensions, worker options, jobs, bare-loop variant)
    configs: list[tuple[dict[str, str], list[str], int, dict[str, Any]]] = [
        ({"claim": "update", "isolation": rr, "flush": "grouped", "batch": BATCH}, [], n, {}),
        ({"claim": "skip-locked", "isolation": rr, "flush": "grouped", "batch": BATCH}, ["--claim", "skip-locked"], n,
         {"claim": "skip-locked"}),
        ({"claim": "update", "isolation": rc, "flush": "grouped", "batch": BATCH}, ["--isolation", other], n,
         {"isolation": other}),
        ({"claim": "update", "isolation": rr, "flush": "per-job", "batch": BATCH}, ["--flush-interval", "0"], n, {}),
        ({"claim": "update", "isolation": rr, "flush": "grouped", "batch": "500"}, ["--batch-size", "500"], n,
         {"batch": 500}),
        ({"claim": "update", "isolation": rr, "flush": "grouped", "batch": "200"}, ["--batch-size", "200"], n,
         {"batch": 200}),
        ({"claim": "update", "isolation": rr, "flush": "grouped", "batch": "10"}, ["--batch-size", "10"], n,
         {"batch": 10}),
        ({"claim": "update", "isolation": rr, "flush": "grouped", "batch": "1"}, ["--batch-size", "1"], n1,
         {"batch": 1}),
    ]
    figures = [Figure("S", {**dims, "k": str(k), "n": str(jobs)}, spread=("steady_jobs_s",))
               for dims, _, jobs, _ in configs]
    bare_runs: dict[str, list[Drain]] = {}
    for run in range(bench.runs):
        for index, (dims, options, jobs, bare) in enumerate(configs):
            note(f"strategies run {run + 1}: {' '.join(f'{k}={v}' for k, v in dims.items())}")
            d = drain_mysqlq(bench, f"s{index}_r{run}", k, jobs, options)
            bare_key = json.dumps(bare, sort_keys=True)
            done = bare_runs.setdefault(bare_key, [])
            if len(done) <= run:  # one bare run per distinct bare configuration and run
                done.append(drain_bare(bench, f"s{index}b_r{run}", k, jobs, **bare))
            b = done[run]
            figures[index].add(jobs_s=d.jobs_s, steady_jobs_s=d.steady_jobs_s, bare_steady_jobs_s=b.steady_jobs_s,
                               ratio_bare_steady=d.steady_jobs_s / b.steady_jobs_s)
    out = [emit(fig) for fig in figures]
    return out


# ---------------------------------------------------------------------------- W7, W8: jobs that wait


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
                " TIMESTAMPDIFF(MICROSECOND, MIN(started_at), MAX(finished_at)) FROM mysqlq_jobs")
    count, done, span_us = cur.fetchone()
    if int(count) != len(jobs) or int(done or 0) != len(jobs):
        raise RuntimeError(f"{name}: expected {len(jobs)} done jobs, found {status_counts(cur)}")
    cur.execute("SELECT worker, COUNT(*) FROM mysqlq_jobs GROUP BY worker")
    per_worker = {str(worker): int(n) for worker, n in cur.fetchall()}
    conn.close()
    bench.drop(dsn.database)
    workers.log.unlink(missing_ok=True)
    return WaitDrain(len(jobs), ended - started, span_us / 1e6, rss[0] / 1024, per_worker)


def w7(bench: Bench, sizes: Sizes, k: int = 2, seconds: float = 0.05) -> list[Figure]:
    """2,000 jobs that wait 50 ms, ``def`` and ``async def``, K=2 workers at the default concurrency."""
    n, slots = sizes.w7_jobs, DEFAULTS.concurrency
    ideal = k * slots / seconds
    figures = []
    for handler in ("bench.sleep", "bench.asleep"):
        fig = Figure("W7", {"handler": handler, "k": str(k), "concurrency": str(slots), "n": str(n)},
                     spread=("jobs_s", "ratio_ideal"))
        for run in range(bench.runs):
            note(f"W7 run {run + 1}: {n} × {handler} ({seconds * 1000:g} ms), K={k}, concurrency {slots}")
            d = drain_waiting(bench, f"w7_{handler.split('.')[1]}_r{run}", k,
                              [json.dumps({"s": seconds}).encode()] * n, handler)
            fig.add(jobs_s=d.jobs / d.wall, ratio_ideal=d.jobs / d.wall / ideal,
                    steady_jobs_s=d.jobs / d.steady, ratio_ideal_steady=d.jobs / d.steady / ideal,
                    ideal_jobs_s=ideal, rss_mib_per_worker=d.rss_mib)
        figures.append(emit(fig))
    return figures


def w7_sweep(bench: Bench, sizes: Sizes, k: int = 2, seconds: float = 0.05) -> list[Figure]:
    """W7 (``def`` handler) at several concurrencies: throughput against memory, to choose the default."""
    figures = []
    for slots in (1, 3, 5, 8, 10, 16):
        n = min(sizes.w7_jobs, max(200, slots * 100))
        ideal = k * slots / seconds
        fig = Figure("W7", {"handler": "bench.sleep", "k": str(k), "concurrency": str(slots), "n": str(n)},
                     spread=("ratio_ideal_steady",))
        for run in range(bench.runs):
            note(f"W7 sweep run {run + 1}: concurrency {slots}, {n} jobs")
            d = drain_waiting(bench, f"w7s_{slots}_r{run}", k, [json.dumps({"s": seconds}).encode()] * n,
                              "bench.sleep", ["--concurrency", str(slots)])
            fig.add(jobs_s=d.jobs / d.wall, ratio_ideal=d.jobs / d.wall / ideal,
                    steady_jobs_s=d.jobs / d.steady, ratio_ideal_steady=d.jobs / d.steady / ideal,
                    rss_mib_per_worker=d.rss_mib)
        figures.append(emit(fig))
    return figures


def w8(bench: Bench, sizes: Sizes, k: int = 2, jobs: int = 20, seconds: float = 0.5) -> list[Figure]:
    """20 jobs of 0.5 s enqueued at once, two workers started together: makespan against the ideal;
    long-running workers, then ``--burst`` ones (mode=burst), which leave once they find nothing to
    do: one must not leave while another's claim holds jobs it could run."""
    slots = DEFAULTS.concurrency
    ideal = jobs * seconds / (k * slots)
    labels = {"jobs": str(jobs), "seconds": f"{seconds:g}", "k": str(k), "concurrency": str(slots)}
    modes: list[tuple[str, list[str], Figure]] = [
        ("", [], Figure("W8", labels, spread=("ratio_ideal",))),
        ("burst", ["--burst"], Figure("W8", {"mode": "burst", **labels}, spread=("ratio_ideal",))),
    ]
    for run in range(bench.runs):
        for mode, options, fig in modes:
            note(f"W8 run {run + 1}: {jobs} × {seconds:g} s on {k} {mode + ' ' if mode else ''}workers of {slots} "
                 f"slots (ideal {ideal:g} s)")
            d = drain_waiting(bench, f"w8_{mode + '_' if mode else ''}r{run}", k,
                              [json.dumps({"s": seconds}).encode()] * jobs, "bench.sleep", options)
            counts = list(d.per_worker.values()) + [0] * (k - len(d.per_worker))  # a worker that ran none: 0
            fig.add(makespan_s=d.steady, ideal_s=ideal, ratio_ideal=d.steady / ideal, wall_s=d.wall,
                    jobs_per_worker_min=min(counts), jobs_per_worker_max=max(counts))
    return [emit(fig) for _, _, fig in modes]
