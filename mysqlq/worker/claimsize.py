"""How many jobs to claim: only what the worker's slots can start soon, judged by recent durations."""

from __future__ import annotations

import math

HORIZON = 0.05  # seconds: a claimed job should start within about this long
WEIGHT = 0.2  # of the newest duration in the moving average


class Durations:
    """A moving average of how long recent jobs took, by key (a queue, or a handler)."""

    def __init__(self) -> None:
        self._average: dict[str, float] = {}

    def observe(self, key: str, seconds: float) -> None:
        average = self._average
        previous = average.get(key)
        average[key] = seconds if previous is None else previous + WEIGHT * (seconds - previous)

    def get(self, key: str) -> float | None:
        return self._average.get(key)

    def get_or(self, key: str, unknown: float) -> float:
        return self._average.get(key, unknown)


def claim_limit(slots: int, free: int, stock: int, average: float | None, batch_size: int) -> int:
    """How many jobs to claim now; 0 means not now.

    ``free`` slots start a job at once; each of the ``slots`` then starts another every ``average``
    seconds, so ``slots * HORIZON / average`` more start within the horizon. ``stock`` jobs are in
    hand already, unstarted. Until a duration is known, one job per free slot. A claim smaller than
    half of what could be wanted waits for the stock to run lower (claims stay batched).

    One slot claims a whole batch once the last one is used up, as a worker always has: its jobs
    run one after another on the main thread.
    """
    if slots == 1:
        return batch_size if stock == 0 and free else 0
    if average is None:
        wanted = free
    else:
        soon = slots * HORIZON / max(average, 1e-6)
        wanted = free + (math.floor(soon) if soon < batch_size else batch_size)
    wanted = min(wanted, batch_size)
    room = min(wanted, batch_size) - stock
    if room <= 0 or (room < wanted / 2 and free == 0):
        return 0
    return room
