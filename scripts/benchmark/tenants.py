"""W11, fair queues: jobs with a ``fairness_key`` (a tenant), which workers take in turn across keys
within a queue and a priority instead of in the order of their ids.

The scenario: one key ("big") has 20,000 jobs enqueued in one ``enqueue_many``; four workers of
default slots drain them; once about 2,000 are done, ten other keys (t0…t9) enqueue 50 single jobs
each, interleaved, from the benchmark's process. ``big_starts``: how many of the big key's jobs started
between the first late job's enqueue and the last late job's start (in id order, as before keys: about
all the big key had left; in turn across keys: about what starts while the late jobs are being
enqueued, and the few jobs the workers hold claimed). ``late_enqueue_ms`` is how long those 500
enqueues took: the big key keeps starting jobs meanwhile, whatever the order, so
``big_starts_after_enqueue`` counts only those that started after the last late job was enqueued and
before the last late job started, what the claim's order alone decides.

The handler is ``bench.sleep`` for 10 ms, a short call to another service, so that the big key drains
at about 2,000 jobs/s (4 workers × 5 slots / 10 ms) and in about 10 s. With 1 ms it drained at about
9,000 jobs/s on 2 cores, and the late producer's 500 commits (about 0.3 s) alone let some 2,800 of the
big key's jobs start: ``big_starts`` would measure the producer's pace, not the order, and no order
could meet the target of 1,500. With 10 ms the floor, what the big key starts during the late
commits (0.3–0.7 s), is some 600–800, and the claims are sized to what the slots start within the
claim horizon (about 5 × 50 ms / 10 ms = 25 per worker), not 500.

Two more scenarios mix jobs without a key, which take turns as one key of their own: ``keyless_big``,
the 20,000 jobs without a key and the 500 late jobs keyed as above; ``keyless_late``, the 20,000 of
the big key and the 500 late jobs without a key (one key: they take one turn each round, so some 500
of the big key's jobs start among them, besides the floor).

The keyed drain: 20,000 no-op jobs (as W1) drained by two workers, once with every job keyed
(round-robin over 100 keys) and once without keys, alternately in each run, both enqueued through
``enqueue_many`` before the workers start: ``ratio_keyed`` is keyed jobs/s over unkeyed jobs/s, from
the workers' start (``_steady``: from the first claim to the last job's end).

Against a mysqlq whose ``Job`` has no ``fairness_key`` (an older commit, run in alternation through
PYTHONPATH), the same jobs are enqueued without keys, and the figures say ``keys=unsupported``.
"""

from __future__ import annotations

import dataclasses
import functools
import time
from collections.abc import Sequence
from typing import Any

from mysqlq_harness.jobs import every_job
from mysqlq_harness.waiting import wait_for

import mysqlq
from benchmark.common import Bench, Figure, emit, note, payload, percentile, status_counts, wait_drained
from benchmark.shared import Drain, Sizes, drain_mysqlq

WORKERS = 4  # the scenario's workers, default options
BIG = 20_000  # jobs of the big key, in one enqueue_many
BIG_KEY = "big"
HEAD_START = 2000  # big-key jobs done before the late keys enqueue
LATE_KEYS = tuple(f"t{i}" for i in range(10))
LATE_EACH = 50  # single enqueues per late key
HANDLER = "bench.sleep"
SLEEP_S = 0.01  # bench.sleep's seconds (see the module's docstring)
DRAIN_K = 2  # the keyed drain's workers
DRAIN_KEYS = 100  # the keyed drain's keys, round-robin


@functools.cache
def keys_supported() -> bool:
    """Whether this mysqlq's Job has a fairness key (else the jobs go without one)."""
    return "fairness_key" in {f.name for f in dataclasses.fields(mysqlq.Job)}


# Scenario -> (the big backlog's key, the late jobs' keys, each enqueuing LATE_EACH); None: no key.
MIXES: dict[str, tuple[str | None, tuple[str | None, ...]]] = {
    "late_keys": (BIG_KEY, LATE_KEYS),
    "keyless_big": (None, LATE_KEYS),
    "keyless_late": (BIG_KEY, (None,) * len(LATE_KEYS)),
}


def keyed(key: str | None) -> dict[str, Any]:
    """The keyword that gives a job its fairness key, or none without a key or where mysqlq has no such thing."""
    return {"fairness_key": key} if key is not None and keys_supported() else {}


def w11(bench: Bench, sizes: Sizes) -> list[Figure]:
    supported = keys_supported()
    keys = "fair" if supported else "unsupported"
    late = len(LATE_KEYS) * LATE_EACH
    mixes = list(MIXES) if supported else ["late_keys"]
    scenarios = {mix: Figure("W11", {"scenario": mix, "keys": keys, "big": str(BIG),
                                     "late": f"{len(LATE_KEYS)}x{LATE_EACH}", "k": str(WORKERS),
                                     "handler": f"{HANDLER}_{SLEEP_S * 1000:g}ms"},
                             spread=("big_starts", "late_last_start_ms"))
                 for mix in mixes}
    n = sizes.w1_jobs
    drains = Figure("W11", {"drain": "keyed", "keys": str(DRAIN_KEYS) if supported else "unsupported",
                            "k": str(DRAIN_K), "n": str(n)}, spread=("ratio_keyed",))
    if not supported:
        note("W11: this mysqlq's Job has no fairness_key: every job is enqueued without a key")
    for run in range(bench.runs):
        for mix in mixes:
            big_key, late_keys_of = MIXES[mix]
            note(f"W11 run {run + 1}, {mix}: {BIG} jobs of key {big_key!r} on {WORKERS} workers ({HANDLER} "
                 f"{SLEEP_S:g} s), then {late} single jobs of keys {sorted(set(map(str, late_keys_of)))} once "
                 f"{HEAD_START} are done")
            scenarios[mix].add(**late_keys(bench, f"w11_{mix}_r{run}", big_key, late_keys_of))
        note(f"W11 run {run + 1}: {n} no-op jobs drained by {DRAIN_K} workers, keyed over {DRAIN_KEYS} keys and "
             "without keys")
        # Alternately first, so that neither side always has the warmer server.
        order = ("keyed", "unkeyed") if run % 2 == 0 else ("unkeyed", "keyed")
        found: dict[str, tuple[Drain, float]] = {}
        for side in order:
            jobs = [mysqlq.Job("bench.noop", payload(i), **(keyed(f"k{i % DRAIN_KEYS}") if side == "keyed" else {}))
                    for i in range(n)]
            found[side] = drain_jobs(bench, f"w11_{side}_r{run}", DRAIN_K, jobs)
        (keyed_drain, keyed_enqueue), (plain_drain, plain_enqueue) = found["keyed"], found["unkeyed"]
        drains.add(keyed_jobs_s=keyed_drain.jobs_s, unkeyed_jobs_s=plain_drain.jobs_s,
                   ratio_keyed=keyed_drain.jobs_s / plain_drain.jobs_s,
                   ratio_keyed_steady=keyed_drain.steady_jobs_s / plain_drain.steady_jobs_s,
                   keyed_server_us_job=keyed_drain.server_us_job, unkeyed_server_us_job=plain_drain.server_us_job,
                   keyed_enqueue_s=keyed_enqueue, unkeyed_enqueue_s=plain_enqueue)
        time.sleep(0.5)
    return [*(emit(scenario) for scenario in scenarios.values()), emit(drains)]


def late_keys(bench: Bench, name: str, big_key: str | None, late_keys_of: Sequence[str | None]) -> dict[str, float]:
    """One run of a scenario (see the module's docstring): its figures."""
    dsn = bench.fresh(name)
    conn = bench.connect(dsn)
    cur = conn.cursor()
    body = {"s": SLEEP_S}
    late = len(late_keys_of) * LATE_EACH
    with mysqlq.Producer(bench.settings(dsn)) as producer:  # one producer: the late enqueues reuse its connection
        producer.enqueue_many([mysqlq.Job(HANDLER, body, **keyed(big_key)) for _ in range(BIG)])
        cur.execute("SELECT MAX(id) FROM mysqlq_jobs")
        big_last = int(cur.fetchone()[0])  # every late job comes after: told apart by id, not by a key column
        workers = bench.workers(dsn, WORKERS, tag=name)
        try:
            def head_start() -> bool:
                # Done ones, not claimed ones: the first claims, sized blind, take 500 jobs a worker at
                # once, and give back most of them when the first job says how long they take.
                cur.execute("SELECT COUNT(*) FROM mysqlq_jobs_history")
                if int(cur.fetchone()[0]) >= HEAD_START:
                    return True
                workers.check_alive()
                return False

            wait_for(head_start, f"{name}: {HEAD_START} jobs of the big key to be done (see {workers.log})", 60.0,
                     interval=0.005)
            t0 = time.perf_counter()
            for _ in range(LATE_EACH):
                for key in late_keys_of:
                    producer.enqueue(HANDLER, body, **keyed(key))
            late_enqueue = time.perf_counter() - t0
            wait_drained(cur, workers, timeout=120.0)
        finally:
            workers.stop()
    cur.execute("SELECT COUNT(*), SUM(status = 'done'), MIN(enqueued_at), MAX(enqueued_at), MAX(started_at),"
                " TIMESTAMPDIFF(MICROSECOND, MIN(enqueued_at), MAX(started_at))"
                f" FROM {every_job('id, status, enqueued_at, started_at')} WHERE id > %s", (big_last,))
    count, done, first_enqueue, last_enqueue, last_start, span_us = cur.fetchone()
    if int(count) != late or int(done or 0) != late:
        raise RuntimeError(f"{name}: expected {late} late jobs done, found {count} ({status_counts(cur)})")
    cur.execute("SELECT COUNT(*), SUM(status = 'done'), SUM(started_at BETWEEN %s AND %s),"
                " SUM(started_at > %s AND started_at <= %s), SUM(started_at < %s)"
                f" FROM {every_job('id, status, started_at')} WHERE id <= %s",
                (first_enqueue, last_start, last_enqueue, last_start, first_enqueue, big_last))
    big_count, big_done, big_starts, big_after, big_before = (int(v or 0) for v in cur.fetchone())
    if big_count != BIG or big_done != BIG:
        raise RuntimeError(f"{name}: expected {BIG} big-key jobs done, found {big_count} ({status_counts(cur)})")
    cur.execute(f"SELECT TIMESTAMPDIFF(MICROSECOND, enqueued_at, started_at) / 1000"
                f" FROM {every_job('id, enqueued_at, started_at')} WHERE id > %s", (big_last,))
    waits = [float(ms) for (ms,) in cur.fetchall()]
    conn.close()
    bench.drop(dsn.database)
    workers.log.unlink(missing_ok=True)
    return {"big_starts": big_starts, "big_starts_after_enqueue": big_after, "late_last_start_ms": int(span_us) / 1000,
            "late_p50_wait_ms": percentile(waits, 50), "late_p99_wait_ms": percentile(waits, 99),
            "late_enqueue_ms": late_enqueue * 1000, "big_before_late": big_before}


def drain_jobs(bench: Bench, name: str, k: int, jobs: Sequence[mysqlq.Job]) -> tuple[Drain, float]:
    """W1's drain (shared.drain_mysqlq) of jobs enqueued through ``enqueue_many``: the drain, and the
    seconds the enqueue took."""
    took = [0.0]

    def fill(dsn: mysqlq.Dsn) -> None:
        with mysqlq.Producer(bench.settings(dsn)) as producer:
            t0 = time.perf_counter()
            producer.enqueue_many(jobs)
            took[0] = time.perf_counter() - t0

    return drain_mysqlq(bench, name, k, len(jobs), fill=fill), took[0]

