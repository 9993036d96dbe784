"""Retention: deleting ended jobs once they are old enough, in small batches that never hold long locks.

Done and cancelled jobs are kept for ``retain_done`` (7 days by default), dead jobs for ``retain_dead``
(30 days); 0 or None keeps them forever. Age counts from when a job ended (``finished_at``).

Workers do it themselves: the leading worker's maintainer (mysqlq.leader.maintainer) runs
:meth:`Retention.run` on the worker's background thread, and the ``mysqlq_maintenance`` row
``retention`` makes it one turn per ``retention_interval`` across all workers, whoever leads. Each
batch is one plain read of up to ``retention_batch`` ids of one status and queue on an index of the
(status, queue, finished_at) of one table (the live mysqlq_jobs, then mysqlq_jobs_history, where done
jobs move when they end) and one short transaction that deletes those ids by primary key in that
table, with their tag rows and dependency pairs; a turn
stops after a short time budget and asks to run again soon if work is left.

Each turn also forgets up to ``retention_batch`` dedupe keys whose period has ended
(mysqlq.store.dedupe_periods): one DELETE on the index of their expiry, which finds nothing where
no job was enqueued with a period. An expired key needs no purge to be taken again; this only keeps
the table from growing with keys never used again (a schedule's ticks).
"""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from functools import partial

from mysqlq.core.config import Settings
from mysqlq.core.jobs import Status
from mysqlq.core.logs import Log
from mysqlq.store import dedupe_periods
from mysqlq.store import ops as store
from mysqlq.store.db import Database

TASK = "retention"
BEHIND_PAUSE = 1.0  # seconds between turns while there is a backlog to delete


def policies(retain_done: float | None, retain_dead: float | None) -> list[tuple[Status, float]]:
    """(status, age in seconds) pairs for the statuses whose retention is on."""
    found: list[tuple[Status, float]] = []
    if retain_done:
        found += [(Status.DONE, retain_done), (Status.CANCELLED, retain_done)]
    if retain_dead:
        found.append((Status.DEAD, retain_dead))
    return found


@dataclass
class Purge:
    """Deleting the jobs that ended before a cutoff, one status after another, one batch per :meth:`step`."""

    db: Database
    ages: Sequence[tuple[str, float]]
    queue: str | None = None
    batch: int = 1000
    walks: list[store.Walk] = field(default_factory=list)
    deleted: dict[str, int] = field(default_factory=dict)

    def __post_init__(self) -> None:
        for status, age in self.ages:
            before = self.db.run(partial(store.cutoff, age=age))
            self.walks.append(store.Walk(status, before, self.queue))
            self.deleted[status] = 0

    def count(self) -> int:
        """How many jobs are to be deleted now, in the live table and the history (a count over their
        indexes, for progress bars)."""
        return sum(self.counts().values())

    def counts(self) -> dict[str, int]:
        """Per status, how many jobs are to be deleted now."""
        return {walk.status: self.db.run(partial(store.count_expired, status=walk.status, before=walk.before,
                                                 queue=walk.queue))
                for walk in self.walks}

    @property
    def finished(self) -> bool:
        return all(walk.done for walk in self.walks)

    def step(self) -> int:
        """Delete one batch; returns how many jobs it deleted (0 once finished)."""
        for walk in self.walks:
            if walk.done:
                continue
            deleted = self.db.run(partial(store.delete_expired, walk=walk, limit=self.batch))
            self.deleted[walk.status] += deleted
            return deleted
        return 0

    def run(self, progress: Callable[[int], object] | None = None,
            until: Callable[[], bool] | None = None) -> dict[str, int]:
        """Step until finished (or ``until()``, asked after each batch, says stop); returns deleted
        counts per status."""
        while not self.finished:
            deleted = self.step()
            if progress:
                progress(deleted)
            if deleted and until and until():  # a batch that found nothing costs one quick read
                break
        return self.deleted


class Retention:
    """The leader's chore of retention: :meth:`run` returns seconds until the next call."""

    name = "retention"

    def __init__(self, settings: Settings, db: Database, log: Log) -> None:
        self.settings = settings
        self.db = db
        self.log = log
        self.ages = policies(settings.retain_done, settings.retain_dead)
        # Seconds one turn may take (it always deletes one batch): short, as it shares the
        # background thread with the heartbeat.
        self.budget = min(2.0, settings.heartbeat_interval / 2)

    @property
    def enabled(self) -> bool:
        return bool(self.ages)

    def elected(self) -> None:
        """Nothing to reset when this worker starts leading: the state is in the database."""

    def run(self) -> float:
        settings = self.settings
        if not self.enabled:
            return settings.retention_interval
        if not self.db.run(lambda cur: store.claim_turn(cur, TASK, settings.retention_interval)):
            return settings.retention_interval
        deadline = time.monotonic() + self.budget
        purge = Purge(self.db, self.ages, batch=settings.retention_batch)
        deleted = purge.run(until=lambda: time.monotonic() >= deadline)
        keys = self.db.run(lambda cur: dedupe_periods.forget_expired(cur, settings.retention_batch))
        finished = purge.finished and keys < settings.retention_batch
        if any(deleted.values()) or keys:
            self.log.info("retention.deleted", **deleted, expired_dedupe_keys=keys, finished=finished)
        if finished:
            return settings.retention_interval
        self.db.run(lambda cur: store.due_again(cur, TASK))  # whoever leads next goes on at once
        return BEHIND_PAUSE
