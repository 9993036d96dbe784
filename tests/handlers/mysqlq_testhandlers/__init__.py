"""Handlers for mysqlq's tests. They write what they saw to files named by the payload or by
MYSQLQ_TEST_RECORD, so a test can read back exactly which jobs ran, in what order, how often."""

from __future__ import annotations

import asyncio
import os
import sys
import threading
import time
from typing import Any

import mysqlq


def _append(line: str) -> None:
    path = os.environ.get("MYSQLQ_TEST_RECORD")
    if path:
        with open(path, "a", encoding="utf-8") as out:  # one short write per line: atomic with O_APPEND
            out.write(line + "\n")


def record(payload: Any, ctx: mysqlq.JobContext) -> None:
    """Record ``job_id attempt queue pid`` (and payload's "tag") for the test to read."""
    tag = payload.get("tag", "") if isinstance(payload, dict) else ""
    _append(f"{ctx.job_id} {ctx.attempt} {ctx.queue} {os.getpid()} {tag}".rstrip())
    if isinstance(payload, dict) and payload.get("sleep"):
        time.sleep(float(payload["sleep"]))


def fail(payload: Any, ctx: mysqlq.JobContext) -> None:
    """Always fail, with a recognisable message."""
    _append(f"{ctx.job_id} {ctx.attempt} fail")
    raise ValueError(f"boom on attempt {ctx.attempt}")


def flaky(payload: Any, ctx: mysqlq.JobContext) -> None:
    """Fail until the attempt named in the payload, then succeed."""
    _append(f"{ctx.job_id} {ctx.attempt} flaky")
    if ctx.attempt < int(payload["succeed_on"]):
        raise RuntimeError(f"not yet (attempt {ctx.attempt})")


def sleep(payload: Any, ctx: mysqlq.JobContext) -> None:
    """Sleep for payload["seconds"] (time limits, SIGTERM mid-batch)."""
    _append(f"{ctx.job_id} {ctx.attempt} start")
    time.sleep(float(payload["seconds"]))
    _append(f"{ctx.job_id} {ctx.attempt} end")


def crash(payload: Any, ctx: mysqlq.JobContext) -> None:
    """Kill the worker process outright (a poison job)."""
    _append(f"{ctx.job_id} {ctx.attempt} crash")
    os._exit(9)


@mysqlq.handler(transactional=True)
def effect(payload: Any, ctx: mysqlq.JobContext) -> None:
    """Write one effect row in the job's own transaction (exactly-once test)."""
    assert ctx.conn is not None
    with ctx.conn.cursor() as cur:
        cur.execute("INSERT INTO test_effects (job_id, attempt) VALUES (%s, %s)", (ctx.job_id, ctx.attempt))
    _append(f"{ctx.job_id} {ctx.attempt} effect {os.getpid()}")
    if isinstance(payload, dict) and payload.get("sleep"):
        time.sleep(float(payload["sleep"]))
    if isinstance(payload, dict) and payload.get("fail"):
        raise RuntimeError("effect handler failed after writing")


@mysqlq.handler(transactional=True)
def stacked(payload: Any, ctx: mysqlq.JobContext) -> None:
    """Send two statements in one query on the job's connection: record whether the server took them."""
    assert ctx.conn is not None
    with ctx.conn.cursor() as cur:
        try:
            cur.execute("SELECT 1; SELECT 2")
            while cur.nextset():
                pass
            verdict = "accepted"
        except Exception:  # a syntax error: the connection takes one statement per query
            verdict = "refused"
    _append(f"{ctx.job_id} {verdict}")


def talk(payload: Any, ctx: mysqlq.JobContext) -> None:
    """Log through ``ctx.log``: an event, one from a logger bound to more, one with a traceback."""
    ctx.log.info("handler.said", words=payload.get("words") if isinstance(payload, dict) else None)
    ctx.log.bind(step=2).warning("handler.step")
    try:
        raise ValueError("caught by the handler")
    except ValueError:
        ctx.log.exception("handler.caught")


def span(payload: Any, ctx: mysqlq.JobContext) -> None:
    """Record ``job_id span start end`` (monotonic) around a sleep, to see how runs overlap."""
    start = time.monotonic()
    time.sleep(float(payload.get("seconds", 0.2)) if isinstance(payload, dict) else 0.2)
    _append(f"{ctx.job_id} span {start:.6f} {time.monotonic():.6f} {threading.get_ident()}")


async def aspan(payload: Any, ctx: mysqlq.JobContext) -> None:
    """``span`` as a coroutine: awaits instead of blocking."""
    start = time.monotonic()
    await asyncio.sleep(float(payload.get("seconds", 0.2)) if isinstance(payload, dict) else 0.2)
    _append(f"{ctx.job_id} aspan {start:.6f} {time.monotonic():.6f} {threading.get_ident()}")


async def asleep(payload: Any, ctx: mysqlq.JobContext) -> None:
    """``sleep`` as a coroutine (time limits cancel it)."""
    _append(f"{ctx.job_id} {ctx.attempt} start")
    await asyncio.sleep(float(payload["seconds"]))
    _append(f"{ctx.job_id} {ctx.attempt} end")


def stuck(payload: Any, ctx: mysqlq.JobContext) -> None:
    """Never return (until the process ends): a handler blocked in a call that ignores time limits."""
    _append(f"{ctx.job_id} {ctx.attempt} stuck")
    threading.Event().wait()


def exits(payload: Any, ctx: mysqlq.JobContext) -> None:
    """Call sys.exit(), or raise what the payload names (SystemExit, KeyboardInterrupt)."""
    _append(f"{ctx.job_id} {ctx.attempt} exits")
    how = payload.get("how", "exit") if isinstance(payload, dict) else "exit"
    if how == "interrupt":
        raise KeyboardInterrupt("from the handler")
    if how == "systemexit":
        raise SystemExit(3)
    sys.exit("handler asked to exit")


def _limited_span(payload: Any, ctx: mysqlq.JobContext, kind: str) -> None:
    """Record ``job_id lstart pid`` at the start, then ``job_id KIND start end pid attempt`` (monotonic,
    the same clock in every process of the host) around a sleep: ``first_seconds`` on the first
    attempt when given (a job to kill its worker under), else ``seconds``."""
    start = time.monotonic()
    _append(f"{ctx.job_id} lstart {os.getpid()} {ctx.attempt}")
    seconds = float(payload.get("seconds", 0.2))
    if ctx.attempt == 1 and "first_seconds" in payload:
        seconds = float(payload["first_seconds"])
    time.sleep(seconds)
    _append(f"{ctx.job_id} {kind} {start:.6f} {time.monotonic():.6f} {os.getpid()} {ctx.attempt}")


@mysqlq.handler(concurrency_limit=1)
def limited(payload: Any, ctx: mysqlq.JobContext) -> None:
    """One job per concurrency key at a time (the default, declared)."""
    _limited_span(payload, ctx, "lspan")


@mysqlq.handler(concurrency_limit=2)
def limited2(payload: Any, ctx: mysqlq.JobContext) -> None:
    """Two jobs per concurrency key at a time."""
    _limited_span(payload, ctx, "lspan")


def unlimited(payload: Any, ctx: mysqlq.JobContext) -> None:
    """No declared limit: 1 per key when a job carries one."""
    _limited_span(payload, ctx, "lspan")


@mysqlq.handler(transactional=True, concurrency_limit=1)
def limited_effect(payload: Any, ctx: mysqlq.JobContext) -> None:
    """A transactional handler with a limit: its effect row commits with its completion."""
    assert ctx.conn is not None
    with ctx.conn.cursor() as cur:
        cur.execute("INSERT INTO test_effects (job_id, attempt) VALUES (%s, %s)", (ctx.job_id, ctx.attempt))
    _limited_span(payload, ctx, "lspan")
    if payload.get("fail"):
        raise RuntimeError("limited effect failed after writing")


def cooperative(payload: Any, ctx: mysqlq.JobContext) -> None:
    """Work in small steps for up to payload["seconds"], stopping when the job is cancelled."""
    _append(f"{ctx.job_id} {ctx.attempt} start")
    deadline = time.monotonic() + float(payload["seconds"])
    while time.monotonic() < deadline:
        if ctx.cancelled:
            _append(f"{ctx.job_id} {ctx.attempt} cancelled")
        ctx.stop_if_cancelled()
        time.sleep(0.02)
    _append(f"{ctx.job_id} {ctx.attempt} end")


async def acooperative(payload: Any, ctx: mysqlq.JobContext) -> None:
    """Await for payload["seconds"]; a cancelled job's coroutine is cancelled (and says so)."""
    _append(f"{ctx.job_id} {ctx.attempt} start")
    try:
        await asyncio.sleep(float(payload["seconds"]))
    except asyncio.CancelledError:
        _append(f"{ctx.job_id} {ctx.attempt} cancelled")
        raise
    _append(f"{ctx.job_id} {ctx.attempt} end")


def echo(payload: Any, ctx: mysqlq.JobContext) -> Any:
    """Return payload["value"] (a job's result), or, with payload["bytes"], a string that long."""
    if isinstance(payload, dict) and "bytes" in payload:
        return "x" * int(payload["bytes"])
    if isinstance(payload, dict) and payload.get("unstorable"):
        return {"when": object()}
    return payload.get("value") if isinstance(payload, dict) else None


async def aecho(payload: Any, ctx: mysqlq.JobContext) -> Any:
    """The async form of echo."""
    await asyncio.sleep(0)
    return echo(payload, ctx)


@mysqlq.handler(transactional=True)
def techo(payload: Any, ctx: mysqlq.JobContext) -> Any:
    """A transactional handler that writes an effect row and returns a result: both commit or neither."""
    _effect(ctx)
    return echo(payload, ctx)


def step(payload: Any, ctx: mysqlq.JobContext) -> Any:
    """A chain's step: the previous step's result (a list) with this step's tag appended; records
    ``job_id step tag parents``. Fails with payload["fail"]."""
    parents = ctx.parents
    _append(f"{ctx.job_id} step {payload.get('tag', '')} {','.join(str(p.id) for p in parents) or '-'}")
    _early(ctx, parents)
    if payload.get("fail"):
        raise ValueError("step failed on purpose")
    before = ctx.parent_result if len(parents) == 1 else []
    return [*(before or []), payload.get("tag")]


@mysqlq.handler(transactional=True)
def tstep(payload: Any, ctx: mysqlq.JobContext) -> Any:
    """step, transactional: its effect row and its completion (which releases what waits) commit together."""
    _effect(ctx)
    return step(payload, ctx)


def gather(payload: Any, ctx: mysqlq.JobContext) -> Any:
    """A group's callback: records ``job_id gather count`` and returns the members' ids and results."""
    parents = ctx.parents
    _append(f"{ctx.job_id} gather {len(parents)}")
    _early(ctx, parents)
    return {"ids": [p.id for p in parents], "results": [p.result for p in parents],
            "statuses": sorted({p.status for p in parents})}


@mysqlq.handler(transactional=True)
def tgather(payload: Any, ctx: mysqlq.JobContext) -> Any:
    """gather, transactional: its effect row and its completion commit together."""
    _effect(ctx)
    return gather(payload, ctx)


def _early(ctx: mysqlq.JobContext, parents: list[mysqlq.Parent]) -> None:
    """Record ``job_id early`` if the job runs while a job it waits for is not done."""
    if any(parent.status != "done" for parent in parents):
        _append(f"{ctx.job_id} early {','.join(f'{p.id}:{p.status}' for p in parents)}")


def _effect(ctx: mysqlq.JobContext) -> None:
    """A transactional handler's effect: a row of test_effects, in the transaction that completes the job."""
    assert ctx.conn is not None
    with ctx.conn.cursor() as cur:
        cur.execute("INSERT INTO test_effects (job_id, attempt) VALUES (%s, %s)", (ctx.job_id, ctx.attempt))


_probe = threading.local()  # each slot's thread keeps a connection of its own, as a handler should


def probe(payload: Any, ctx: mysqlq.JobContext) -> None:
    """A job as a real one looks: note how long after ``payload["t"]`` (its enqueue time) it started,
    then one small INSERT on the handler's own connection (to MYSQLQ_DSN), into ``probe_rows``."""
    started = time.time()
    conn = getattr(_probe, "conn", None)
    if conn is None:
        from mysqlq.core.config import Dsn
        from mysqlq.store.db import connect

        conn = _probe.conn = connect(Dsn.parse(os.environ["MYSQLQ_DSN"]))
    with conn.cursor() as cur:
        cur.execute("INSERT INTO probe_rows (job_id) VALUES (%s)", (ctx.job_id,))
    conn.commit()
    _append(f"{ctx.job_id} {os.getpid()} {(started - float(payload['t'])) * 1000:.3f}")


def snooze(payload: Any, ctx: mysqlq.JobContext) -> None:
    """Record the run, then snooze for payload["seconds"] until the run numbered payload["until"] (a
    count of runs, kept in the record file), or forever without one; payload["wait"]: first wait that
    long (a cancel may come meanwhile), payload["raise"]: raise Snooze instead of ctx.snooze()."""
    _append(f"{ctx.job_id} {ctx.attempt} snooze-run")
    if payload.get("wait"):
        time.sleep(float(payload["wait"]))
    runs = _runs(ctx.job_id, "snooze-run")
    if "until" in payload and runs >= int(payload["until"]):
        return
    if payload.get("raise"):
        raise mysqlq.Snooze(float(payload["seconds"]))
    ctx.snooze(float(payload["seconds"]))


async def asnooze(payload: Any, ctx: mysqlq.JobContext) -> None:
    """``snooze`` as a coroutine."""
    _append(f"{ctx.job_id} {ctx.attempt} snooze-run")
    await asyncio.sleep(0)
    if _runs(ctx.job_id, "snooze-run") < int(payload["until"]):
        ctx.snooze(float(payload["seconds"]))


@mysqlq.handler(transactional=True)
def tsnooze(payload: Any, ctx: mysqlq.JobContext) -> None:
    """Write an effect row in the job's transaction, then snooze until the run numbered payload["until"]:
    the snoozed runs' effects roll back."""
    assert ctx.conn is not None
    with ctx.conn.cursor() as cur:
        cur.execute("INSERT INTO test_effects (job_id, attempt) VALUES (%s, %s)", (ctx.job_id, ctx.attempt))
    _append(f"{ctx.job_id} {ctx.attempt} snooze-run")
    if _runs(ctx.job_id, "snooze-run") < int(payload["until"]):
        ctx.snooze(float(payload["seconds"]))


def _runs(job_id: int, word: str) -> int:
    path = os.environ.get("MYSQLQ_TEST_RECORD")
    if not path or not os.path.exists(path):
        return 0
    with open(path, encoding="utf-8") as lines:
        return sum(1 for line in lines if line.split()[:1] == [str(job_id)] and word in line.split())


@mysqlq.handler(rate_limit="50/s")
def rated(payload: Any, ctx: mysqlq.JobContext) -> None:
    """At most 50 start in any second, across every worker: record the run with the handler's own
    clock at entry, as the API it calls would count it (and take a few ms)."""
    entered = time.time()
    _append(f"{ctx.job_id} {ctx.attempt} rated {os.getpid()} {entered:.6f}")
    time.sleep(float(payload.get("sleep", 0.002)) if isinstance(payload, dict) else 0.002)


@mysqlq.handler(rate_limit="5/s", rate_key=lambda payload: payload["key"])
def rated_key(payload: Any, ctx: mysqlq.JobContext) -> None:
    """At most 5 of one payload["key"] start in any second."""
    _append(f"{ctx.job_id} {ctx.attempt} rated {payload['key']}")


def progress(payload: Any, ctx: mysqlq.JobContext) -> None:
    """Report progress in a tight loop for payload["seconds"], then 100 %; payload["bad"]: report that value."""
    if "bad" in payload:
        ctx.progress(payload["bad"])
    deadline = time.monotonic() + float(payload["seconds"])
    steps = 0
    while time.monotonic() < deadline:
        steps += 1
        ctx.progress(min(0.99, steps / 100_000), f"step {steps}")
        time.sleep(0.001)
    ctx.progress(1.0, "all done")
    _append(f"{ctx.job_id} {ctx.attempt} progress {steps}")

