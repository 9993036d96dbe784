"""Run ``mysqlq`` (its arguments follow) with the worker loop's parts timed: the CPU time of the main
thread spent in each (``time.thread_time``, inclusive), printed as one JSON line on stdout at exit.

Used by ``scripts/bench --only parts``; the wrappers cost a few µs per call, and each part is called
about once per batch (the job-by-job path is inside ``dispatch``), so they barely move the totals.
"""

from __future__ import annotations

import atexit
import collections
import json
import sys
import time
from collections.abc import Callable
from typing import Any

from mysqlq.core import logs
from mysqlq.store import claims
from mysqlq.worker import batches, dispatcher, loop
from mysqlq.worker.intake import claimer
from mysqlq.worker.settling import outcomes, report

PARTS: list[tuple[Any, str, str]] = [
    (loop.Worker, "_turn", "loop turns (all)"),
    (loop.Worker, "_claim", "claiming (all)"),
    (claimer.Claimer, "claim", "claim statement, read-back, batch.claimed"),
    (claims, "fetch_batch", "read-back alone (fetch_batch)"),
    (claims, "claim_and_fetch", "claim with its read-back (claim_and_fetch)"),
    (batches.Batches, "add", "taking a batch in hand"),
    (dispatcher.Dispatcher, "turn", "dispatcher turns (all)"),
    (dispatcher.Dispatcher, "dispatch", "starting and running jobs (dispatch)"),
    (batches.Batches, "write", "writing and logging outcomes (all)"),
    (outcomes.OutcomeBuffer, "flush", "outcome statements"),
    (report.Report, "written", "job.done lines (all)"),
    (logs.ConsoleLine, "many", "job.done lines: formatting"),
]
spent: collections.Counter[str] = collections.Counter()
calls: collections.Counter[str] = collections.Counter()


def timed(func: Callable[..., Any], label: str) -> Callable[..., Any]:
    def wrapper(*args: Any, **kwargs: Any) -> Any:
        started = time.thread_time()
        try:
            return func(*args, **kwargs)
        finally:
            spent[label] += time.thread_time() - started
            calls[label] += 1
    return wrapper


for owner, name, label in PARTS:
    if hasattr(owner, name):  # an older commit (--against) may not have every part
        setattr(owner, name, timed(getattr(owner, name), label))
began = time.thread_time()


@atexit.register
def report_parts() -> None:
    print(json.dumps({"main_thread_s": time.thread_time() - began,
                      "parts": {label: [spent[label], calls[label]] for _, _, label in PARTS}}), flush=True)


if __name__ == "__main__":
    from mysqlq.cli import main

    sys.argv[0] = "mysqlq"
    main()
