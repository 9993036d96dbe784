"""The bound on what hints can cost: a token bucket over hint-triggered wake-ups that found nothing."""

from __future__ import annotations

import time
from collections.abc import Callable

RATE = 10.0  # fruitless hint-triggered wake-ups per second, sustained
BURST = 20.0  # ... and at once, after a quiet spell


class WakeBudget:
    """Each hint-triggered wake-up takes a token; one that led to work gives it back.

    So hints that bring jobs are never slowed, and a flood of hints (forged ones never get
    this far; replayed or buggy ones might) costs at most ``rate`` wasted wake-ups a second,
    ``burst`` at once. A wake-up with no token is postponed until one is free, not dropped.
    """

    def __init__(self, rate: float = RATE, burst: float = BURST,
                 clock: Callable[[], float] = time.monotonic) -> None:
        self.rate = rate
        self.burst = burst
        self.clock = clock
        self.tokens = burst
        self._at = clock()

    def _refill(self) -> float:
        now = self.clock()
        self.tokens = min(self.burst, self.tokens + (now - self._at) * self.rate)
        self._at = now
        return now

    def take(self) -> float:
        """0 when a token was taken; otherwise the seconds until one will be there (none taken)."""
        self._refill()
        if self.tokens >= 1.0:
            self.tokens -= 1.0
            return 0.0
        return (1.0 - self.tokens) / self.rate

    def give_back(self) -> None:
        """The wake-up found work: it costs nothing."""
        self._refill()
        self.tokens = min(self.burst, self.tokens + 1.0)
