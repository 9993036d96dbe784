"""W4, enqueue: single enqueues and ``enqueue_many`` against bare INSERTs (and their ceilings), threads
sharing one Producer, ``aenqueue`` calls in flight and the event loop's lag; for each, the server's CPU
per job of every side (``server_us_job``, ``bare_server_us_job``, ``ceiling_server_us_job``).
"""

from __future__ import annotations

import asyncio
import time
from concurrent.futures import ThreadPoolExecutor
from typing import Any

import mysqlq
from benchmark import bare as bench_bare
from benchmark.common import Bench, Figure, emit, note, payload, payload_bytes, percentile, timer
from benchmark.shared import ServerCpu, Sizes
from mysqlq.producer.enqueue import BULK_CHUNK
from mysqlq.store.sql import query

# The single enqueues and the bare INSERTs alternate in blocks, and each run times several bulk
# enqueues of sizes.w4_bulk jobs alternating with as many bare multi-row fills: a burst of other
# work on the machine then lands on both sides of a ratio, not on one.
W4_BLOCKS = 10
W4_BULK_PAIRS = 4


def _timed_fill(cur: Any, payloads: list[bytes], server: ServerCpu) -> float:
    with server, timer() as t:
        bench_bare.fill(cur, payloads)
    return t[0]


def _rendered_inserts(producer: mysqlq.Producer, n: int) -> list[bytes]:
    """The statements ``enqueue`` sends for jobs 0..n-1 of W4, made in advance: sent in a plain loop,
    they are the ceiling of any producer of this schema (the server's work alone, no Python around it)."""
    rows = [mysqlq.Job("bench.noop", payload(i)).row(producer.settings) for i in range(n)]
    with producer.pool.database() as db:
        literal = db.conn.literal
        return [producer.renderer.statement("insert_job", (row,), literal) for row in rows]


def _rendered_bulk(producer: mysqlq.Producer, jobs: list[mysqlq.Job]) -> list[bytes]:
    """The multi-row INSERTs ``enqueue_many(jobs)`` sends (its chunks), made in advance: its ceiling."""
    rows = [job.row(producer.settings) for job in jobs]
    with producer.pool.database() as db:
        literal = db.conn.literal
        return [producer.renderer.statement("insert_jobs", rows[start : start + BULK_CHUNK], literal)
                for start in range(0, len(rows), BULK_CHUNK)]


def _timed_statements(cur: Any, statements: list[bytes], server: ServerCpu) -> float:
    with server, timer() as t:
        for statement in statements:
            cur.execute(statement)
    return t[0]


def w4(bench: Bench, sizes: Sizes) -> list[Figure]:
    single = Figure("W4", {"mode": "single", "n": str(sizes.w4_singles)},
                    spread=("jobs_s", "ratio_bare", "server_us_job"))
    bulk = Figure("W4", {"mode": "bulk", "n": str(sizes.w4_bulk)}, spread=("jobs_s", "ratio_bare", "server_us_job"))
    threads = {count: Figure("W4", {"mode": "threads", "threads": str(count), "n": str(4 * sizes.w4_singles)},
                             spread=("jobs_s", "ratio_bare", "server_us_job")) for count in W4_THREADS}
    loop = Figure("W4", {"mode": "async", "in_flight": str(W4_IN_FLIGHT)}, spread=("jobs_s", "lag_p99_ms"))
    for run in range(bench.runs):
        note(f"W4 run {run + 1}: {sizes.w4_singles} single enqueues vs bare INSERTs (alternating in "
             f"{W4_BLOCKS} blocks), {W4_BULK_PAIRS} × {sizes.w4_bulk} in bulk vs bare multi-row INSERTs (alternating)")
        dsn = bench.fresh(f"w4_r{run}")
        conn = bench.connect(dsn)
        cur = conn.cursor()
        bench_bare.create_table(cur)
        bare_payloads = [payload_bytes(i) for i in range(sizes.w4_singles)]
        bulk_payloads = [payload_bytes(i) for i in range(sizes.w4_bulk)]
        with mysqlq.Producer(bench.settings(dsn)) as producer:
            producer.enqueue("bench.noop", payload(0))  # connect before timing
            bench_bare.insert_loop(cur, bare_payloads[:1])
            rendered = _rendered_inserts(producer, sizes.w4_singles)
            mysqlq_s = bare_s = rendered_s = 0.0
            server, bare_server, rendered_server = ServerCpu(bench), ServerCpu(bench), ServerCpu(bench)
            step = -(-sizes.w4_singles // W4_BLOCKS)
            for block, start in enumerate(range(0, sizes.w4_singles, step)):
                numbers = range(start, min(start + step, sizes.w4_singles))
                if block % 2:  # every other block the bare loop goes first
                    with bare_server:
                        bare_s += bench_bare.insert_loop(cur, bare_payloads[numbers.start : numbers.stop])
                with server, timer() as t:
                    for i in numbers:
                        producer.enqueue("bench.noop", payload(i))
                mysqlq_s += t[0]
                rendered_s += _timed_statements(cur, rendered[numbers.start : numbers.stop], rendered_server)
                if not block % 2:
                    with bare_server:
                        bare_s += bench_bare.insert_loop(cur, bare_payloads[numbers.start : numbers.stop])
            single.add(jobs_s=sizes.w4_singles / mysqlq_s, bare_jobs_s=sizes.w4_singles / bare_s,
                       ratio_bare=bare_s / mysqlq_s, ceiling_ratio_bare=bare_s / rendered_s,
                       server_us_job=server.us_per(sizes.w4_singles),
                       bare_server_us_job=bare_server.us_per(sizes.w4_singles),
                       ceiling_server_us_job=rendered_server.us_per(sizes.w4_singles))
            jobs = [mysqlq.Job("bench.noop", payload(i)) for i in range(sizes.w4_bulk)]
            rendered_bulk = _rendered_bulk(producer, jobs)
            bulk_s = bare_bulk_s = rendered_bulk_s = 0.0
            server, bare_server, rendered_server = ServerCpu(bench), ServerCpu(bench), ServerCpu(bench)
            for pair in range(W4_BULK_PAIRS):
                if pair % 2:  # every other pair the bare INSERTs go first
                    bare_bulk_s += _timed_fill(cur, bulk_payloads, bare_server)
                with server, timer() as tb:
                    producer.enqueue_many(jobs)
                bulk_s += tb[0]
                rendered_bulk_s += _timed_statements(cur, [b"BEGIN", *rendered_bulk, b"COMMIT"], rendered_server)
                if not pair % 2:
                    bare_bulk_s += _timed_fill(cur, bulk_payloads, bare_server)
        bulk_jobs = W4_BULK_PAIRS * sizes.w4_bulk
        bulk.add(jobs_s=bulk_jobs / bulk_s, bare_multirow_jobs_s=bulk_jobs / bare_bulk_s,
                 ratio_bare=bare_bulk_s / bulk_s, ceiling_ratio_bare=bare_bulk_s / rendered_bulk_s,
                 server_us_job=server.us_per(bulk_jobs), bare_server_us_job=bare_server.us_per(bulk_jobs),
                 ceiling_server_us_job=rendered_server.us_per(bulk_jobs))
        for count, figure in threads.items():  # four times the single enqueues: each half lasts a second or more
            figure.add(**w4_threads(bench, dsn, 4 * sizes.w4_singles, count))
        loop.add(**w4_async(bench, dsn))
        conn.close()
        bench.drop(dsn.database)
    return [emit(single), emit(bulk), *[emit(figure) for figure in threads.values()], emit(loop)]


W4_THREADS = (8, 16)
W4_IN_FLIGHT = 1000


def w4_threads(bench: Bench, dsn: mysqlq.Dsn, n: int, count: int) -> dict[str, float]:
    """One Producer shared by ``count`` threads, against as many threads each with its own bare
    connection (autocommit single-row INSERTs): ``n`` jobs a side, in two halves, in the order bare,
    mysqlq, mysqlq, bare (a drift of the machine lands on both sides)."""
    per = n // count // 2  # jobs per thread in each half
    payloads = [payload_bytes(i) for i in range(per)]

    def bare(_: int) -> float:
        conn = bench.connect(dsn)
        try:
            return bench_bare.insert_loop(conn.cursor(), payloads)
        finally:
            conn.close()

    server, bare_server = ServerCpu(bench), ServerCpu(bench)
    mysqlq_s = bare_s = 0.0
    with mysqlq.Producer(bench.settings(dsn), pool_size=min(count, 8)) as producer, \
            ThreadPoolExecutor(count) as pool:
        list(pool.map(lambda i: producer.enqueue("bench.noop", payload(i)), range(count)))  # connect all
        for side in ("bare", "mysqlq", "mysqlq", "bare"):
            if side == "mysqlq":
                with server, timer() as t:
                    list(pool.map(lambda _: [producer.enqueue("bench.noop", payload(i)) for i in range(per)],
                                  range(count)))
                mysqlq_s += t[0]
            else:
                with bare_server, timer() as t:  # (each thread's connecting counted too)
                    list(pool.map(bare, range(count)))
                bare_s += t[0]
    jobs = 2 * count * per
    return {"jobs_s": jobs / mysqlq_s, "bare_jobs_s": jobs / bare_s, "ratio_bare": bare_s / mysqlq_s,
            "server_us_job": server.us_per(jobs), "bare_server_us_job": bare_server.us_per(jobs)}


async def _lag_while(work: Any) -> tuple[float, list[float]]:
    """Run ``work`` (a coroutine) while a 1 ms timer measures how late the event loop wakes it."""
    lags: list[float] = []
    done = asyncio.Event()

    async def ticker() -> None:
        while not done.is_set():
            started = time.perf_counter()
            await asyncio.sleep(0.001)
            lags.append(time.perf_counter() - started - 0.001)

    tick = asyncio.create_task(ticker())
    started = time.perf_counter()
    await work
    elapsed = time.perf_counter() - started
    done.set()
    await tick
    return elapsed, lags


def w4_async(bench: Bench, dsn: mysqlq.Dsn) -> dict[str, float]:
    """1,000 aenqueue calls in flight: the rate, and the event loop's lag meanwhile (p50, p99); the same
    rows through an async driver (aiomysql, as many connections) for comparison, when it is installed."""

    async def main() -> dict[str, float]:
        server = ServerCpu(bench)
        with mysqlq.Producer(bench.settings(dsn)) as producer:
            await producer.aenqueue("bench.noop", payload(0))
            with server:
                elapsed, lags = await _lag_while(asyncio.gather(
                    *(producer.aenqueue("bench.noop", payload(i)) for i in range(W4_IN_FLIGHT))))
        found = {"jobs_s": W4_IN_FLIGHT / elapsed, "lag_p50_ms": percentile(lags, 50) * 1e3,
                 "lag_p99_ms": percentile(lags, 99) * 1e3, "server_us_job": server.us_per(W4_IN_FLIGHT)}
        try:
            import aiomysql  # type: ignore[import-untyped]
        except ImportError:
            return found
        from mysqlq.store.jobs import NAMES
        statement = query("insert_job").replace("{rows}", query("job_values_due"))
        keep = [n for n, name in enumerate(NAMES) if name not in ("run_at", "delay_us")]
        options: dict[str, Any] = {"user": dsn.user, "password": dsn.password or "", "db": dsn.database,
                                   "autocommit": True, "minsize": 8, "maxsize": 8}
        options.update({"unix_socket": dsn.unix_socket} if dsn.unix_socket else {"host": dsn.host, "port": dsn.port})
        pool = await aiomysql.create_pool(**options)
        settings = bench.settings(dsn)

        async def one(i: int) -> None:
            row = mysqlq.Job("bench.noop", payload(i)).row(settings)
            values = [v.decode() if isinstance(v, bytes) else v for v in (row[n] for n in keep)]
            async with pool.acquire() as conn, conn.cursor() as cur:
                await cur.execute(statement, values)

        driver_server = ServerCpu(bench)
        try:
            with driver_server:
                elapsed, lags = await _lag_while(asyncio.gather(*(one(i) for i in range(W4_IN_FLIGHT))))
        finally:
            pool.close()
            await pool.wait_closed()
        found.update(async_driver_jobs_s=W4_IN_FLIGHT / elapsed, async_driver_lag_p99_ms=percentile(lags, 99) * 1e3,
                     async_driver_server_us_job=driver_server.us_per(W4_IN_FLIGHT))
        return found

    return asyncio.run(main())
