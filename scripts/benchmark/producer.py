#!/usr/bin/env python3
"""W2's producer as a process of its own, for the ``remote`` variant (run on another test host).

    producer.py DSN SECONDS INTERVAL [HANDLER]   # one job (bench.latency by default) every INTERVAL s;
                                                # prints how many

Like a web process: one Producer, connected (and its first enqueue done) before the timed jobs.
"""

from __future__ import annotations

import sys
import time

import mysqlq


def paced(producer: mysqlq.Producer, seconds: float, interval: float, handler: str = "bench.latency") -> int:
    """Enqueue one ``handler`` job (carrying its enqueue time) every ``interval`` s for ``seconds``;
    returns how many were sent. W2's producer, here and in-process."""
    sent = 0
    tick = time.perf_counter()
    end = tick + seconds
    while tick < end:
        producer.enqueue(handler, {"t": time.time()})
        sent += 1
        tick += interval
        time.sleep(max(0.0, tick - time.perf_counter()))
    return sent


def main(dsn: str, seconds: float, interval: float, handler: str = "bench.latency") -> int:
    with mysqlq.Producer(mysqlq.Settings(dsn=mysqlq.Dsn.parse(dsn))) as producer:
        producer.enqueue("bench.noop", {"warm": True})
        print(paced(producer, seconds, interval, handler))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1], float(sys.argv[2]), float(sys.argv[3]), *sys.argv[4:5]))
