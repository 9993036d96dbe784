"""mysqlq on a 3-node Galera cluster against one plain server, in the same run (``scripts/bench --only galera``).

Figures, each the median of the runs (min and max beside it):

- Drain (W1 on the cluster, K=3 workers) against W1 K=3 on one plain server, in three layouts
  (jobs/s from the first claim to the last completion; ``ratio_plain`` is the median of each run's
  ratio to a drain of the plain server run just before it, so that other load on the machine falls
  on both sides of a ratio):
  ``one_writer`` (every worker's DSN lists the nodes in the same order, so all write through the
  first: no certification conflicts), ``spread`` (worker i lists node i first: writes from three
  nodes at once on the same rows) and ``partitioned`` (worker i lists node i first and works its
  own queue; each job was put in queue ``p<id mod 3>``, so the nodes claim disjoint rows); at batch
  sizes 10, 100 (the default) and 500; and one_writer and spread again with ``wsrep_sync_wait=3``
  on every session, and one_writer with ``binlog_row_image=MINIMAL`` (``one_writer_minimal``: a
  writeset carries the key and the changed columns instead of whole rows). ``conflicts`` is the
  number of transactions the cluster aborted meanwhile (``wsrep_local_cert_failures`` +
  ``wsrep_local_bf_aborts``, summed over the nodes); ``server_us_job`` and ``workers_us_job`` the CPU
  per job of all the servers (on the cluster, its three nodes) and of the workers (start-up
  included); ``flow_control_paused_s`` how long flow control held the cluster's writers.
  A drain stops with the workers' log when a worker exits or nothing is done for a minute.
- Latency across nodes: one idle worker on node 2, a producer enqueueing through node 1 every
  20 ms (the local hint wakes the worker at once): start minus enqueue, p50 / p95 ms, and how many
  jobs of all runs waited for a poll (> 500 ms), with ``wsrep_sync_wait`` 0, 1 and 3 on the worker's sessions.
- Recovery: during a spread drain, ``kill -9`` node 3: seconds until the cluster commits jobs again,
  and until the worker that was on node 3 (now failed over) finishes a job again.

Servers are private and throwaway (mysqlq_harness.mariadb, mysqlq_harness.galera), started
by this script with small buffer pools, so it says nothing about tuned production clusters: compare
the ratios, not the absolute rates.
"""

from __future__ import annotations

import contextlib
import os
import pathlib
import shutil
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from typing import Any

import MySQLdb
from mysqlq_harness.galera import PrivateGalera
from mysqlq_harness.jobs import every_job
from mysqlq_harness.mariadb import PrivateMariaDB
from mysqlq_harness.waiting import done_jobs, stop_processes, wait_done, wait_for

import mysqlq
from benchmark.common import (
    MYSQLQ,
    clean_env,
    fill_jobs,
    median,
    note,
    percentile,
    proc_cpu_ticks,
    recorded_latencies,
    tail,
)

BATCHES = (10, 100, 500)
SYNC_WAITS = (0, 1, 3)  # 1: reads wait for causality; 3: reads, UPDATE and DELETE (the claim) too
LATE_MS = 500.0  # a job that started later than this waited for a poll, not a hint
TOP_UP = 300  # jobs added during the recovery figure whenever fewer are ready
CONFLICT_COUNTERS = ("wsrep_local_cert_failures", "wsrep_local_bf_aborts")
# Where a cluster's time goes: writesets replicated and applied, time paused by flow control (ns).
WSREP_STATUS = ("wsrep_replicated", "wsrep_received", "wsrep_flow_control_paused_ns", "wsrep_flow_control_sent",
                "wsrep_replicated_bytes", "wsrep_local_send_queue_avg", "wsrep_apply_window", "wsrep_commit_window")
CLK_TCK = os.sysconf("SC_CLK_TCK")


def dsn_for(ports: Sequence[int], database: str) -> str:
    return "mysql://root@" + ",".join(f"127.0.0.1:{port}" for port in ports) + f"/{database}"


def connect(port: int, database: str | None = None) -> Any:
    kwargs: dict[str, Any] = {"host": "127.0.0.1", "port": port, "user": "root", "autocommit": True}
    if database:
        kwargs["database"] = database
    return MySQLdb.connect(**kwargs)


class Run:
    """A database with N jobs on some server, and K workers with their DSNs."""

    def __init__(self, tmp: pathlib.Path, port: int, database: str, n: int, *, partitions: int = 0) -> None:
        self.tmp, self.port, self.database, self.n = tmp, port, database, n
        admin = connect(port)
        with admin.cursor() as cur:
            cur.execute(f"DROP DATABASE IF EXISTS {database}")
            cur.execute(f"CREATE DATABASE {database}")
        admin.close()
        subprocess.run([MYSQLQ, "--dsn", dsn_for([port], database), "migrate"], check=True,
                       stdout=subprocess.DEVNULL, env=clean_env({}))
        self.conn = connect(port, database)
        self.cur = self.conn.cursor()
        self.cur.execute("SET time_zone = '+00:00'")
        fill_jobs(self.cur, n)
        if partitions:  # as a producer would at enqueue: job id mod P picks its partition's queue
            self.cur.execute("UPDATE mysqlq_jobs SET queue = CONCAT('p', id MOD %(p)s)", {"p": partitions})
        self.procs: list[subprocess.Popen[bytes]] = []

    def start(self, dsns: Sequence[str], *, batch: int | None = None, queues: Sequence[str] | None = None,
              env: dict[str, str] | None = None) -> float:
        started = time.perf_counter()
        for index, dsn in enumerate(dsns, 1):
            extra = {"MYSQLQ_HINT_DIR": str(self.tmp / "hints"), **(env or {})}
            if batch is not None:
                extra["MYSQLQ_BATCH_SIZE"] = str(batch)
            if queues is not None:
                extra["MYSQLQ_QUEUES"] = queues[index - 1]
            with (self.tmp / f"{self.database}.log").open("ab") as log:
                self.procs.append(subprocess.Popen([MYSQLQ, "--dsn", dsn, "worker", "--name", f"w{index}"],
                                                   stdout=subprocess.DEVNULL, stderr=log, env=clean_env(extra)))
        return started

    def wait_done(self, timeout: float = 600, stall: float = 60) -> float:
        """Until every job of the run is done; time.perf_counter() then. Fails at once, with the
        workers' log, when a worker has exited, and when no job was done for ``stall`` seconds: in
        the partitioned layout nobody else would take a stopped worker's queue."""
        counts = [-1, time.monotonic()]  # the last count of done jobs, and when it last moved

        def finished() -> bool:
            done = done_jobs(self.cur)
            if done >= self.n:
                return True
            if done != counts[0]:
                counts[:] = [done, time.monotonic()]
            exited = [f"w{i} (status {proc.returncode})" for i, proc in enumerate(self.procs, 1)
                      if proc.poll() is not None]
            stalled = time.monotonic() - counts[1] > stall
            if exited or stalled:
                raise RuntimeError(f"{self.database}: {done} of {self.n} jobs done; "
                                   f"{'exited: ' + ', '.join(exited) if exited else f'none done for {stall:g} s'}; "
                                   f"by status {self.statuses()}\n{tail(self.tmp / f'{self.database}.log', 40)}")
            return False

        wait_for(finished, f"{self.n} jobs to be done", timeout, interval=0.05)
        return time.perf_counter()

    def statuses(self) -> dict[str, int]:
        self.cur.execute(f"SELECT CONCAT(status, '/', queue), COUNT(*) FROM {every_job('status, queue')} GROUP BY 1")
        return {str(key): int(count) for key, count in self.cur.fetchall()}

    def close(self) -> None:
        stop_processes(self.procs)
        with contextlib.suppress(MySQLdb.Error):
            self.cur.execute(f"DROP DATABASE IF EXISTS {self.database}")
        self.conn.close()


def conflicts(ports: Sequence[int]) -> int:
    """Transactions the cluster aborted so far (certification failures and brute-force aborts), all nodes."""
    total = 0
    for port in ports:
        conn = connect(port)
        with conn.cursor() as cur:
            for name in CONFLICT_COUNTERS:
                cur.execute("SHOW GLOBAL STATUS LIKE %s", (name,))
                row = cur.fetchone()
                total += int(row[1]) if row else 0
        conn.close()
    return total


# The server settings a case changes, and the defaults they are put back to afterwards.
DEFAULTS: dict[str, int | str] = {"wsrep_sync_wait": 0, "binlog_row_image": "FULL"}


@contextlib.contextmanager
def global_setting(ports: Sequence[int], name: str, value: int | str) -> Iterator[None]:
    """``SET GLOBAL name`` on every node for the sessions opened meanwhile (the workers' included):
    ``wsrep_sync_wait`` (1: reads wait for causality, 3: the claim too) or ``binlog_row_image``
    (FULL replicates every column of a changed row, before and after; MINIMAL the key and what changed)."""
    if name not in DEFAULTS:
        raise ValueError(f"not a setting of this benchmark: {name}")

    def put(setting: int | str) -> None:
        for port in ports:
            conn = connect(port)
            with conn.cursor() as cur:
                cur.execute(f"SET GLOBAL {name} = %s", (setting,))
            conn.close()

    put(value)
    try:
        yield
    finally:
        with contextlib.suppress(MySQLdb.Error):
            put(DEFAULTS[name])


@dataclass
class Drained:
    """One drain: jobs/s, the transactions the cluster aborted, and CPU per job (µs) of the servers
    (all nodes together) and of the workers (start-up included); ``wsrep`` is the change of some
    wsrep_* counters summed over the nodes (replication's cost: flow control, certification)."""

    rate: float
    aborts: int
    server_us: float
    workers_us: float
    wsrep: dict[str, float]


def server_ticks(pids: Sequence[int | None]) -> int:
    return sum(proc_cpu_ticks(pid) for pid in pids if pid)


def wsrep_status(ports: Sequence[int]) -> dict[str, float]:
    """WSREP_STATUS counters summed over the nodes (empty on a plain server)."""
    total: dict[str, float] = {}
    for port in ports:
        conn = connect(port)
        with conn.cursor() as cur:
            cur.execute("SHOW GLOBAL STATUS WHERE Variable_name IN (" + ", ".join(["%s"] * len(WSREP_STATUS)) + ")",
                        WSREP_STATUS)
            for name, value in cur.fetchall():
                with contextlib.suppress(ValueError):
                    total[str(name)] = total.get(str(name), 0.0) + float(value)
        conn.close()
    return total


def drain(tmp: pathlib.Path, port: int, database: str, n: int, dsns: Sequence[str], *,
          batch: int | None = None, partitioned: bool = False, cluster_ports: Sequence[int] = (),
          server_pids: Sequence[int | None] = ()) -> Drained:
    """K workers draining N jobs: jobs/s, the cluster's aborted transactions and the CPU meanwhile."""
    run = Run(tmp, port, database, n, partitions=len(dsns) if partitioned else 0)
    queues = [f"p{i % len(dsns)}" for i in range(1, len(dsns) + 1)] if partitioned else None
    try:
        before = conflicts(cluster_ports)
        status = wsrep_status(cluster_ports)
        ticks = server_ticks(server_pids)
        run.start(dsns, batch=batch, queues=queues)
        run.wait_done()
        server_us = (server_ticks(server_pids) - ticks) / CLK_TCK / n * 1e6
        pids = [proc.pid for proc in run.procs]
        workers_us = sum(proc_cpu_ticks(pid) for pid in pids) / CLK_TCK / n * 1e6
        wsrep = {name: value - status.get(name, 0.0) for name, value in wsrep_status(cluster_ports).items()}
        # From the first claim to the last completion, by the servers' clocks (one host): the three
        # workers' start-up varies more than the drain itself on a loaded 2-core machine.
        run.cur.execute("SELECT TIMESTAMPDIFF(MICROSECOND, MIN(started_at), MAX(finished_at))"
                        f" FROM {every_job('started_at, finished_at')}")
        rate = n / (int(run.cur.fetchone()[0]) / 1e6)
        return Drained(rate, conflicts(cluster_ports) - before, server_us, workers_us, wsrep)
    finally:
        run.close()


def latency(tmp: pathlib.Path, cluster: PrivateGalera, database: str, jobs: int, wait: int,
            interval: float = 0.02) -> list[float]:
    """Start minus enqueue (ms) of jobs enqueued through node 1 and run by one idle worker on node 2."""
    ports = [node.port for node in cluster.nodes]
    record = tmp / f"{database}.latency"
    record.unlink(missing_ok=True)
    run = Run(tmp, ports[0], database, 0)
    try:
        with global_setting(ports, "wsrep_sync_wait", wait):
            run.start([dsn_for(ports[1:] + ports[:1], database)], env={"MYSQLQ_BENCH_LATENCY_FILE": str(record)})
            settings = mysqlq.Settings(dsn=mysqlq.Dsn.parse(dsn_for(ports, database)), hint_dir=str(tmp / "hints"))
            with mysqlq.Producer(settings) as producer:
                producer.enqueue("bench.noop", {})  # the worker is up and idle once this one is done
                run.n = 1
                run.wait_done(timeout=60)
                time.sleep(0.5)
                tick = time.perf_counter()
                for _ in range(jobs):
                    producer.enqueue("bench.latency", {"t": time.time()})
                    tick += interval
                    time.sleep(max(0.0, tick - time.perf_counter()))
            run.n = jobs + 1
            run.wait_done(timeout=120)
    finally:
        run.close()
    return recorded_latencies(record, jobs, database)


def recovery(tmp: pathlib.Path, cluster: PrivateGalera, database: str, n: int) -> tuple[float, float]:
    """Seconds from node 3's kill -9 until (the cluster commits a job, node 3's worker finishes one)."""
    ports = [node.port for node in cluster.nodes]
    run = Run(tmp, ports[0], database, n)
    try:
        run.start([dsn_for(ports[i:] + ports[:i], database) for i in range(3)])
        wait_done(run.cur, n // 4, timeout=600)
        run.cur.execute("SELECT NOW(6)")
        killed_at = run.cur.fetchone()[0]
        cluster.node(3).kill()
        t0 = time.perf_counter()
        after: dict[str, float] = {}  # seconds from the kill until "commits" and node 3's "worker" finish a job

        def recovered() -> bool:
            # Keep work in the queue until node 3's worker has failed over and finished a job: the
            # other two could otherwise drain the rest while it is still reconnecting.
            run.cur.execute("SELECT COUNT(*) FROM mysqlq_jobs WHERE status = 'ready'")
            if int(run.cur.fetchone()[0]) < TOP_UP:
                fill_jobs(run.cur, TOP_UP)
                run.n += TOP_UP
            run.cur.execute(f"SELECT worker FROM {every_job('status, finished_at, worker')}"
                            " WHERE status = 'done' AND finished_at > %s", (killed_at,))
            finishers = {row[0] for row in run.cur.fetchall()}
            if finishers:
                after.setdefault("commits", time.perf_counter() - t0)
            if "w3" in finishers:
                after.setdefault("worker", time.perf_counter() - t0)
            return len(after) == 2

        wait_for(recovered, "the cluster to recover from the node's kill", 300, interval=0.02)
        run.wait_done()
        return after["commits"], after["worker"]
    finally:
        run.close()
        cluster.rejoin(3)


def main(quick: bool = False, runs: int = 3) -> int:
    n = 6000 if quick else 20_000
    latency_jobs = 50 if quick else 150
    tmp = pathlib.Path(tempfile.mkdtemp(prefix="mysqlq-bench-galera-"))
    plain = PrivateMariaDB(tmp / "plain", die_with_parent=True)
    cluster = PrivateGalera(tmp / "galera", die_with_parent=True)
    rates: dict[tuple[str, int, int], list[float]] = {}
    aborted: dict[tuple[str, int, int], list[float]] = {}
    cpu: dict[tuple[str, int, int], list[tuple[float, float]]] = {}  # (servers, workers) µs per job
    flow: dict[tuple[str, int, int], list[dict[str, float]]] = {}
    ratios: dict[tuple[str, int, int], list[float]] = {}
    delays: dict[int, list[list[float]]] = {wait: [] for wait in SYNC_WAITS}

    def record(key: tuple[str, int, int], got: Drained, plain_rate: float) -> None:
        rates.setdefault(key, []).append(got.rate)
        ratios.setdefault(key, []).append(got.rate / plain_rate)
        aborted.setdefault(key, []).append(got.aborts)
        cpu.setdefault(key, []).append((got.server_us, got.workers_us))
        flow.setdefault(key, []).append(got.wsrep)
        note(f"  {got.rate:.0f} jobs/s, {got.aborts} transactions aborted by the cluster; CPU per job "
             f"{got.server_us:.0f} µs in the servers, {got.workers_us:.0f} µs in the workers; "
             + ", ".join(f"{k.removeprefix('wsrep_')}={v:.4g}" for k, v in got.wsrep.items()))

    recovered: dict[str, list[float]] = {"commits_s": [], "worker_s": []}
    try:
        note("starting a private server and a private 3-node Galera cluster")
        plain.start()
        cluster.start()
        ports = [node.port for node in cluster.nodes]
        spread = [ports[i:] + ports[:i] for i in range(3)]
        print(f"# galera: 3 nodes on loopback (mysqlq_harness.galera), N={n}, K=3, runs={runs}", flush=True)
        for r in range(runs):
            cases = [(mode, batch, 0) for mode in ("one_writer", "spread") for batch in BATCHES]
            cases += [("partitioned", batch, 0) for batch in (100, 500)]
            cases += [("one_writer", 100, 3), ("spread", 100, 3), ("one_writer_minimal", 100, 0)]
            for c, (mode, batch, wait) in enumerate(cases):
                # Each case right after a drain of the plain server: its ratio is to that drain, so a
                # burst of other work on the machine lands on both sides of it, not on one.
                name = f"gpl{c}r{r}"
                note(f"galera run {r + 1}: plain, batch 100, before {mode}")
                base = drain(tmp, plain.port, name, n, [dsn_for([plain.port], name)] * 3, batch=100,
                             server_pids=[plain.pid])
                record(("plain", 100, 0), base, base.rate)
                note(f"galera run {r + 1}: {mode}, batch {batch}, wsrep_sync_wait={wait}")
                name = f"g{mode[:2]}{batch}w{wait}c{c}r{r}"
                one = mode.startswith("one_writer")
                dsns = [dsn_for(ports, name)] * 3 if one else [dsn_for(order, name) for order in spread]
                image = "MINIMAL" if mode.endswith("minimal") else "FULL"
                with global_setting(ports, "wsrep_sync_wait", wait), global_setting(ports, "binlog_row_image", image):
                    got = drain(tmp, ports[0], name, n, dsns, batch=batch, partitioned=mode == "partitioned",
                                cluster_ports=ports, server_pids=[node.pid for node in cluster.nodes])
                record((mode, batch, wait), got, base.rate)
            for wait in SYNC_WAITS:
                note(f"galera run {r + 1}: latency across nodes, wsrep_sync_wait={wait}")
                values = latency(tmp, cluster, f"glat{wait}r{r}", latency_jobs, wait)
                delays[wait].append(values)
                note(f"  p50 {percentile(values, 50):.1f} ms, p95 {percentile(values, 95):.1f} ms, "
                     f"{sum(value > LATE_MS for value in values)} waited for a poll")
            note(f"galera run {r + 1}: kill -9 of a node during a spread drain")
            commits, worker = recovery(tmp, cluster, f"grec{r}", n)
            recovered["commits_s"].append(commits)
            recovered["worker_s"].append(worker)
            note(f"  commits again after {commits:.2f} s, node 3's worker finishes a job after {worker:.2f} s")
    finally:
        cluster.kill()
        plain.kill()
        shutil.rmtree(tmp, ignore_errors=True)
    for (mode, batch, wait), values in rates.items():
        key = (mode, batch, wait)
        paused = [f.get("wsrep_flow_control_paused_ns", 0.0) / 1e9 for f in flow[key]]
        print(f"galera mode={mode} batch={batch} sync_wait={wait} k=3 n={n} jobs_s={median(values):.0f} "
              f"jobs_s_min={min(values):.0f} jobs_s_max={max(values):.0f} ratio_plain={median(ratios[key]):.2f} "
              f"(min {min(ratios[key]):.2f}, max {max(ratios[key]):.2f}) conflicts={median(aborted[key]):.0f} "
              f"server_us_job={median([c[0] for c in cpu[key]]):.0f} "
              f"workers_us_job={median([c[1] for c in cpu[key]]):.0f} "
              f"flow_control_paused_s={median(paused):.2f}")
    for wait, per_run in delays.items():
        p50s = [percentile(values, 50) for values in per_run]
        p95s = [percentile(values, 95) for values in per_run]
        late = [sum(value > LATE_MS for value in values) for values in per_run]
        print(f"galera latency sync_wait={wait} jobs={latency_jobs} p50_ms={median(p50s):.1f} "
              f"p95_ms={median(p95s):.1f} (max {max(p95s):.1f}) waited_for_poll={sum(late)}/{latency_jobs * len(late)}")
    print(f"galera node_kill k=3 n={n} commits_again_s={median(recovered['commits_s']):.2f} "
          f"node3_worker_again_s={median(recovered['worker_s']):.2f} "
          f"(min {min(recovered['worker_s']):.2f}, max {max(recovered['worker_s']):.2f})")
    return 0


if __name__ == "__main__":
    sys.exit(main(quick="--quick" in sys.argv))
