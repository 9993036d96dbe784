"""Rate limits.

W10: four workers of default slots drain 3,000 jobs of one handler limited to 200 a second
(``bench.rated``), then the same jobs unlimited (``bench.noop``) in the same run: how close the drain
comes to the limit, whether any window of a second held more, and the server's work per admitted job
against an unlimited job's.

W10keys, many rate keys: four workers of default slots drain 3,000 jobs spread over 100 rate keys of a
handler limited to 5 a second per key (``bench.rated_key``), then the same jobs unlimited: the most
starts of one key in any second, how close each key comes to its limit, and the server's work per
admitted job against an unlimited job's.

The drain is watched every 0.2 s, not every 10 ms as elsewhere: a rated drain lasts seconds, and the
watching would otherwise count as the server's work per job."""

from __future__ import annotations

import json
import time

from mysqlq_harness.jobs import every_job

from benchmark.common import Bench, Figure, emit, fill_jobs, median, note, wait_drained
from benchmark.shared import cpu_since, server_cpu

WATCH = 0.2  # seconds between looks at the drain

LIMIT = 200  # jobs a second: bench.rated's declared rate_limit
WORKERS = 4
KEYS = 100  # W10keys: rate keys
KEY_LIMIT = 5  # jobs a second per key: bench.rated_key's declared rate_limit


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
    cur.execute(f"SELECT UNIX_TIMESTAMP(started_at), payload FROM {every_job('status, started_at, payload')}"
                " WHERE status = 'done'"
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


def w10_keys(bench: Bench, sizes: object, each: int = 30) -> list[Figure]:
    n = KEYS * each
    fig = Figure("W10keys", {"keys": str(KEYS), "limit_per_s": str(KEY_LIMIT), "k": str(WORKERS), "n": str(n)},
                 spread=("ratio_limit",))
    payloads = [json.dumps({"key": f"k{job % KEYS}"}).encode() for job in range(n)]
    for run in range(bench.runs):
        note(f"W10keys run {run + 1}: {n} jobs over {KEYS} keys limited to {KEY_LIMIT}/s each on {WORKERS} "
             "workers; then unlimited")
        started, server = drain(bench, f"w10keys_rated_r{run}", n, "bench.rated_key", payloads)
        _, free_server = drain(bench, f"w10keys_free_r{run}", n, "bench.noop", payloads)
        by_key: dict[str, list[float]] = {}
        for at, payload in started:
            by_key.setdefault(json.loads(payload)["key"], []).append(at)
        # Each key past its first second's burst, as a ratio to its limit: the median key and the slowest.
        ratios = sorted((len(times) - KEY_LIMIT) / (times[-1] - times[KEY_LIMIT - 1]) / KEY_LIMIT
                        for times in by_key.values())
        fig.add(ratio_limit=median(ratios), slowest_key_ratio=ratios[0],
                most_in_a_second=max(most_in_a_second(times) for times in by_key.values()),
                server_us_job=server * 1e6 / n, unlimited_server_us_job=free_server * 1e6 / n,
                server_ratio=server / free_server if free_server else float("nan"))
        time.sleep(0.5)
    return [emit(fig)]
