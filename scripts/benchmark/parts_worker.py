"""Run ``mysqlq`` (its arguments follow) with the worker loop's parts timed: the CPU time of the main
thread spent in each (``time.thread_time``, inclusive), printed as one JSON line on stdout at exit.

Used by ``scripts/bench --only parts``; the wrappers cost a few µs per call, and each part is called
about once per batch (the job-by-job path is inside ``dispatch``), so they barely move the totals.
"""

from __future__ import annotations

import atexit
import collections
import importlib
import json
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

# (module, class or "" for the module's own function, function, label): names only, so that the
# bench can import this file to check another checkout (--against) without patching its own code.
PARTS: list[tuple[str, str, str, str]] = [
    ("mysqlq.worker.loop", "Worker", "_turn", "loop turns (all)"),
    ("mysqlq.worker.loop", "Worker", "_claim", "claiming (all)"),
    ("mysqlq.worker.intake.claimer", "Claimer", "claim", "claim statement, read-back, batch.claimed"),
    ("mysqlq.store.claims", "", "fetch_batch", "read-back alone (fetch_batch)"),
    ("mysqlq.store.claims", "", "claim_and_fetch", "claim with its read-back (claim_and_fetch)"),
    ("mysqlq.worker.batches", "Batches", "add", "taking a batch in hand"),
    ("mysqlq.worker.dispatcher", "Dispatcher", "turn", "dispatcher turns (all)"),
    ("mysqlq.worker.dispatcher", "Dispatcher", "dispatch", "starting and running jobs (dispatch)"),
    ("mysqlq.worker.batches", "Batches", "write", "writing and logging outcomes (all)"),
    ("mysqlq.worker.settling.outcomes", "OutcomeBuffer", "flush", "outcome statements"),
    ("mysqlq.worker.settling.report", "Report", "written", "job.done lines (all)"),
    ("mysqlq.core.logs", "ConsoleLine", "many", "job.done lines: formatting"),
]
spent: collections.Counter[str] = collections.Counter()
calls: collections.Counter[str] = collections.Counter()


def missing_modules(folder: str) -> list[str]:
    """The modules of PARTS that the checkout in ``folder`` does not have (an older commit, from
    before the worker's modules took these names)."""
    def present(module: str) -> bool:
        path = Path(folder, *module.split("."))
        return path.with_suffix(".py").is_file() or (path / "__init__.py").is_file()

    return sorted({module for module, *_ in PARTS if not present(module)})


def timed(func: Callable[..., Any], label: str) -> Callable[..., Any]:
    def wrapper(*args: Any, **kwargs: Any) -> Any:
        started = time.thread_time()
        try:
            return func(*args, **kwargs)
        finally:
            spent[label] += time.thread_time() - started
            calls[label] += 1
    return wrapper


def patch() -> None:
    """Wrap every part (an older commit, --against, may lack a class or a function: that part stays 0)."""
    for module, owner_name, name, label in PARTS:
        owner: Any = importlib.import_module(module)
        if owner_name:
            owner = getattr(owner, owner_name, None)
        if owner is not None and hasattr(owner, name):
            setattr(owner, name, timed(getattr(owner, name), label))


if __name__ == "__main__":
    patch()
    began = time.thread_time()

    @atexit.register
    def report_parts() -> None:
        print(json.dumps({"main_thread_s": time.thread_time() - began,
                          "parts": {label: [spent[label], calls[label]] for *_, label in PARTS}}), flush=True)

    from mysqlq.cli import main

    sys.argv[0] = "mysqlq"
    main()
