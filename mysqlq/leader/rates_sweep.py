"""The rate limits' tidying, run by the leader: starts too old for any window, jobs no longer
waiting for their turn (cancelled, purged), buckets no longer in use (mysqlq.worker.intake.rate_admission).

Nothing waits for it: admission reads only the starts in its window and only waiting jobs that
are still scheduled, ready or running, so the rows it removes are ones nobody counts. It only keeps
the tables as small as the set of buckets in use, which once a minute does; an idle queue pays its
three statements then, whether rate limits are in use or not.
"""

from __future__ import annotations

from mysqlq.core.config import Settings
from mysqlq.core.logs import Log
from mysqlq.store import rates as store
from mysqlq.store.db import Database

EVERY = 60.0  # seconds between sweeps
BEHIND = 1.0  # seconds before the next sweep when this one removed a full batch


class RatesSweep:
    """The leader's chore for the rate limits' tables; :meth:`run` returns seconds until the next run."""

    name = "rates"

    def __init__(self, settings: Settings, db: Database, log: Log) -> None:
        self.db = db
        self.log = log

    def elected(self) -> None:
        """Nothing to reset: what is left to tidy is in the database."""

    def run(self) -> float:
        removed = self.db.run(store.sweep)
        return BEHIND if removed >= store.SWEEP else EVERY
