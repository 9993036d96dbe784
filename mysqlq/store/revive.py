"""Bringing every dead job (of one queue, or of all) back to ready, in batches, for the CLI and the web."""

from __future__ import annotations

from collections.abc import Callable
from functools import partial
from typing import Any

from mysqlq.store import ops as store
from mysqlq.store.db import Cursor

BATCH = 1000


def retry_every_dead(run: Callable[[Callable[[Cursor], Any]], Any], queue: str | None) -> tuple[int, set[str]]:
    """Retry dead jobs a batch at a time (a plain read, then an update that re-checks the status);
    returns how many were retried and their queues. ``run`` runs a unit of work (``Database.run``)."""
    retried, queues = 0, set()
    while True:
        found: list[tuple[int, str]] = run(partial(store.dead_jobs, queue=queue, limit=BATCH))
        if not found:
            break
        retried += int(run(partial(store.retry_jobs, ids=[job_id for job_id, _ in found])))
        queues |= {name for _, name in found}
        if len(found) < BATCH:
            break
    return retried, queues
