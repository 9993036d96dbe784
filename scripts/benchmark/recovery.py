"""W6, recovery: ``kill -9`` of a worker holding a claim (the reaper's leader and another) during a
drain; how long until its jobs run again, and none lost.
"""

from __future__ import annotations

import collections
import contextlib
import json
import math
import os
import signal
import time
from typing import Any

from mysqlq_harness.jobs import EVERY_JOB, every_job
from mysqlq_harness.waiting import TimedOut, wait_done, wait_for

import mysqlq
from benchmark.common import Bench, Figure, Workers, emit, fill_jobs, note, pending, wait_drained
from benchmark.shared import DEFAULTS, Sizes

STRIDE = 1000.0  # seconds: W6 job i carries t = T0 - i*STRIDE, so bench.latency records i*1e6 ms + its delay


def w6(bench: Bench, sizes: Sizes, k: int = 3) -> list[Figure]:
    """Recovery: K workers drain bench.latency jobs; a fifth into the drain one of them is caught holding
    a claim (SIGSTOP, read its running jobs, SIGKILL) and killed.

    ``recovery_s``: from the kill until every job it held is claimed by another worker; ``done_s``: until
    they are done; ``lost``: jobs of the round not done at the end (must be 0); ``ran_twice``: jobs whose
    handler ran more than once (each job's payload ``t`` encodes its index, which bench.latency's record
    gives back); ``reclaimed_jobs``: jobs with attempts > 1.  Each setting kills the reaper leader and
    another worker alternately (a replacement worker is started after each round), with the process-list
    check on (defaults) and off (``--lease 10 --heartbeat-interval 2``: recovery then waits for the lease).
    """
    figures = []
    for check in (True, False):
        options = [] if check else ["--no-processlist-check", "--lease", "10", "--heartbeat-interval", "2"]
        beat = DEFAULTS.heartbeat_interval if check else 2.0
        labels = {"processlist_check": "on" if check else "off", "k": str(k), "n": str(sizes.w6_jobs)}
        if not check:
            labels.update(lease_s="10", heartbeat_s="2")
        by_victim = {v: Figure("W6", {**labels, "victim": v}, spread=("recovery_s",)) for v in ("other", "leader")}
        recovery_run(bench, sizes, check, options, beat, k, by_victim)
        figures += [emit(by_victim["other"]), emit(by_victim["leader"])]
    return figures


def recovery_run(bench: Bench, sizes: Sizes, check: bool, options: list[str], beat: float, k: int,
                 figures: dict[str, Figure]) -> None:
    name = f"w6_{'plist' if check else 'lease'}"
    dsn = bench.fresh(name)
    conn = bench.connect(dsn)
    cur = conn.cursor()
    record = bench.tmp / f"{name}.latency"
    workers = bench.workers(dsn, k, *options, tag=name, env={"MYSQLQ_BENCH_LATENCY_FILE": str(record)})
    settings = bench.settings(dsn)
    n = sizes.w6_jobs
    rounds = [v for _ in range(bench.runs) for v in ("other", "leader")]
    try:
        workers.wait_registered(cur, k)
        # Right after a server (re)start the reaper ignores the process list for two heartbeats
        # (+1 s): long-running workers on a long-running server are the case measured here.
        settle = 2 * beat + 2 - server_uptime(cur)
        if settle > 0:
            note(f"W6 {name}: waiting {settle:.0f} s until the server has been up for two heartbeats")
            time.sleep(settle)
        for index, victim_kind in enumerate(rounds):
            note(f"W6 {name} round {index + 1}/{len(rounds)}: kill -9 the {victim_kind} worker holding a claim")
            base = index * n
            t0 = time.time()
            cur.execute(f"SELECT COALESCE(MAX(id), 0) FROM {every_job('id')}")
            since = int(cur.fetchone()[0])
            fill_jobs(cur, n, "bench.latency",
                      [json.dumps({"t": t0 - (base + i) * STRIDE}).encode() for i in range(n)])
            mysqlq.notify(settings, ["default"])
            victim = pick_victim(cur, workers, dsn.database, victim_kind)
            # A claim writes its worker's registration id, not its name; the id outlives the registration.
            cur.execute("SELECT id FROM mysqlq_workers WHERE name = %s", (victim,))
            victim_id = int(cur.fetchone()[0])
            wait_done(cur, n // 5, since=since, interval=0.01)  # well into the drain, not at its first claim
            held, killed_at = kill_holding(cur, workers, victim, victim_id)
            held_list = sorted(held)
            reclaimed, done = rerun_times(cur, workers, name, victim, victim_id, held_list, killed_at)
            wait_drained(cur, workers, timeout=120)
            cur.execute("SELECT COUNT(*), SUM(status = 'done'), SUM(attempts > 1)"
                        f" FROM {every_job('id, status, attempts')} WHERE id > %s", (since,))
            total, ok, again = (int(x or 0) for x in cur.fetchone())
            runs = executions(record, base, n)
            figures[victim_kind].add(recovery_s=reclaimed or 0.0, done_s=done, held=len(held_list),
                                     lost=n - ok + (total - n), not_run=sum(1 for c in runs if c == 0),
                                     ran_twice=sum(1 for c in runs if c > 1), reclaimed_jobs=again)
            workers.add()  # a replacement, so the next round has K again
            workers.wait_registered(cur, k)
    finally:
        workers.stop()
    conn.close()
    bench.drop(dsn.database)
    workers.log.unlink(missing_ok=True)


def rerun_times(cur: Any, workers: Workers, name: str, victim: str, victim_id: int, held: list[int],
                killed_at: float) -> tuple[float | None, float]:
    """Seconds from the victim's kill until other workers had claimed every job it held, and until they
    had done them all."""
    marks = ", ".join(["%s"] * len(held))
    moments: dict[str, float] = {}

    def re_run() -> bool:
        cur.execute(f"SELECT SUM(worker_id <> %s), SUM(status = 'done' AND worker_id <> %s) FROM {EVERY_JOB}"
                    f" WHERE id IN ({marks})", (victim_id, victim_id, *held))
        moved, finished = (int(x or 0) for x in cur.fetchone())
        now = time.perf_counter()
        if "reclaimed" not in moments and moved == len(held):
            moments["reclaimed"] = now - killed_at
        if finished == len(held):
            moments["done"] = now - killed_at
        return "done" in moments

    try:
        wait_for(re_run, f"{name}: the killed worker's jobs to be re-run", 120, interval=0.02)
    except TimedOut:
        explain_stuck(cur, workers, victim, held)
        raise
    return moments.get("reclaimed"), moments["done"]


def explain_stuck(cur: Any, workers: Workers, victim: str, held: list[int]) -> None:
    """What the log, the held jobs and the registry say when a killed worker's jobs are not re-run."""
    lines = workers.log.read_text(errors="replace").splitlines() if workers.log.exists() else []
    routine = ("job.done", "batch.claimed")
    note("\n".join([f"# {workers.log.name}, all but routine lines:",
                    *[line for line in lines if not any(r in line for r in routine)]]))
    marks = ", ".join(["%s"] * len(held))
    cur.execute(f"SELECT id, status, worker, worker_id, batch_id, attempts, lease_until FROM {EVERY_JOB}"
                f" WHERE id IN ({marks}) LIMIT 5", tuple(held))
    note(f"# held jobs now: {cur.fetchall()}")
    cur.execute("SELECT id, name, pid, connection_id, heartbeat_at FROM mysqlq_workers")
    note(f"# registry: {cur.fetchall()}; victim {victim} pid {workers.procs[victim].pid}")


def executions(record: Any, base: int, n: int) -> list[int]:
    """How many times each job of this round ran, decoded from bench.latency's records."""
    counts: collections.Counter[int] = collections.Counter()
    for line in record.read_text().split():
        with contextlib.suppress(ValueError):
            counts[math.floor(float(line) / (STRIDE * 1000))] += 1
    return [counts[base + i] for i in range(n)]


def server_uptime(cur: Any) -> float:
    cur.execute("SHOW GLOBAL STATUS LIKE 'Uptime'")
    return float(cur.fetchone()[1])


def pick_victim(cur: Any, workers: Workers, database: str, kind: str) -> str:
    """The name of the live worker leading the reaper (``leader``) or of another live one."""
    live = {name for name, proc in workers.procs.items() if proc.poll() is None}

    def victim() -> str | None:
        cur.execute("""SELECT w.name FROM mysqlq_workers w JOIN mysqlq_leaders l ON l.worker_id = w.id
                        WHERE l.role = 'reaper' AND l.lease_until > NOW(6)""")
        row = cur.fetchone()
        leader = str(row[0]) if row else None
        if leader not in live:
            return None
        return leader if kind == "leader" else sorted(live - {leader})[0]

    return wait_for(victim, "a reaper leader among the live workers", 30, interval=0.05)


def kill_holding(cur: Any, workers: Workers, victim: str, victim_id: int,
                 timeout: float = 30.0) -> tuple[set[int], float]:
    """Watch the victim until it holds a claim, freeze it, note the jobs it still holds, then SIGKILL it."""
    pid = workers.procs[victim].pid

    def holding() -> set[int]:
        cur.execute("SELECT id FROM mysqlq_jobs WHERE worker_id = %s AND status = 'running'", (victim_id,))
        return {int(row[0]) for row in cur.fetchall()}

    def caught() -> tuple[set[int], float] | None:
        # Frozen only once it is seen holding jobs: frozen at every look, a victim caught between two
        # batches could barely claim again before the other workers had drained everything.
        if not holding():
            if not pending(cur):
                raise RuntimeError(f"worker {victim} never held a claim")
            return None
        os.kill(pid, signal.SIGSTOP)
        # A statement the victim sent just before it stopped (its batch's final ack, say) still
        # completes on the server: let it land, or jobs read as "running" here end "done" by the
        # victim itself and are never re-run by anyone.
        time.sleep(0.05)
        held = holding()
        if held:
            os.kill(pid, signal.SIGKILL)
            killed_at = time.perf_counter()
            workers.procs[victim].wait()
            return held, killed_at
        os.kill(pid, signal.SIGCONT)
        if not pending(cur):
            raise RuntimeError(f"worker {victim} never held a claim")
        return None

    return wait_for(caught, f"worker {victim} to be caught holding a claim", timeout, interval=0.005)
