"""What a worker knows of its queues between claims: whether a claim is worth sending, when to poll,
when the next delayed job comes due, which queues are paused. Polls, hints and what the outcomes' writes
found feed it; the loop asks it what to do next."""

from __future__ import annotations

import time
from collections.abc import Callable

from mysqlq.core.config import Settings
from mysqlq.hint import Wake
from mysqlq.leader.elector import Elector
from mysqlq.store import claims
from mysqlq.store.db import Database
from mysqlq.worker.intake.claimsize import HORIZON

# A claim made before its queue's durations were known gives back what its slots cannot start soon
# once a job has run past the horizon: a burst worker that found nothing waits this long after such
# a claim before it calls the queues drained (its hint brings it the jobs given back).
GIVE_BACK_WINDOW = 4 * HORIZON


class QueueWatch:
    """The worker's view of its queues, kept up by one poll per ``poll_interval`` (and hints between)."""

    def __init__(self, settings: Settings, db: Database, elector: Elector,
                 limits_changed: Callable[[str | None], None],
                 discarding: Callable[[frozenset[str]], None] = lambda queues: None) -> None:
        self.settings = settings
        self.db = db
        self.elector = elector  # every poll also tells the election what it saw, at no extra query
        self.limits_changed = limits_changed  # ... and the rate limits when operators changed them
        self.discarding = discarding  # ... and which of our queues keep no history of their done jobs
        self.want_claim = True
        self.next_poll = 0.0  # monotonic
        self.next_due: float | None = None  # monotonic: a delayed or retried job of ours comes due
        self.paused: frozenset[str] = frozenset()
        self.polled_since_claim = False
        self.found_any = False  # a claim of ours ever found jobs

    def look(self) -> None:
        """Poll when its time has come, and make due scheduled jobs ready when one is due."""
        now = time.monotonic()
        if now >= self.next_poll:
            self._poll(now)
        if self.next_due is not None and now >= self.next_due:
            self.next_due = None
            if self.db.run(lambda cur: claims.promote_due(cur)):
                self.want_claim = True

    def _poll(self, now: float) -> None:
        elector = self.elector
        result = self.db.run(lambda cur: claims.poll(cur, self.settings.queues, elector.beacon))
        elector.observe(result.leader_remaining, result.beacon_free)
        self.limits_changed(result.limits_changed)
        self.discarding(result.discard_done)
        self.polled_since_claim = True
        self.next_poll = now + self.settings.poll_interval
        self.paused = result.paused
        if result.has_ready:
            self.want_claim = True
        if result.next_due is not None:
            self.due_in(result.next_due)

    def due_in(self, seconds: float) -> None:
        due = time.monotonic() + max(0.0, seconds)
        self.next_due = due if self.next_due is None else min(self.next_due, due)

    def claimed(self, full: bool, set_aside: bool, found: bool) -> None:
        """A claim came back: claim again at once while claims come back ``full``; poll at once when
        jobs were ``set_aside`` (blocked: they made room the claim did not fill). A claim that ``found``
        jobs makes the last poll stale (a burst worker looks again before it calls the queues drained)."""
        self.want_claim = full
        if found:
            self.polled_since_claim = False
            self.found_any = True
        if set_aside:
            self.next_poll = 0.0

    def ready_in(self, queues: set[str]) -> None:
        """Queues that gained ready jobs (concurrency slots given back): claim if they are ours."""
        if queues & set(self.settings.queues):
            self.want_claim = True

    def hinted(self, wake: Wake) -> None:
        if wake.claim:
            self.want_claim = True
        if wake.poll:
            self.next_poll = 0.0
        if wake.due is not None:
            self.due_in(wake.due)

    def stopping(self) -> None:
        """Nothing more is claimed or polled: only running jobs are waited for."""
        self.next_poll, self.next_due = time.monotonic() + self.settings.poll_interval, None

    def drained(self) -> bool | None:
        """In burst mode, with nothing claimed: True when the queues are drained (exit), False to
        look once more first, None to wait for a job due within a poll interval."""
        if not self.polled_since_claim:
            self.next_poll = 0.0  # look once more before deciding the queue is drained
            return False
        if not self.found_any and self._claimed_lately():
            # Workers started together: another one's first claim may hold every job, and give back
            # what its slots cannot start soon. Wait for that (its hint wakes us), then look again.
            self.next_poll = min(self.next_poll, time.monotonic() + GIVE_BACK_WINDOW)
            return None
        if self.next_due is None or self.next_due - time.monotonic() > self.settings.poll_interval:
            return True
        return None

    def _claimed_lately(self) -> bool:
        queues = [queue for queue in self.settings.queues if queue not in self.paused]
        return bool(queues) and self.db.run(lambda cur: claims.claimed_lately(cur, queues, GIVE_BACK_WINDOW))

    def first_queue(self) -> str | None:
        """The first of our queues that is not paused (its durations size the claims)."""
        return next((queue for queue in self.settings.queues if queue not in self.paused), None)

    def timeout(self) -> float:
        """Seconds until the next poll or due job."""
        timeout = self.next_poll - time.monotonic()
        if self.next_due is not None:
            timeout = min(timeout, self.next_due - time.monotonic())
        return timeout
