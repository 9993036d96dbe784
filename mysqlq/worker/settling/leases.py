"""The leases of the batches a worker holds: which batches the heartbeat extends, and whether one
could have lapsed by the worker's own clock (then none of its unstarted jobs may start)."""

from __future__ import annotations

import time


class Leases:
    """Shared by the worker's main thread (which claims and lets go of batches) and the heartbeat
    thread (which extends their leases). Each side replaces what it writes whole, so no lock is needed."""

    def __init__(self, lease: float, heartbeat_interval: float) -> None:
        self.lease = lease
        self.margin = lease - heartbeat_interval  # past this, the next extension may come too late
        self._held: dict[int, float] = {}  # batch id → monotonic time before its claim was sent
        # By batch: the monotonic time, taken before the statement, of the last extension that
        # found the batch still ours.
        self._extended: dict[int, float] = {}

    def hold(self, batch_id: int, claimed_at: float) -> None:
        self._held = {**self._held, batch_id: claimed_at}

    def drop(self, batch_id: int) -> None:
        held = dict(self._held)
        held.pop(batch_id, None)
        self._held = held

    def held(self) -> tuple[int, ...]:
        """The batches to extend (read by the heartbeat thread)."""
        return tuple(self._held)

    def extended(self, extensions: dict[int, float]) -> None:
        """The heartbeat's last round: when each batch that was still ours was extended."""
        self._extended = extensions

    def safe_until(self, batch_id: int) -> float:
        """The monotonic time from which the batch's lease could lapse before the next heartbeat
        extends it (from its claim, or the last extension that found it still ours). It only moves
        later: a caller may keep it while it starts jobs, and ask again once it has passed."""
        return max(self._held.get(batch_id, 0.0), self._extended.get(batch_id, 0.0)) + self.margin

    def doubtful(self, batch_id: int) -> bool:
        """True when the batch's lease could lapse before the next heartbeat extends it."""
        return time.monotonic() >= self.safe_until(batch_id)
