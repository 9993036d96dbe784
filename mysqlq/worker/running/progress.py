"""A long job's progress (``ctx.progress(0.4, "step 2 of 5")``): handlers report as often as they like;
the worker's background thread writes the latest report of each job at most once per ``EVERY``
seconds, so a report in a tight loop costs a dictionary write, never a statement. What was written
last is kept when the job ends (``mysqlq jobs show`` then says how far its last run got)."""

from __future__ import annotations

import math
import threading
import time
from collections.abc import Callable
from functools import partial

from mysqlq.store import claims
from mysqlq.store.db import Cursor, Database

EVERY = 1.0  # seconds between the writes of one job's progress, at most
MAX_NOTE = 200  # characters of a note kept


def checked(fraction: float, note: str | None) -> tuple[float, str | None]:
    """A report as stored: a fraction from 0 to 1 and a note of at most MAX_NOTE characters;
    ValueError (one line) for anything else."""
    if isinstance(fraction, bool) or not isinstance(fraction, int | float) or not math.isfinite(fraction) \
            or not 0.0 <= fraction <= 1.0:
        raise ValueError(f"progress takes a fraction from 0 to 1, got {fraction!r}")
    if note is not None:
        if not isinstance(note, str):
            raise ValueError(f"a progress note is a string, got {type(note).__name__}")
        note = note[:MAX_NOTE]
    return float(fraction), note


class LatestProgress:
    """The latest report of each running job, until the background thread writes it."""

    def __init__(self) -> None:
        self._pending: dict[int, tuple[float, str | None]] = {}
        self._lock = threading.Lock()

    def report(self, job_id: int, fraction: float, note: str | None) -> None:
        with self._lock:
            self._pending[job_id] = (fraction, note)

    def take(self) -> dict[int, tuple[float, str | None]]:
        with self._lock:
            pending, self._pending = self._pending, {}
        return pending


class ProgressWriter:
    """A service of the background thread (mysqlq.worker.background): writes the reports of the last second."""

    name = "progress"

    def __init__(self, db: Database, board: LatestProgress, worker_id: Callable[[], int]) -> None:
        self.db = db
        self.board = board
        self.worker_id = worker_id
        self.next_at = time.monotonic() + EVERY

    def on_connect(self, cur: Cursor) -> None:
        pass

    def run(self) -> None:
        self.next_at = time.monotonic() + EVERY
        for job_id, (fraction, note) in sorted(self.board.take().items()):
            self.db.run(partial(claims.record_progress, job_id=job_id, worker_id=self.worker_id(),
                                fraction=fraction, note=note))
