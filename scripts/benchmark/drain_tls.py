"""W1 over TLS: two workers drain 20,000 no-op jobs over TCP, with ``ssl_mode=REQUIRED`` and with
``ssl_mode=DISABLED``, alternating run by run on the same server: what encryption costs the drain and
the server. Needs a server that offers TLS: the private MySQL (``MYSQLQ_BENCH_SERVER=mysql``) makes its
own certificates; a private mariadbd has none, and the section says so and measures nothing."""

from __future__ import annotations

import dataclasses

import mysqlq
from benchmark.common import Bench, Figure, emit, note
from benchmark.shared import Sizes, drain_mysqlq

K = 2


def w1_tls(bench: Bench, sizes: Sizes) -> list[Figure]:
    bench.cur.execute("SHOW GLOBAL VARIABLES LIKE 'ssl_cert'")
    row = bench.cur.fetchone()
    if bench.server is None or row is None or not row[1]:
        note("W1tls left out: the server offers no TLS (run with MYSQLQ_BENCH_SERVER=mysql: MySQL makes its "
             "own certificates)")
        return []
    tcp = mysqlq.Dsn.parse(bench.server.tcp_dsn)
    n = sizes.w1_jobs
    fig = Figure("W1tls", {"k": str(K), "n": str(n)}, spread=("ratio_plain", "server_ratio_plain"))
    for run in range(bench.runs):
        rates: dict[str, tuple[float, float]] = {}
        for mode in ("DISABLED", "REQUIRED"):
            note(f"W1tls run {run + 1}: K={K}, {n} jobs over TCP, ssl_mode={mode}")
            local = bench.fresh(f"w1tls_{mode.lower()}_r{run}")
            dsn = dataclasses.replace(tcp, database=local.database, ssl_mode=mode)
            d = drain_mysqlq(bench, f"w1tls_{mode.lower()}_r{run}", K, n, dsn=dsn)
            rates[mode] = (d.steady_jobs_s, d.server_us_job)
            bench.drop(local.database)
        (plain, plain_server), (tls, tls_server) = rates["DISABLED"], rates["REQUIRED"]
        fig.add(jobs_s=tls, plain_jobs_s=plain, ratio_plain=tls / plain, server_us_job=tls_server,
                plain_server_us_job=plain_server, server_ratio_plain=tls_server / plain_server)
    return [emit(fig)]
