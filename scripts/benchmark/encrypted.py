"""What encryption at rest costs: W4's single and bulk enqueues and W1's drain, with keys against
without, alternating within each run on the same server.

Enqueue: one producer with a key and one without enqueue the same no-op jobs into one database,
single jobs in alternating blocks, then ``enqueue_many`` of W4's bulk size in alternating pairs;
jobs/s and the server's CPU per job for each. Drain: two workers drain W1's 20,000 no-op jobs,
enqueued through ``enqueue_many`` (with the key, their payloads sealed), once with the key in the
workers' environment and once with no key anywhere, alternately first; ``ratio_keys`` is the keyed
drain's jobs/s over the plain one's, with the workers' and the server's CPU per job beside it.
"""

from __future__ import annotations

import os
import pathlib
import tempfile
import time
from collections.abc import Iterator
from contextlib import contextmanager

import mysqlq
from benchmark.common import Bench, Figure, emit, note, payload, timer
from benchmark.shared import Drain, ServerCpu, Sizes, drain_mysqlq
from mysqlq.core.encryption import Keyring
from mysqlq.core.keyfile import new_key_line, read_keys

K = 2  # the drain's workers
BLOCKS = 10  # single enqueues alternate in this many blocks
BULK_PAIRS = 4  # enqueue_many calls of each side


@contextmanager
def keys_file() -> Iterator[pathlib.Path]:
    """A keys file with one fresh key, readable by its owner only, removed afterwards."""
    with tempfile.TemporaryDirectory(prefix="mysqlq-bench-keys-") as tmp:
        path = pathlib.Path(tmp) / "mysqlq.keys"
        path.write_text(new_key_line("bench") + "\n")
        os.chmod(path, 0o600)
        yield path


def encryption(bench: Bench, sizes: Sizes) -> list[Figure]:
    single = Figure("keys", {"mode": "single", "n": str(sizes.w4_singles)}, spread=("ratio_keys",))
    bulk = Figure("keys", {"mode": "bulk", "n": str(sizes.w4_bulk)}, spread=("ratio_keys",))
    drains = Figure("keys", {"drain": "W1", "k": str(K), "n": str(sizes.w1_jobs)}, spread=("ratio_keys",))
    with keys_file() as path:
        keys = read_keys(path, "the bench's keys file")
        for run in range(bench.runs):
            note(f"keys run {run + 1}: {sizes.w4_singles} single enqueues and {BULK_PAIRS} × {sizes.w4_bulk} "
                 "in bulk, with a key and without, alternating")
            single_figures, bulk_figures = enqueues(bench, sizes, keys, run)
            single.add(**single_figures)
            bulk.add(**bulk_figures)
            note(f"keys run {run + 1}: {sizes.w1_jobs} no-op jobs drained by {K} workers, sealed and plain")
            found: dict[str, Drain] = {}
            for side in (("keys", "plain") if run % 2 == 0 else ("plain", "keys")):
                found[side] = drain(bench, f"keys_{side}_r{run}", sizes.w1_jobs, path if side == "keys" else None)
            sealed, plain = found["keys"], found["plain"]
            drains.add(jobs_s=sealed.jobs_s, plain_jobs_s=plain.jobs_s, ratio_keys=sealed.jobs_s / plain.jobs_s,
                      cpu_us_job=sealed.cpu_us_job, plain_cpu_us_job=plain.cpu_us_job,
                      server_us_job=sealed.server_us_job, plain_server_us_job=plain.server_us_job)
            time.sleep(0.5)
    return [emit(single), emit(bulk), emit(drains)]


def enqueues(bench: Bench, sizes: Sizes, keys: Keyring, run: int) -> tuple[dict[str, float], dict[str, float]]:
    """One run's single and bulk enqueues, each side timed over its own blocks (see the docstring)."""
    dsn = bench.fresh(f"keys_enqueue_r{run}")
    sides = {"keys": mysqlq.Settings(dsn=dsn, hint_dir=str(bench.hint_dir), keys=keys),
             "plain": mysqlq.Settings(dsn=dsn, hint_dir=str(bench.hint_dir), keys=None)}
    producers = {side: mysqlq.Producer(settings) for side, settings in sides.items()}
    try:
        for producer in producers.values():
            producer.enqueue("bench.noop", payload(0))  # connect before timing
        seconds = dict.fromkeys(sides, 0.0)
        server = {side: ServerCpu(bench) for side in sides}
        step = -(-sizes.w4_singles // BLOCKS)
        for block, start in enumerate(range(0, sizes.w4_singles, step)):
            numbers = range(start, min(start + step, sizes.w4_singles))
            for side in (("keys", "plain") if block % 2 == 0 else ("plain", "keys")):
                with server[side], timer() as t:
                    for i in numbers:
                        producers[side].enqueue("bench.noop", payload(i))
                seconds[side] += t[0]
        n = sizes.w4_singles
        single = {"jobs_s": n / seconds["keys"], "plain_jobs_s": n / seconds["plain"],
                  "ratio_keys": seconds["plain"] / seconds["keys"], "server_us_job": server["keys"].us_per(n),
                  "plain_server_us_job": server["plain"].us_per(n)}
        jobs = [mysqlq.Job("bench.noop", payload(i)) for i in range(sizes.w4_bulk)]
        seconds = dict.fromkeys(sides, 0.0)
        server = {side: ServerCpu(bench) for side in sides}
        for pair in range(BULK_PAIRS):
            for side in (("keys", "plain") if pair % 2 == 0 else ("plain", "keys")):
                with server[side], timer() as t:
                    producers[side].enqueue_many(jobs)
                seconds[side] += t[0]
        n = BULK_PAIRS * sizes.w4_bulk
        bulk = {"jobs_s": n / seconds["keys"], "plain_jobs_s": n / seconds["plain"],
                "ratio_keys": seconds["plain"] / seconds["keys"], "server_us_job": server["keys"].us_per(n),
                "plain_server_us_job": server["plain"].us_per(n)}
    finally:
        for producer in producers.values():
            producer.close()
    bench.drop(dsn.database)
    return single, bulk


def drain(bench: Bench, name: str, n: int, keys_path: pathlib.Path | None) -> Drain:
    """W1's drain of ``n`` no-op jobs enqueued through ``enqueue_many``, sealed when ``keys_path`` is
    given (and the workers then hold that key)."""
    keys = read_keys(keys_path, "the bench's keys file") if keys_path is not None else None

    def fill(dsn: mysqlq.Dsn) -> None:
        with mysqlq.Producer(mysqlq.Settings(dsn=dsn, hint_dir=str(bench.hint_dir), keys=keys)) as producer:
            producer.enqueue_many([mysqlq.Job("bench.noop", payload(i)) for i in range(n)])

    env = {"MYSQLQ_ENCRYPTION_KEYS_FILE": str(keys_path)} if keys_path is not None else {}
    return drain_mysqlq(bench, name, K, n, fill=fill, env=env)
