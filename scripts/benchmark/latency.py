"""W2, latency: a steady stream of jobs to idle workers, how long after its enqueue each job started;
on this host with and without the hint, and across test hosts (``RemoteLab``).
"""

from __future__ import annotations

import pathlib
import re
import subprocess
import sys
import time
from typing import Any

import MySQLdb
from mysqlq_harness import netns as netns_hosts

import mysqlq
from benchmark.common import (
    DB_PREFIX,
    HERE,
    Bench,
    Figure,
    Workers,
    clean_env,
    connect_kwargs,
    dsn_url,
    emit,
    note,
    payload,
    percentile,
    recorded_latencies,
    wait_drained,
    with_database,
)
from benchmark.producer import paced
from benchmark.shared import DEFAULTS, Sizes
from mysqlq.store import schema
from mysqlq.store.db import Database

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
