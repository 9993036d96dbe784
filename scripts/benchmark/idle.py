"""W3, idle cost: the statements and CPU of idle workers; then the same workers flooded with forged
and with validly signed hints.
"""

from __future__ import annotations

import os
import socket
import threading
import time

from benchmark.common import Bench, Figure, emit, note
from benchmark.shared import Sizes, server_cpu
from mysqlq.hint.address import parse_advertised


def w3(bench: Bench, sizes: Sizes, k: int = 4, settle: float = 3.0) -> list[Figure]:
    """Idle cost; then the same idle workers flooded with forged hints, and with validly signed ones."""
    figures = []
    for flood in (None, "forged", "signed"):
        labels = {"k": str(k), "window_s": f"{sizes.w3_seconds:g}"}
        if flood:
            labels.update(flood=flood, datagrams_s_per_worker=str(FLOOD_RATE))
        fig = Figure("W3", labels, spread=("queries_s_per_worker", "cpu_pct_per_worker"))
        for run in range(bench.runs):
            note(f"W3 run {run + 1}: {k} idle workers" + (f", flooded with {flood} hints" if flood else "")
                 + f", {sizes.w3_seconds:g} s window after {settle:g} s to settle")
            idle_run(bench, fig, f"w3_{flood or 'idle'}_r{run}", k, sizes.w3_seconds, settle, flood)
        figures.append(emit(fig))
    return figures


FLOOD_RATE = 1000  # datagrams per second sent to each worker


def idle_run(bench: Bench, fig: Figure, name: str, k: int, seconds: float, settle: float, flood: str | None) -> None:
    dsn = bench.fresh(name)
    conn = bench.connect(dsn)
    cur = conn.cursor()
    own = -bench.questions() + bench.questions()  # what one reading adds by itself
    options = ["--hint-bind", "127.0.0.1:0"] if flood else []
    workers = bench.workers(dsn, k, *options, tag=name)
    stop = threading.Event()
    try:
        workers.wait_registered(cur, k)
        time.sleep(settle)
        if flood:
            cur.execute("SELECT hint_addr, hint_key FROM mysqlq_workers")
            targets = [(*parse_advertised(addr), bytes(key) if flood == "signed" else os.urandom(32))
                       for addr, key in cur.fetchall()]
            threading.Thread(target=flood_hints, args=(targets, stop), daemon=True).start()
        server0 = server_cpu(bench)
        cpu0 = workers.cpu_seconds()
        q0 = bench.questions()
        t0 = time.perf_counter()
        time.sleep(seconds)
        q1 = bench.questions()
        t1 = time.perf_counter()
        cpu1 = workers.cpu_seconds()
        server1 = server_cpu(bench)
        workers.check_alive()
    finally:
        stop.set()
        workers.stop()
    window = t1 - t0
    queries = (q1 - q0 - own) / window
    fig.add(queries_s=queries, queries_s_per_worker=queries / k,
            cpu_pct_per_worker=100 * (cpu1 - cpu0) / window / k,
            worker_cpu_s=(cpu1 - cpu0))
    if server0 is not None and server1 is not None:
        fig.add(server_cpu_pct=100 * (server1 - server0) / window)
    conn.close()
    bench.drop(dsn.database)
    workers.log.unlink(missing_ok=True)


def flood_hints(targets: list[tuple[str, int, bytes]], stop: threading.Event) -> None:
    """FLOOD_RATE fresh hints a second to each target (a fresh nonce each: replays would be dropped)."""
    from mysqlq.hint import wire

    with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as sock:
        tick = time.perf_counter()
        while not stop.is_set():
            for host, port, key in targets:
                for _ in range(FLOOD_RATE // 100):
                    sock.sendto(wire.encode(key, "default", 0), (host, port))
            tick += 0.01
            time.sleep(max(0.0, tick - time.perf_counter()))
