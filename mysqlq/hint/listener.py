"""A worker's end of the hint channel: its unix socket, its UDP socket, and what hints may cost.

The worker selects on ``sockets``; ``wake()`` reads what arrived and says what to do: claim now,
poll now (a paused queue may have been resumed), or look for due jobs after a delay; ``settle()``
hears what the claim that followed found, which decides what the wake-up cost (mysqlq.hint.limit).
"""

from __future__ import annotations

import contextlib
import socket
import time
from collections.abc import Callable, Collection, Iterable
from dataclasses import dataclass
from typing import Any

from mysqlq.core import logs
from mysqlq.core.config import Settings
from mysqlq.hint import address
from mysqlq.hint.limit import WakeBudget
from mysqlq.hint.local import MAX_DATAGRAMS, LocalListener
from mysqlq.hint.wire import ANY_QUEUE, POLL_NOW, Hint, Rejected, Verifier, new_key

RECEIVE_BUFFER = 1 << 18  # room for bursts of hints while the worker is busy
EMPTY_READS = 3  # reads of the newest job id in a row that found no job enqueued: a flood, not a herd ...
LOOK_EVERY = 1.0  # ... and then one read per this many seconds (a flood must not make each wake-up two statements)


@dataclass
class Wake:
    """What the hints read by one ``wake()`` ask the worker to do."""

    claim: bool = False
    poll: bool = False
    due: float | None = None  # seconds until a scheduled job of ours is due


class Listener:
    """Unix and UDP hint sockets, the key that signs this worker's network hints, and the wake budget."""

    def __init__(self, settings: Settings, log: logs.Log | None = None,
                 newest_job: Callable[[], int] | None = None) -> None:
        self.log = log or logs.get_logger("mysqlq.hint")
        # The database's newest job id, asked for when the budget runs low: a wake-up that found
        # nothing while jobs were enqueued was the herd's (another worker took the job), not a flood's.
        self.newest_job = newest_job
        self._arrivals = 0  # jobs enqueued that no fruitless wake-up has been excused by yet
        self._newest: int | None = None
        self._empty_reads = 0  # reads in a row that found no job enqueued
        self._look_at = 0.0  # the budget's clock: when the newest job id may be read again
        self._unexcused = 0  # fruitless wake-ups charged since the last read
        self.local: LocalListener | None = None
        try:
            self.local = LocalListener(settings)
        except OSError as exc:  # the network hint may still work: each half stands alone
            self.log.warning("hint.local_unavailable", error=str(exc),
                             note="producers on this host cannot wake this worker; their jobs wait for the poll")
        self.key = new_key()
        self.verifier = Verifier(self.key)
        self.budget = WakeBudget()
        self.udp: socket.socket | None = None
        self.advertised: str | None = None  # "host:port" recorded in the registry
        self._bind_network(settings)
        self.sockets = [half for half in (self.local.sock if self.local else None, self.udp) if half is not None]
        if not self.sockets:
            raise OSError("no hint socket could be bound")
        self.rejected: dict[str, int] = {}
        self._charged = False  # the last wake-up took a token that its claim has not settled yet
        self.postponed = 0  # wake-ups that waited for a token
        self._deferred: Wake | None = None  # a wake-up waiting for a token
        self._deferred_at = 0.0
        self._skew_warned = False

    def _bind_network(self, settings: Settings) -> None:
        where = address.resolve(settings.hint_bind, settings.dsn)  # Settings refused a malformed one
        if where is None:
            return
        family = socket.AF_INET6 if ":" in where[0] else socket.AF_INET
        sock = socket.socket(family, socket.SOCK_DGRAM)
        try:
            sock.setblocking(False)
            with contextlib.suppress(OSError):
                sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, RECEIVE_BUFFER)
            sock.bind(where)
            bound = sock.getsockname()[:2]
            self.advertised = address.advertised((where[0], bound[1]), settings.dsn)
        except OSError as exc:
            sock.close()
            self.log.warning("hint.network_unavailable", bind=f"{where[0]}:{where[1]}", error=str(exc),
                             note="hints from other hosts will not arrive; jobs they enqueue wait for the poll")
            return
        self.udp = sock
        self.log.info("hint.listening", address=self.advertised, bound=f"{bound[0]}:{bound[1]}")

    @property
    def registry_entry(self) -> tuple[str | None, bytes | None]:
        """(hint_addr, hint_key) for the registry: where producers send, and what they sign with."""
        return (self.advertised, self.key) if self.advertised else (None, None)

    def deferred_for(self, now: float | None = None) -> float | None:
        """Seconds until a postponed wake-up may happen (None: nothing postponed)."""
        if self._deferred is None:
            return None
        return max(0.0, self._deferred_at - (time.monotonic() if now is None else now))

    def wake(self, readable: Iterable[Any], queues: Collection[str], paused: Collection[str]) -> Wake:
        """Read the sockets in ``readable``; what the claim after a wake-up finds is told to ``settle``."""
        if self._charged:  # no claim followed the last wake-up (the worker had no use for one)
            self.settle(None)
        wake, delayed = self._deferred or Wake(), None
        self._deferred = None
        for hint in self._read(readable):
            if hint.queue in paused or hint.queue == POLL_NOW:
                wake.poll = True  # perhaps resumed (`mysqlq resume` hints), or limits changed: look again now
            elif hint.queue == ANY_QUEUE or hint.queue in queues:
                if hint.delay <= 0:
                    wake.claim = True
                else:
                    delayed = hint.delay if delayed is None else min(delayed, hint.delay)
        if wake.claim or wake.poll:
            wait = self.budget.take()
            if wait > 0:
                self._deferred, self._deferred_at = wake, time.monotonic() + wait
                self.postponed += 1
                self.log.debug("hint.postponed", seconds=round(wait, 3))
                return Wake()
            self._charged = True
            self.log.debug("hint.wake", claim=wake.claim, poll=wake.poll)
        # A due delay needs a token too, else it is dropped: the poll reads the next due time anyway.
        if delayed is not None and (self._charged or self.budget.take() == 0):
            wake.due = delayed
        return wake

    def settle(self, found: bool | None) -> None:
        """What the claim after the last hinted wake-up found: jobs (True), nothing (False), or no
        claim was sent (None: no slot was free). Only a claim that found nothing costs a token."""
        if not self._charged:
            return
        self._charged = False
        if found is None:
            self.budget.give_back()
        elif found:
            self.budget.found()
        elif self._herd():
            self.budget.give_back()
        else:
            self.budget.found_nothing()

    def _herd(self) -> bool:
        """Was a wake-up that found nothing one of a herd? With tokens to spare it is not asked (the
        wake-ups that find work pay for most of the herd, see WakeBudget.found). Else: it was if jobs
        were enqueued that no other fruitless wake-up was excused by, as the newest job id says. When
        EMPTY_READS reads in a row found no job enqueued (a flood), it is read only once per
        LOOK_EVERY; a wake-up charged in between gets its token back at the next read if jobs
        enqueued meanwhile excuse it. So a flood of hints costs at most the budget, plus one wake-up
        per job enqueued meanwhile, plus one read a second."""
        if self.newest_job is None or not self.budget.low:
            return False
        if not self._arrivals and self.budget.clock() >= self._look_at:
            self._look()
        if self._arrivals:
            self._arrivals -= 1
            return True
        self._unexcused += 1
        return False

    def _look(self) -> None:
        """Read the newest job id: count the jobs enqueued since the last read, and give back the
        tokens of the wake-ups charged since then that they excuse."""
        try:
            newest = self.newest_job() if self.newest_job is not None else 0
        except Exception:  # the claim's own connection failing: the next claim says so; charge
            return
        if self._newest is not None:
            if newest > self._newest:
                self._arrivals += newest - self._newest
                self._empty_reads = 0
            else:
                self._empty_reads += 1
        self._newest = newest
        if self._empty_reads >= EMPTY_READS:
            self._look_at = self.budget.clock() + LOOK_EVERY
        late = min(self._arrivals, self._unexcused)
        self._arrivals -= late
        self.budget.excused(late)
        self._unexcused = 0

    def _read(self, readable: Iterable[Any]) -> list[Hint]:
        ready = set(readable)
        hints = self.local.drain() if self.local is not None and self.local.sock in ready else []
        if self.udp is not None and self.udp in ready:
            for _ in range(MAX_DATAGRAMS):
                try:
                    data = self.udp.recv(512)
                except OSError:
                    break
                try:
                    hints.append(self.verifier.decode(data))
                except Rejected as exc:
                    self._rejected(exc)
        return hints

    def _rejected(self, exc: Rejected) -> None:
        self.rejected[exc.reason] = self.rejected.get(exc.reason, 0) + 1
        if exc.skew and not self._skew_warned:
            self._skew_warned = True  # the one rejection an operator can fix: say so, once
            self.log.warning("hint.clock_skew", skew_s=round(exc.skew, 1),
                             fix="a producer's clock differs from this host's by more than 30 s; its hints "
                                 "are ignored and its jobs wait for the poll: synchronise the clocks (NTP)")

    def close(self) -> None:
        if self.local is not None:
            self.local.close()
        if self.udp is not None:
            self.udp.close()
