"""The client's side of a single ``enqueue()``: run as a process of its own by ``scripts/bench --only
producer`` (so that ``PYTHONPATH`` picks the mysqlq measured), it enqueues ``--n`` no-op jobs in a
loop on one Producer and prints, as JSON, the thread's CPU and the wall time per call, and how long
``import mysqlq`` took in this process."""

from __future__ import annotations

import argparse
import json
import time

started = time.perf_counter()
import mysqlq  # noqa: E402  (timed)

imported = time.perf_counter() - started


def main() -> int:
    parser = argparse.ArgumentParser(prog="enqueue_cpu.py")
    parser.add_argument("--dsn", required=True)
    parser.add_argument("--n", type=int, default=10_000)
    parser.add_argument("--hint-dir", required=True)
    args = parser.parse_args()
    settings = mysqlq.Settings(dsn=mysqlq.Dsn.parse(args.dsn), hint_dir=args.hint_dir)
    payload = {"n": 0, "pad": "x" * 80}
    with mysqlq.Producer(settings) as producer:
        producer.enqueue("bench.noop", payload)  # connect before timing
        cpu, wall = time.thread_time(), time.perf_counter()
        for i in range(args.n):
            payload["n"] = i
            producer.enqueue("bench.noop", payload)
        cpu, wall = time.thread_time() - cpu, time.perf_counter() - wall
    print(json.dumps({"cpu_us": cpu / args.n * 1e6, "wall_us": wall / args.n * 1e6, "import_s": imported}))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
