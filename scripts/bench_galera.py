"""mysqlq on a 3-node Galera cluster against one plain server, in the same run (``scripts/bench --only galera``).

Figures, each the median of the runs:

- W1 on the cluster, K=3 workers, in two modes: ``one-writer`` (every worker's DSN lists the nodes in
  the same order, so all connect to the first: no certification conflicts) and ``spread`` (worker i
  lists node i first: writes from three nodes at once); against W1 K=3 on one plain server.
- Recovery: during a spread drain, ``kill -9`` node 3: seconds until the cluster commits jobs again,
  and until the worker that was on node 3 (now failed over) finishes a job again.

Servers are private and throwaway (scripts/private_mariadb.py, scripts/private_galera.py), started
by this script with small buffer pools, so it says nothing about tuned production clusters: compare
the ratios, not the absolute rates.
"""

from __future__ import annotations

import os
import pathlib
import shutil
import subprocess
import sys
import tempfile
import time
from collections.abc import Sequence
from typing import Any

import MySQLdb

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

from bench_common import MYSQLQ, clean_env, fill_jobs, median, note  # noqa: E402
from private_galera import PrivateGalera  # noqa: E402
from private_mariadb import PrivateMariaDB  # noqa: E402


def dsn_for(ports: Sequence[int], database: str) -> str:
    return "mysql://root@" + ",".join(f"127.0.0.1:{port}" for port in ports) + f"/{database}"


def connect(port: int, database: str | None = None) -> Any:
    kwargs: dict[str, Any] = {"host": "127.0.0.1", "port": port, "user": "root", "autocommit": True}
    if database:
        kwargs["database"] = database
    return MySQLdb.connect(**kwargs)


class Run:
    """A database with N jobs on some server, and K workers with their DSNs."""

    def __init__(self, tmp: pathlib.Path, port: int, database: str, n: int) -> None:
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
        self.procs: list[subprocess.Popen[bytes]] = []

    def start(self, dsns: Sequence[str]) -> float:
        started = time.perf_counter()
        for index, dsn in enumerate(dsns, 1):
            env = clean_env({"MYSQLQ_HINT_DIR": str(self.tmp / "hints")})
            with (self.tmp / f"{self.database}.log").open("ab") as log:
                self.procs.append(subprocess.Popen([MYSQLQ, "--dsn", dsn, "worker", "--name", f"w{index}"],
                                                   stdout=subprocess.DEVNULL, stderr=log, env=env))
        return started

    def done(self) -> int:
        self.cur.execute("SELECT COUNT(*) FROM mysqlq_jobs WHERE status = 'done'")
        return int(self.cur.fetchone()[0])

    def wait_done(self, timeout: float = 600) -> float:
        deadline = time.monotonic() + timeout
        while self.done() < self.n:
            if time.monotonic() > deadline:
                raise RuntimeError(f"{self.database}: {self.done()} of {self.n} done after {timeout:g} s")
            time.sleep(0.02)
        return time.perf_counter()

    def close(self) -> None:
        for proc in self.procs:
            proc.terminate()
        for proc in self.procs:
            try:
                proc.wait(timeout=30)
            except subprocess.TimeoutExpired:
                proc.kill()
        self.conn.close()


def drain(tmp: pathlib.Path, port: int, database: str, n: int, dsns: Sequence[str]) -> float:
    run = Run(tmp, port, database, n)
    try:
        started = run.start(dsns)
        return n / (run.wait_done() - started)
    finally:
        run.close()


def recovery(tmp: pathlib.Path, cluster: PrivateGalera, database: str, n: int) -> tuple[float, float]:
    """Seconds from node 3's kill -9 until (the cluster commits a job, node 3's worker finishes one)."""
    ports = [node.port for node in cluster.nodes]
    run = Run(tmp, ports[0], database, n)
    try:
        run.start([dsn_for(ports[i:] + ports[:i], database) for i in range(3)])
        while run.done() < n // 4:
            time.sleep(0.02)
        run.cur.execute("SELECT NOW(6)")
        killed_at = run.cur.fetchone()[0]
        cluster.node(3).kill()
        t0 = time.perf_counter()
        commits = worker = None
        while worker is None or commits is None:
            run.cur.execute("SELECT worker FROM mysqlq_jobs WHERE status = 'done' AND finished_at > %s", (killed_at,))
            finishers = {row[0] for row in run.cur.fetchall()}
            if commits is None and finishers:
                commits = time.perf_counter() - t0
            if worker is None and "w3" in finishers:
                worker = time.perf_counter() - t0
            if time.perf_counter() - t0 > 300:
                raise RuntimeError("the cluster did not recover from the node's kill within 300 s")
            time.sleep(0.02)
        run.wait_done()
        return commits, worker
    finally:
        run.close()
        cluster.rejoin(3)


def main(quick: bool = False, runs: int = 3) -> int:
    n = 3000 if quick else 10_000
    tmp = pathlib.Path(tempfile.mkdtemp(prefix="mysqlq-bench-galera-"))
    plain = PrivateMariaDB(tmp / "plain", die_with_parent=True)
    cluster = PrivateGalera(tmp / "galera", die_with_parent=True)
    figures: dict[str, list[float]] = {"plain": [], "one_writer": [], "spread": [], "commits_s": [], "worker_s": []}
    try:
        note("starting a private server and a private 3-node Galera cluster")
        plain.start()
        cluster.start()
        ports = [node.port for node in cluster.nodes]
        print(f"# galera: 3 nodes on loopback (scripts/private_galera.py), N={n}, K=3, runs={runs}", flush=True)
        for r in range(runs):
            note(f"galera run {r + 1}: plain server, one-writer cluster, spread cluster, node kill")
            figures["plain"].append(drain(tmp, plain.port, f"gp{r}", n, [dsn_for([plain.port], f"gp{r}")] * 3))
            figures["one_writer"].append(drain(tmp, ports[0], f"g1w{r}", n, [dsn_for(ports, f"g1w{r}")] * 3))
            figures["spread"].append(drain(tmp, ports[0], f"gsp{r}", n,
                                           [dsn_for(ports[i:] + ports[:i], f"gsp{r}") for i in range(3)]))
            commits, worker = recovery(tmp, cluster, f"grec{r}", n)
            figures["commits_s"].append(commits)
            figures["worker_s"].append(worker)
    finally:
        cluster.kill()
        plain.kill()
        shutil.rmtree(tmp, ignore_errors=True)
    base = median(figures["plain"])
    for mode in ("plain", "one_writer", "spread"):
        values = figures[mode]
        print(f"galera mode={mode} k=3 n={n} jobs_s={median(values):.0f} jobs_s_min={min(values):.0f} "
              f"jobs_s_max={max(values):.0f} ratio_plain={median(values) / base:.2f}")
    print(f"galera node_kill k=3 n={n} commits_again_s={median(figures['commits_s']):.2f} "
          f"node3_worker_again_s={median(figures['worker_s']):.2f} "
          f"(min {min(figures['worker_s']):.2f}, max {max(figures['worker_s']):.2f})")
    return 0


if __name__ == "__main__":
    sys.exit(main(quick="--quick" in sys.argv))
