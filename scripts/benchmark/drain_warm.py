"""W1warm, drain as a daemon lives: K workers started and idle, then a backlog in one commit; the
bare loop run the same way. The server's CPU per job from the commit to the last job done, for each
side (``server_us_job``, ``bare_server_us_job``, ``ceiling_server_us_job``).
"""

from __future__ import annotations

import json
import subprocess
import sys
import time

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
    note,
    payload_bytes,
    status_counts,
    wait_drained,
)
from benchmark.shared import BATCH, Sizes, ceiling_statements, cpu_since, server_cpu

WARM_IDLE = 1.0  # seconds the started workers sit idle before the backlog appears


def w1_warm(bench: Bench, sizes: Sizes) -> list[Figure]:
    """W1 as a daemon lives: K workers already started and idle, then a backlog appears in one commit
    (and the producer's hint); time from that commit to the last job done. The bare loop is run the
    same way: K drainers waiting (looking every 5 ms), then the same backlog in one commit."""
    n = sizes.w1_warm_jobs
    figures = []
    for k in (2, 4):
        mq = Figure("W1warm", {"k": str(k), "batch": BATCH, "n": str(n)},
                    spread=("jobs_s", "ratio_bare", "server_us_job"))
        for run in range(bench.runs):
            note(f"W1warm run {run + 1}: K={k} idle mysqlq workers, then {n} jobs in one commit; then bare")
            jobs_s, server_s = warm_mysqlq(bench, f"w1w_k{k}_r{run}", k, n)
            bare_s, bare_server_s = warm_bare(bench, f"w1wb_k{k}_r{run}", k, n)
            ceiling_s, ceiling_server_s = warm_bare(bench, f"w1wc_k{k}_r{run}", k, n, ceiling=True)
            mq.add(jobs_s=jobs_s, bare_jobs_s=bare_s, ratio_bare=jobs_s / bare_s, ceiling_ratio_bare=ceiling_s / bare_s,
                   server_us_job=server_s * 1e6 / n, bare_server_us_job=bare_server_s * 1e6 / n,
                   ceiling_server_us_job=ceiling_server_s * 1e6 / n)
        figures.append(emit(mq))
    return figures


def warm_mysqlq(bench: Bench, name: str, k: int, n: int) -> tuple[float, float]:
    """Jobs per second from the backlog's commit to the last job's outcome (its finished_at), and the
    server's CPU seconds from the commit until every job was seen done."""
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
        committed, server = time.time(), server_cpu(bench)
        mysqlq.notify(bench.settings(dsn), ["default"])  # what a producer sends after its commit
        wait_drained(cur, workers, timeout=max(120.0, n / 50))
        server_s = cpu_since(server_cpu(bench), server)
    finally:
        workers.stop()
    cur.execute("SELECT SUM(status = 'done'), UNIX_TIMESTAMP(MAX(finished_at))"
                f" FROM {every_job('status, finished_at')}")
    done, last = cur.fetchone()
    conn.close()
    if int(done or 0) != n:
        raise RuntimeError(f"{name}: expected {n} done jobs, found {status_counts(cur)}")
    bench.drop(dsn.database)
    workers.log.unlink(missing_ok=True)
    return n / (float(last) - committed), server_s


def warm_bare(bench: Bench, name: str, k: int, n: int, ceiling: bool = False) -> tuple[float, float]:
    """The bare loop run the same way: K drainers waiting, then the backlog in one commit (with
    ``ceiling``: mysqlq's own statements on mysqlq_jobs, see drain_bare); jobs per second and the
    server's CPU seconds from the commit until the drainers have left."""
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
    committed, server = time.time(), server_cpu(bench)
    outputs = [proc.communicate(timeout=max(120.0, n / 50))[0] for proc in procs]
    server_s = cpu_since(server_cpu(bench), server)
    if any(proc.returncode for proc in procs):
        raise RuntimeError(f"{name}: a bare drainer failed")
    results = [json.loads(out) for out in outputs]
    if sum(r["jobs"] for r in results) != n:
        raise RuntimeError(f"{name}: the bare drainers did {sum(r['jobs'] for r in results)} of {n} jobs")
    conn.close()
    bench.drop(dsn.database)
    return n / (max(r["last"] for r in results if r["last"]) - committed), server_s
