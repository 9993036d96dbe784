"""The bound on what hints can cost: a token bucket over hint-triggered wake-ups that found nothing."""

from __future__ import annotations

import time
from collections.abc import Callable

RATE = 10.0  # fruitless hint-triggered wake-ups per second, sustained
BURST = 20.0  # ... and at once, after a quiet spell
HERD = 16  # fruitless wake-ups that one which found work pays back, at most (see WakeBudget.found)


class WakeBudget:
    """Each hint-triggered wake-up takes a token; the claim it leads to settles it.

    A claim that found jobs gives its token back, and with it those of the wake-ups that found
    nothing since the last one that found something, up to ``HERD``: every worker of a queue is
    hinted for each commit, so with K idle workers K - 1 wake-ups find nothing by design, and the
    one that found the job pays for them. A wake-up that sent no claim (no free slot) is free too.

    So hints that bring jobs are never slowed, and a flood of hints (forged ones never get this far;
    replayed ones are dropped by the wire's nonce memory; buggy ones or a local user's might) costs at
    most ``rate`` wasted wake-ups a second, ``burst`` at once, plus ``HERD`` for each job this worker
    really found meanwhile. A wake-up with no token is postponed until one is free, not dropped.
    """

    def __init__(self, rate: float = RATE, burst: float = BURST,
                 clock: Callable[[], float] = time.monotonic) -> None:
        self.rate = rate
        self.burst = burst
        self.clock = clock
        self.tokens = burst
        self.missed = 0  # wake-ups that found nothing since the last one that found work
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

    def give_back(self, tokens: float = 1.0) -> None:
        """The wake-up cost nothing (no claim was sent for it)."""
        self._refill()
        self.tokens = min(self.burst, self.tokens + tokens)

    def found(self) -> None:
        """The wake-up's claim found jobs: it costs nothing, and pays for the herd it was part of."""
        self.give_back(1.0 + min(self.missed, HERD))
        self.missed = 0

    def excused(self, count: int) -> None:
        """Wake-ups already charged turned out to be the herd's: their tokens come back."""
        if count > 0:
            self.give_back(float(count))
            self.missed = max(0, self.missed - count)

    def found_nothing(self) -> None:
        """The wake-up's claim found nothing: its token stays spent."""
        self.missed += 1

    @property
    def low(self) -> bool:
        """Under half the burst is left: worth asking whether the fruitless wake-ups were the herd's."""
        self._refill()
        return self.tokens < self.burst / 2
