"""Profile the worker's hot loop: one ``mysqlq worker --burst`` draining N bench.noop jobs under py-spy;
and measure its CPU per job without a profiler.

    .venv/bin/python scripts/bench --only profile [--quick]
    .venv/bin/python scripts/bench --only cpu [--quick] [--runs N]

Needs py-spy in the venv (``.venv/bin/pip install py-spy``).  Prints, for the worker's main thread,
the share of sampled (non-idle) time spent in each function (inclusive) and the top self-time lines,
and leaves the raw collapsed stacks in /tmp/mysqlq-bench-profile.txt for flamegraph tools.
"""

from __future__ import annotations

import collections
import os
import pathlib
import shutil
import subprocess
import time

from benchmark.common import BIN, MYSQLQ, Bench, clean_env, dsn_url, fill_jobs, median, note, status_counts

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


def worker_cpu(bench: Bench, n: int, level: str, options: list[str]) -> tuple[float, float, float, dict[str, int]]:
    """One burst worker draining ``n`` fresh bench.noop jobs (stderr, at ``level``, to a file): its user
    and sys CPU seconds (the process's own, start-up included) and the wall time."""
    dsn = bench.fresh("cpu")
    conn = bench.connect(dsn)
    cur = conn.cursor()
    fill_jobs(cur, n)
    log = bench.tmp / "cpu.log"
    args = [MYSQLQ, "--dsn", dsn_url(dsn), "--log-level", level, "worker", "--burst", "--hint-dir",
            str(bench.hint_dir), *options]
    t0 = time.perf_counter()
    with log.open("wb") as err:
        proc = subprocess.Popen(args, stdout=subprocess.DEVNULL, stderr=err, env=clean_env({}))
        _, status, usage = os.wait4(proc.pid, 0)
        proc.returncode = os.waitstatus_to_exitcode(status)
    elapsed = time.perf_counter() - t0
    if proc.returncode:
        raise SystemExit(f"worker exited {proc.returncode}: {log.read_text()[-2000:]}")
    counts = status_counts(cur)
    conn.close()
    return usage.ru_utime, usage.ru_stime, elapsed, counts


def cpu_main(quick: bool = False, runs: int = 3) -> int:
    """The worker's CPU per no-op job at default settings (info logging to a file), start-up included,
    and the start-up alone (a worker that finds no job), medians of ``runs``."""
    n = 20_000 if quick else 100_000
    bench = Bench(quick, runs)
    try:
        for label, level, options in (("default (info)", "info", []), ("--log-level warning", "warning", []),
                                      ("--concurrency 1", "info", ["--concurrency", "1"])):
            per_job, users, syss, walls = [], [], [], []
            for _ in range(runs):
                user, sys_, wall, counts = worker_cpu(bench, n, level, options)
                if counts.get("done") != n:
                    raise SystemExit(f"not every job was done: {counts}")
                per_job.append((user + sys_) / n * 1e6)
                users.append(user)
                syss.append(sys_)
                walls.append(wall)
            idle = [sum(worker_cpu(bench, 0, level, options)[:2]) for _ in range(runs)]
            start = median(idle)
            each = ", ".join(f"{x:.2f}" for x in per_job)
            print(f"{label:<22} {n} jobs: {median(per_job):5.2f} µs CPU/job (runs {each}); "
                  f"user {median(users):.2f} s + sys {median(syss):.2f} s; wall {median(walls):.2f} s; "
                  f"start-up alone {start:.2f} s, so {(median(per_job) * n / 1e6 - start) / n * 1e6:.2f} µs/job "
                  f"after it", flush=True)
    finally:
        bench.close()
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
