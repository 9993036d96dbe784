"""W10, rate limits: four workers of default slots drain 3,000 jobs of one handler limited to 200 a
second (``bench.rated``), then the same jobs unlimited (``bench.noop``) in the same run: how close the
drain comes to the limit, whether any window of a second held more, and the server's work per admitted
job against an unlimited job's.

The drain is watched every 0.2 s, not every 10 ms as elsewhere: a rated drain lasts seconds, and the
watching would otherwise count as the server's work per job."""

from __future__ import annotations

import time

from benchmark.common import Bench, Figure, emit, fill_jobs, note, wait_drained
from benchmark.shared import cpu_since, server_cpu

WATCH = 0.2  # seconds between looks at the drain

LIMIT = 200  # jobs a second: bench.rated's declared rate_limit
WORKERS = 4


def most_in_a_second(times: list[float]) -> int:
    most, first = 0, 0
    for last, at in enumerate(times):
        while at - times[first] >= 1.0:
            first += 1
        most = max(most, last - first + 1)
    return most


def drain(bench: Bench, name: str, n: int, handler: str,
          payloads: list[bytes] | None = None) -> tuple[list[tuple[float, bytes]], float]:
    """Start times (server clock, sorted) with the jobs' payloads, and the server's CPU seconds meanwhile."""
    dsn = bench.fresh(name)
    conn = bench.connect(dsn)
    cur = conn.cursor()
    fill_jobs(cur, n, handler=handler, payloads=payloads)
    server = server_cpu(bench)
    workers = bench.workers(dsn, WORKERS, tag=name)
    try:
        wait_drained(cur, workers, timeout=max(120.0, n / LIMIT * 3), interval=WATCH)
        server = cpu_since(server_cpu(bench), server)
    finally:
        workers.stop()
    cur.execute("SELECT UNIX_TIMESTAMP(started_at), payload FROM mysqlq_jobs WHERE status = 'done'"
                " ORDER BY started_at")
    times = [(float(started), bytes(payload)) for started, payload in cur.fetchall()]
    conn.close()
    bench.drop(dsn.database)
    workers.log.unlink(missing_ok=True)
    if len(times) != n:
        raise RuntimeError(f"{name}: expected {n} done jobs, found {len(times)}")
    return times, server


def w10(bench: Bench, sizes: object, n: int = 3000) -> list[Figure]:
    fig = Figure("W10", {"limit_per_s": str(LIMIT), "k": str(WORKERS), "n": str(n)}, spread=("ratio_limit",))
    for run in range(bench.runs):
        note(f"W10 run {run + 1}: {n} jobs limited to {LIMIT}/s on {WORKERS} workers; then unlimited")
        started, server = drain(bench, f"w10_rated_r{run}", n, "bench.rated")
        times = [at for at, _ in started]
        _, free_server = drain(bench, f"w10_free_r{run}", n, "bench.noop")
        steady = (n - LIMIT) / (times[-1] - times[LIMIT - 1])  # past the first second's burst
        fig.add(rate_s=steady, ratio_limit=steady / LIMIT, most_in_a_second=most_in_a_second(times),
                server_us_job=server * 1e6 / n, unlimited_server_us_job=free_server * 1e6 / n,
                server_ratio=server / free_server if free_server else float("nan"))
        time.sleep(0.5)
    return [emit(fig)]
