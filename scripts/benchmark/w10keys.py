"""W10keys, many rate keys: four workers of default slots drain 3,000 jobs spread over 100 rate keys
of a handler limited to 5 a second per key (``bench.rated_key``), then the same jobs unlimited: the
most starts of one key in any second, how close each key comes to its limit, and the server's work per
admitted job against an unlimited job's."""

from __future__ import annotations

import json
import time

from benchmark.common import Bench, Figure, emit, median, note
from benchmark.w10 import WORKERS, drain, most_in_a_second

KEYS = 100
LIMIT = 5  # jobs a second per key: bench.rated_key's declared rate_limit


def w10_keys(bench: Bench, sizes: object, each: int = 30) -> list[Figure]:
    n = KEYS * each
    fig = Figure("W10keys", {"keys": str(KEYS), "limit_per_s": str(LIMIT), "k": str(WORKERS), "n": str(n)},
                 spread=("ratio_limit",))
    payloads = [json.dumps({"key": f"k{job % KEYS}"}).encode() for job in range(n)]
    for run in range(bench.runs):
        note(f"W10keys run {run + 1}: {n} jobs over {KEYS} keys limited to {LIMIT}/s each on {WORKERS} workers;"
             " then unlimited")
        started, server = drain(bench, f"w10keys_rated_r{run}", n, "bench.rated_key", payloads)
        _, free_server = drain(bench, f"w10keys_free_r{run}", n, "bench.noop", payloads)
        by_key: dict[str, list[float]] = {}
        for at, payload in started:
            by_key.setdefault(json.loads(payload)["key"], []).append(at)
        # Each key past its first second's burst, as a ratio to its limit: the median key and the slowest.
        ratios = sorted((len(times) - LIMIT) / (times[-1] - times[LIMIT - 1]) / LIMIT for times in by_key.values())
        fig.add(ratio_limit=median(ratios), slowest_key_ratio=ratios[0],
                most_in_a_second=max(most_in_a_second(times) for times in by_key.values()),
                server_us_job=server * 1e6 / n, unlimited_server_us_job=free_server * 1e6 / n,
                server_ratio=server / free_server if free_server else float("nan"))
        time.sleep(0.5)
    return [emit(fig)]
