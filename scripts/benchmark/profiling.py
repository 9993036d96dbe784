"""Profile the worker's hot loop: one ``mysqlq worker --burst`` draining N bench.noop jobs under py-spy;
and measure its CPU per job without a profiler.

    .venv/bin/python scripts/bench --only profile [--quick]
    .venv/bin/python scripts/bench --only cpu [--quick] [--runs N] [--against DIR]
    .venv/bin/python scripts/bench --only parts [--quick] [--runs N] [--against DIR]
    .venv/bin/python scripts/bench --only producer [--quick] [--runs N] [--against DIR]

``--against DIR`` (a worktree of another commit, e.g. ``git worktree add /tmp/base HEAD~3``) runs
that code (``PYTHONPATH=DIR``) and this checkout's in turn, run by run, and compares them: on a
shared machine whose speed moves between runs, only alternating runs compare two versions fairly.
For ``cpu``, each version's database is migrated by that version (an older commit refuses a newer
schema).

Needs py-spy in the venv (``.venv/bin/pip install py-spy``).  Prints, for the worker's main thread,
the share of sampled (non-idle) time spent in each function (inclusive) and the top self-time lines,
and leaves the raw collapsed stacks in /tmp/mysqlq-bench-profile.txt for flamegraph tools.
"""

from __future__ import annotations

import collections
import functools
import json
import os
import pathlib
import shutil
import subprocess
import sys
import time
from typing import Any

from benchmark import parts_worker
from benchmark.common import BIN, HERE, MYSQLQ, Bench, clean_env, dsn_url, fill_jobs, median, note, status_counts

OUTPUT = pathlib.Path("/tmp/mysqlq-bench-profile.txt")
RATE = 250  # samples per second


def frame_name(frame: str) -> str:
    """``func (path/to/file.py:12)`` → ``func (file.py)``."""
    func, _, where = frame.partition(" (")
    file = where.split(":")[0].rsplit("/", 1)[-1]
    return f"{func} ({file})" if where else func


def analyse(raw: str, top: int = 40) -> str:
    inclusive: collections.Counter[str] = collections.Counter()
    own: collections.Counter[str] = collections.Counter()
    total = 0
    for line in raw.splitlines():
        stack, _, count_text = line.rpartition(" ")
        if not stack or not count_text.isdigit():
            continue
        frames = stack.split(";")
        if not any("Worker.run" in f for f in frames):
            continue  # start-up, imports and the heartbeat thread
        count = int(count_text)
        total += count
        for name in {frame_name(f) for f in frames}:
            inclusive[name] += count
        last = frames[-1]
        own[frame_name(last) + ":" + last.rsplit(":", 1)[-1].rstrip(")")] += count
    if not total:
        return "no samples in Worker.run"
    out = [f"main-loop samples: {total} (at {RATE}/s: {total / RATE:.2f} s of CPU)", "", "inclusive:"]
    out += [f"  {100 * n / total:5.1f}%  {name}" for name, n in inclusive.most_common(top)]
    out += ["", "self (function:line):"]
    out += [f"  {100 * n / total:5.1f}%  {name}" for name, n in own.most_common(25)]
    return "\n".join(out)


def worker_cpu(bench: Bench, n: int, level: str, options: list[str], code: str | None = None,
               parts: bool = False) -> tuple[float, float, float, dict[str, int], dict[str, Any]]:
    """One burst worker draining ``n`` fresh bench.noop jobs (stderr, at ``level``, to a file): its user
    and sys CPU seconds (the process's own, start-up included), the wall time, the jobs' statuses and,
    with ``parts``, the main thread's CPU by part of the loop (parts_worker.py). ``code``: run the
    mysqlq found there (PYTHONPATH) instead of this checkout's."""
    dsn = bench.fresh("cpu", migrate=code is None)
    if code:  # that code's own schema: an older commit refuses a newer one
        subprocess.run([MYSQLQ, "--dsn", dsn_url(dsn), "migrate"], env=clean_env({"PYTHONPATH": code}), check=True,
                       stdout=subprocess.DEVNULL)
    conn = bench.connect(dsn)
    cur = conn.cursor()
    fill_jobs(cur, n)
    log = bench.tmp / "cpu.log"
    command = [sys.executable, str(HERE / "parts_worker.py")] if parts else [MYSQLQ]
    args = [*command, "--dsn", dsn_url(dsn), "--log-level", level, "worker", "--burst", "--hint-dir",
            str(bench.hint_dir), *options]
    t0 = time.perf_counter()
    with log.open("wb") as err:
        proc = subprocess.Popen(args, stdout=subprocess.PIPE if parts else subprocess.DEVNULL, stderr=err,
                                env=clean_env({"PYTHONPATH": code} if code else {}))
        out = proc.stdout.read() if proc.stdout else b""
        _, status, usage = os.wait4(proc.pid, 0)
        proc.returncode = os.waitstatus_to_exitcode(status)
    elapsed = time.perf_counter() - t0
    if proc.returncode:
        raise SystemExit(f"worker exited {proc.returncode}: {log.read_text()[-2000:]}")
    counts = status_counts(cur)
    conn.close()
    found = json.loads(out.decode().strip().splitlines()[-1]) if parts else {}
    return usage.ru_utime, usage.ru_stime, elapsed, counts, found


@functools.cache
def compiled(folder: str) -> None:
    subprocess.run([sys.executable, "-m", "compileall", "-q", str(pathlib.Path(folder) / "mysqlq")],
                   check=True, stdout=subprocess.DEVNULL)


def versions(against: str | None) -> list[tuple[str, str | None]]:
    """The code to measure, in the order of each run: (label, PYTHONPATH or None for this checkout).

    Both are byte-compiled first: a process started with PYTHONDONTWRITEBYTECODE set would
    otherwise compile a fresh worktree's modules at every start, and its start-up would count
    that work."""
    for folder in (against, str(HERE.parent.parent)):
        if folder:
            compiled(folder)
    return [("against", against), ("this", None)] if against else [("this", None)]


def cpu_main(quick: bool = False, runs: int = 3, against: str | None = None) -> int:
    """The worker's CPU per no-op job at default settings (info logging to a file), start-up included,
    and the start-up alone (a worker that finds no job), medians of ``runs``; with ``against``, that
    code's figures beside this checkout's, measured in alternation."""
    n = 20_000 if quick else 100_000
    bench = Bench(quick, runs)
    try:
        for label, level, options in (("default (info)", "info", []), ("--log-level warning", "warning", []),
                                      ("--concurrency 1", "info", ["--concurrency", "1"])):
            per_job: dict[str, list[float]] = collections.defaultdict(list)
            start: dict[str, list[float]] = collections.defaultdict(list)
            walls: dict[str, list[float]] = collections.defaultdict(list)
            for _ in range(runs):
                for version, code in versions(against):
                    user, sys_, wall, counts, _ = worker_cpu(bench, n, level, options, code)
                    if counts.get("done") != n:
                        raise SystemExit(f"not every job was done: {counts}")
                    per_job[version].append((user + sys_) / n * 1e6)
                    walls[version].append(wall)
                    start[version].append(sum(worker_cpu(bench, 0, level, options, code)[:2]))
            for version, _ in versions(against):
                jobs, idle = per_job[version], median(start[version])
                each = ", ".join(f"{x:.2f}" for x in jobs)
                name = f"{label} [{version}]" if against else label
                print(f"{name:<31} {n} jobs: {median(jobs):5.2f} µs CPU/job (runs {each}); "
                      f"wall {median(walls[version]):.2f} s; start-up alone {idle:.2f} s, "
                      f"so {(median(jobs) * n / 1e6 - idle) / n * 1e6:.2f} µs/job after it", flush=True)
            if against:
                pairs = [b / a for a, b in zip(per_job["against"], per_job["this"], strict=True)]
                print(f"{label}: this / against, run by run: {', '.join(f'{x:.2f}' for x in pairs)}", flush=True)
    finally:
        bench.close()
    return 0


def producer_main(quick: bool = False, runs: int = 3, against: str | None = None) -> int:
    """A single enqueue's client CPU and wall time per call (one Producer, no workers, ``enqueue_cpu.py``
    in a process of its own) and ``import mysqlq`` in that process, medians of ``runs``; with
    ``against``, that code's beside this checkout's, in alternation."""
    n = 2000 if quick else 10_000
    bench = Bench(quick, runs)
    found: dict[str, list[dict[str, float]]] = collections.defaultdict(list)
    try:
        dsn = bench.fresh("producer")
        for _ in range(runs):
            for version, code in versions(against):
                args = [sys.executable, str(HERE / "enqueue_cpu.py"), "--dsn", dsn_url(dsn), "--n", str(n),
                        "--hint-dir", str(bench.hint_dir)]
                out = subprocess.run(args, env=clean_env({"PYTHONPATH": code} if code else {}), check=True,
                                     capture_output=True, text=True, timeout=600).stdout
                found[version].append(json.loads(out.strip().splitlines()[-1]))
    finally:
        bench.close()
    for version, _ in versions(against):
        cpu = [r["cpu_us"] for r in found[version]]
        wall = median([r["wall_us"] for r in found[version]])
        imported = median([r["import_s"] for r in found[version]]) * 1e3
        name = f"[{version}] " if against else ""
        print(f"{name}single enqueue, {n} in a loop: {median(cpu):.1f} µs of client CPU (runs "
              f"{', '.join(f'{x:.1f}' for x in cpu)}), {wall:.0f} µs wall per call; import mysqlq {imported:.0f} ms",
              flush=True)
    if against:
        pairs = [b["cpu_us"] / a["cpu_us"] for a, b in zip(found["against"], found["this"], strict=True)]
        print(f"client CPU per enqueue, this / against, run by run: {', '.join(f'{x:.2f}' for x in pairs)}")
    return 0


def parts_main(quick: bool = False, runs: int = 3, against: str | None = None) -> int:
    """Where the worker's main thread spends its CPU, by part of the loop, in µs per job (medians of
    ``runs`` burst workers over 100,000 no-op jobs at default settings); with ``against``, that
    code's beside this checkout's, in alternation."""
    missing = parts_worker.missing_modules(against) if against else []
    if missing:  # its worker would fail to start, after the server and the jobs were made ready
        raise SystemExit(f"bench: --against {against}: that checkout predates the part names --only parts times "
                         f"(it has no {', '.join(missing)}); compare it with --only cpu instead")
    n = 20_000 if quick else 100_000
    bench = Bench(quick, runs)
    found: dict[str, list[dict[str, Any]]] = collections.defaultdict(list)
    try:
        for _ in range(runs):
            for version, code in versions(against):
                *_, counts, parts = worker_cpu(bench, n, "info", [], code, parts=True)
                if counts.get("done") != n:
                    raise SystemExit(f"not every job was done: {counts}")
                found[version].append(parts)
    finally:
        bench.close()
    labels = list(found["this"][0]["parts"])
    names = [version for version, _ in versions(against)]
    print(f"main thread's CPU, µs per job ({n} no-op jobs, medians of {runs}): " + " / ".join(names))
    total = " / ".join(f"{median([r['main_thread_s'] for r in found[v]]) / n * 1e6:.2f}" for v in names)
    print(f"  {'main thread (after imports)':<44} {total}")
    for label in labels:
        values = " / ".join(f"{median([r['parts'][label][0] for r in found[v]]) / n * 1e6:.2f}" for v in names)
        count = found["this"][0]["parts"][label][1]
        print(f"  {label:<44} {values}   ({count} calls)")
    return 0


def main(quick: bool = False) -> int:
    spy = BIN / "py-spy"
    if not spy.exists():
        found = shutil.which("py-spy")
        if not found:
            print("py-spy is not installed: .venv/bin/pip install py-spy")
            return 1
        spy = pathlib.Path(found)
    n = 5000 if quick else 20_000
    bench = Bench(quick, 1)
    try:
        for level in ("info", "warning"):
            dsn = bench.fresh(f"profile_{level}")
            conn = bench.connect(dsn)
            cur = conn.cursor()
            fill_jobs(cur, n)
            note(f"profile: one worker draining {n} bench.noop jobs, --log-level {level}")
            log = bench.tmp / f"profile-{level}.log"
            out = OUTPUT if level == "info" else OUTPUT.with_name(OUTPUT.stem + "-warning.txt")
            args = [str(spy), "record", "-r", str(RATE), "-f", "raw", "-o", str(out), "--",
                    MYSQLQ, "--dsn", dsn_url(dsn), "--log-level", level, "worker", "--burst", "--hint-dir",
                    str(bench.hint_dir)]
            t0 = time.perf_counter()
            with log.open("wb") as err:
                subprocess.run(args, check=True, stdout=subprocess.DEVNULL, stderr=err, env=clean_env({}))
            elapsed = time.perf_counter() - t0
            counts = status_counts(cur)
            print(f"## --log-level {level}: {n} jobs in {elapsed:.2f} s under py-spy ({counts}); raw stacks: {out}")
            print(analyse(out.read_text()))
            print()
            conn.close()
    finally:
        bench.close()
    return 0
