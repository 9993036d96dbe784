"""The worker loop: has-task hint → claim a batch → run its jobs (one at a time, or in N slots) →
record outcomes → repeat."""

from __future__ import annotations

import contextlib
import os
import random
import select
import signal
import time
from types import FrameType
from typing import Any

import structlog

from mysqlq import hint
from mysqlq.core import logs
from mysqlq.core.config import Settings
from mysqlq.core.handlers import Registry
from mysqlq.core.jobs import ClaimedJob
from mysqlq.core.systemd import Notifier
from mysqlq.store import claims
from mysqlq.store.db import FOREVER, Cursor, Database, RetryPolicy, StopRequested
from mysqlq.store.schema import check_schema
from mysqlq.worker import limits
from mysqlq.worker import metrics as worker_metrics
from mysqlq.worker.claimsize import claim_limit
from mysqlq.worker.heartbeat import Heartbeat
from mysqlq.worker.keeper import InHand
from mysqlq.worker.outcomes import Outcome, OutcomeBuffer
from mysqlq.worker.runner import Runner

STOP_SIGNALS = (signal.SIGTERM, signal.SIGINT)
ONCE = RetryPolicy(attempts=1)
EXIT_STUCK = 70  # EX_SOFTWARE: a handler thread never returned; systemd's Restart= brings a fresh process


def new_batch_id() -> int:
    """A fresh claim token: 63 random bits, never reused in practice."""
    return random.getrandbits(63) or 1


class Worker:
    """A long-running consumer of one or more queues. ``run()`` returns the process exit code."""

    def __init__(self, settings: Settings, registry: Registry | None = None) -> None:
        self.settings = settings
        self.log = structlog.get_logger("mysqlq.worker").bind(worker=settings.worker_name)
        self.stop_requested_at: float | None = None
        self.db = Database(settings.dsn, isolation=settings.isolation, retry=FOREVER,
                           on_pause=self._paused, stop_requested=lambda: self.stop_requested_at)
        self.notifier = Notifier()
        self.runner = Runner(settings, registry or Registry(), self.log, lambda: self.db.conn)
        self.limits = limits.Limits(self.runner.registry, self.db, self.log)  # jobs with a concurrency key
        self.heartbeat = Heartbeat(settings, self.log, self._batches_in_hand, self._on_reaped)
        self.heartbeat.db.stop_requested = lambda: self.stop_requested_at  # registering waits for the server too
        self.claim = claims.CLAIMS[settings.claim_strategy]
        self.current_batch: int | None = None
        self.claimed_at = 0.0  # monotonic, before the current batch's claim was sent
        # With more than one slot, jobs run on threads and an event loop (mysqlq.worker.keeper);
        # with one, on this thread, exactly as they always have.
        self.inhand: InHand | None = None
        if settings.concurrency > 1:
            self.inhand = InHand(settings, self.runner, self.db, self.log, self._lease_doubtful,
                                 self._log_flushed, self._due_in, self.notifier)
        self._last_status: tuple[int, int] | None = None
        self.stopping = False
        self.want_claim = True
        self.next_poll = 0.0
        self.next_due: float | None = None
        self.paused: frozenset[str] = frozenset()
        self.done = self.failed = 0
        self.listener: hint.Listener | None = None
        self._wake_r, self._wake_w = os.pipe()
        self._last_watchdog = 0.0
        self._polled_since_claim = False
        self._queue_rank = {queue: rank for rank, queue in enumerate(settings.queues)}
        self.metrics = worker_metrics.start(settings)  # per-worker metrics (--metrics-port); a no-op when off

    # ------------------------------------------------------------------ lifecycle

    def run(self) -> int:
        self._install_signals()
        exit_code = 0
        beating = False
        try:
            self.db.run(check_schema)  # a missing schema is the CLI's one-line error, nothing else
        except StopRequested as exc:
            self.log.warning("worker.stopped_waiting", error=str(exc))
            self.log.info("worker.stopped", done=0, failed=0, exit_code=0)
            logs.flush()
            return 0
        try:
            if self.settings.hint:  # before registering: the registry row says where network hints go
                try:
                    self.listener = hint.Listener(self.settings, self.log)
                    self.heartbeat.hint_entry = self.listener.registry_entry
                except OSError as exc:
                    self.log.warning("hint.unavailable", error=str(exc), note="polling only")
            self.heartbeat.register()
            self.heartbeat.start()
            beating = True
            self.log.info("worker.started", queues=",".join(self.settings.queues),
                          worker_id=self.heartbeat.worker_id, batch_size=self.settings.batch_size,
                          concurrency=self.settings.concurrency, dsn=self.settings.dsn.redacted())
            self.notifier.ready(self._status("idle"))
            if self.inhand is not None:
                exit_code = self._run_concurrent(self.inhand)
            else:
                while not self.stopping:
                    if not self.step() and self.settings.burst:
                        break
        except StopRequested as exc:
            # Asked to stop while the database was unreachable: nothing more can be written, and
            # whatever we hold stays leased to us until the reaper gives it back.
            self.log.warning("worker.stopped_waiting", error=str(exc))
            self.db.retry = ONCE  # leaving the registry gets one try: the reaper forgets us anyway
        finally:
            self.notifier.stopping(self._status("stopping"))
            if self.listener:
                self.listener.close()
            if self.inhand is not None:
                self.inhand.close()
            if beating:
                self.heartbeat.stop(self.db)
            self.db.close()
            if beating:  # a worker refused at registration never started: the CLI says why
                self.log.info("worker.stopped", done=self.done, failed=self.failed, exit_code=exit_code)
            logs.flush()
        return exit_code

    def _install_signals(self) -> None:
        def on_signal(signum: int, frame: FrameType | None) -> None:
            if self.stopping:
                os._exit(128 + signum)  # a second signal: leave now, the reaper recovers our claims
            self.stopping = True  # only record it: the loop notices between jobs
            self.stop_requested_at = time.monotonic()
            if self.inhand is not None:
                self.inhand.halted = True
            self.notifier.stopping(self._status("stopping"))

        for sig in STOP_SIGNALS:
            signal.signal(sig, on_signal)
        os.set_blocking(self._wake_w, False)
        os.set_blocking(self._wake_r, False)
        signal.set_wakeup_fd(self._wake_w)

    # ------------------------------------------------------------------ the loop

    def step(self) -> bool:
        """One turn of the loop; False when there was nothing to do (burst mode then exits)."""
        self._ping_watchdog()
        self._poll_and_promote()
        if self.want_claim:
            batch_id, jobs = self._claim()
            self.want_claim = len(jobs) >= self.settings.batch_size
            if jobs:
                self._process(batch_id, jobs)
                return True
        if self.settings.burst:
            drained = self._burst_drained()
            if drained is not None:
                return not drained
        self._wait()
        return True

    def _burst_drained(self) -> bool | None:
        """In burst mode, with nothing claimed: True when the queues are drained (exit), False to
        look once more first, None to wait for a job due within a poll interval."""
        if not self._polled_since_claim:
            self.next_poll = 0.0  # look once more before deciding the queue is drained
            return False
        if self.next_due is None or self.next_due - time.monotonic() > self.settings.poll_interval:
            return True
        return None

    def _poll_and_promote(self) -> None:
        """Poll when its time has come, and make due scheduled jobs ready when one is due."""
        now = time.monotonic()
        if now >= self.next_poll:
            self._poll(now)
        if self.next_due is not None and now >= self.next_due:
            self.next_due = None
            if self.db.run(lambda cur: claims.promote_due(cur)):
                self.want_claim = True

    def _poll(self, now: float) -> None:
        beacon = self.heartbeat.leadership.beacon
        result = self.db.run(lambda cur: claims.poll(cur, self.settings.queues, beacon))
        self.heartbeat.leadership.observe(result.leader_remaining, result.beacon_free)
        self._polled_since_claim = True
        self.next_poll = now + self.settings.poll_interval
        self.paused = result.paused
        if result.has_ready:
            self.want_claim = True
        if result.next_due is not None:
            self._due_in(result.next_due)

    def _due_in(self, seconds: float) -> None:
        due = time.monotonic() + max(0.0, seconds)
        self.next_due = due if self.next_due is None else min(self.next_due, due)

    def _claim(self, limit: int | None = None) -> tuple[int, list[ClaimedJob]]:
        settings = self.settings
        limit = limit or settings.batch_size
        batch_id = new_batch_id()  # made before any retry, so a retried claim keeps one token
        claimed = 0
        self.claimed_at = time.monotonic()  # the lease runs from no earlier than this
        for queue in settings.queues:
            if queue in self.paused:
                continue
            room = limit - claimed

            def claim(cur: Cursor, queue: str = queue, room: int = room) -> int:
                return self.claim(cur, queue, batch_id, self.heartbeat.worker_id, settings.worker_name,
                                  settings.lease, room)

            claimed += self.db.run(claim)
            if claimed >= limit:
                break
        if not claimed:
            return batch_id, []
        self._polled_since_claim = False
        if self.inhand is None:
            self.current_batch = batch_id
        jobs = self.db.run(lambda cur: claims.fetch_batch(cur, batch_id))
        if limits.keyed(jobs):  # admitted, or set aside until their key has a free slot
            jobs = self.limits.admit(batch_id, jobs)
            self.next_poll = 0.0  # what was set aside made room in the claim: look again at once
        if len(settings.queues) > 1:  # earlier queues first; within one, (priority, id) as fetched
            jobs.sort(key=lambda job: self._queue_rank.get(job.queue, 0))
        self.log.info("batch.claimed", batch_id=batch_id, jobs=len(jobs))
        return batch_id, jobs

    def _process(self, batch_id: int, jobs: list[ClaimedJob]) -> None:
        buffer = OutcomeBuffer(batch_id, self.settings)
        self.notifier.status(self._status(f"running batch {batch_id} ({len(jobs)} jobs)"))
        log = self.log.bind(batch_id=batch_id)
        for index, job in enumerate(jobs):
            if self.stopping:
                self._release(batch_id, jobs[index:], buffer)
                break
            if self._lease_doubtful(batch_id, self.claimed_at):
                log.warning("batch.abandoned", jobs=len(jobs) - index,
                            note="the claim's lease may have lapsed; running none of the rest")
                self._release(batch_id, jobs[index:], buffer)
                break
            self.notifier.in_job = True  # the keep-alive thread feeds the watchdog meanwhile
            outcome = self.runner.run(job, batch_id)
            self.notifier.in_job = False
            if outcome.kind == "release":
                # The connection failed under a transactional handler: reconnect (waiting for the
                # server if need be) and give this job and the rest of the batch back, unspent.
                log.warning("batch.interrupted", job_id=job.id, error=(outcome.error or "").split("\n", 1)[0])
                self.db.close()
                self._release(batch_id, jobs[index:], buffer)
                break
            buffer.add(job, outcome)  # logged once written: the write says whether the claim held
            if buffer.due():
                self._flush(buffer, log)
            self._ping_watchdog()
        self._flush(buffer, log, final=True)
        logs.flush()
        self.current_batch = None
        self.notifier.status(self._status("idle"))

    def _flush(self, buffer: OutcomeBuffer, log: Any, final: bool = False) -> None:
        entries, lost = buffer.flush(self.db, final)
        if buffer.next_retry is not None:
            self._due_in(buffer.next_retry)
        self._log_flushed(log, entries, lost)

    def _log_flushed(self, log: Any, entries: list[tuple[ClaimedJob, Outcome]], lost: set[int]) -> None:
        if limits.keyed(job for job, _ in entries):  # written: give their slots back, wake who waits
            self._unblocked(self.limits.settle(job for job, _ in entries))
        for job, outcome in entries:
            if job.id in lost and outcome.kind != "lost":
                log.warning("job.claim_lost", job_id=job.id, note="another worker took the claim over; nothing written")
            else:
                self._log_outcome(log, job, outcome)

    def _release(self, batch_id: int, jobs: list[ClaimedJob], buffer: OutcomeBuffer) -> None:
        self._flush(buffer, self.log.bind(batch_id=batch_id))
        ids = [job.id for job in jobs]
        released = self.db.run(lambda cur: claims.release(cur, batch_id, ids))
        self.log.info("batch.released", batch_id=batch_id, jobs=released)

    def _log_outcome(self, log: Any, job: ClaimedJob, outcome: Outcome) -> None:
        fields = {"job_id": job.id, "queue": job.queue, "handler": job.handler, "attempt": job.attempt,
                  "duration": round(outcome.duration, 6)}
        self.metrics.outcome(job, outcome)
        if outcome.kind == "done":
            self.done += 1
            log.info("job.done", **fields)
        elif outcome.kind == "lost":
            log.warning("job.claim_lost", **fields, note=outcome.error)
        else:
            self.failed += 1
            final = outcome.kind == "dead" or job.attempt >= job.max_attempts
            summary = (outcome.error or "").split("\n", 1)[0]
            log.error("job.dead" if final else "job.failed", **fields, error=summary,
                      max_attempts=job.max_attempts)

    # ------------------------------------------------------------------ N slots

    def _run_concurrent(self, inhand: InHand) -> int:
        """Turn until stopped (every job in flight finished, the unstarted rest released) or drained."""
        while self._turn(inhand):
            pass
        inhand.write(final_only=True)
        if inhand.stuck is not None:
            self.log.error("worker.exit_stuck", job_id=inhand.stuck.job.id, exit_code=EXIT_STUCK)
            return EXIT_STUCK
        return 0

    def _turn(self, inhand: InHand) -> bool:
        """One turn of the concurrent loop; False when the worker should end."""
        self._ping_watchdog()
        ending = self.stopping or inhand.stuck is not None
        inhand.turn(starting=not ending)
        ending = self.stopping or inhand.stuck is not None  # the turn may have found a stuck job
        self._report(inhand)
        if ending:
            if not inhand.slots.waiting_for(time.monotonic()):
                return False
            self.next_poll, self.next_due = time.monotonic() + self.settings.poll_interval, None
            self._wait()
            return True
        self._poll_and_promote()
        if self.want_claim:
            first = next((queue for queue in self.settings.queues if queue not in self.paused), None)
            average = inhand.by_queue.get(first) if first is not None else None
            limit = claim_limit(self.settings.concurrency, len(inhand.slots.free), inhand.stock, average,
                                self.settings.batch_size)
            if limit:
                claimed_at = time.monotonic()
                batch_id, jobs = self._claim(limit)
                self.want_claim = len(jobs) >= limit
                if jobs:
                    inhand.add(batch_id, claimed_at, jobs)
                    return True
        if self.settings.burst and inhand.empty and not self.want_claim:
            drained = self._burst_drained()
            if drained is not None:
                return not drained
        self._wait()
        return True

    def _report(self, inhand: InHand) -> None:
        """STATUS= says how many slots are busy, whenever that changes."""
        shape = (inhand.slots.busy, len(inhand.batches))
        if shape != self._last_status:
            self._last_status = shape
            doing = f"running {shape[0]} of {self.settings.concurrency} slots" if shape[0] else "idle"
            self.notifier.status(self._status(doing))

    def _batches_in_hand(self) -> tuple[int, ...]:
        """Batches whose leases the heartbeat extends."""
        if self.inhand is not None:
            return self.inhand.batch_ids()
        batch_id = self.current_batch
        return () if batch_id is None else (batch_id,)

    def _lease_doubtful(self, batch_id: int, claimed_at: float) -> bool:
        """True when a batch's lease could lapse before the next heartbeat extends it (by our own
        clock: from the claim, or the last extension that found the batch still ours)."""
        since = max(claimed_at, self.heartbeat.lease_extended.get(batch_id, 0.0))
        return time.monotonic() - since >= self.settings.lease - self.settings.heartbeat_interval

    # ------------------------------------------------------------------ waiting

    def _wait(self) -> None:
        """Sleep until a hint for our queues, the next poll, a due job, or a signal."""
        logs.flush()
        timeout = self.next_poll - time.monotonic()
        if self.next_due is not None:
            timeout = min(timeout, self.next_due - time.monotonic())
        if self._watchdog_period is not None:
            timeout = min(timeout, self._watchdog_period)
        sources: list[Any] = [self._wake_r]
        if self.listener:
            sources += self.listener.sockets
            postponed = self.listener.deferred_for()  # a hinted wake-up waiting for the rate bound
            if postponed is not None:
                timeout = min(timeout, postponed)
        if self.inhand is not None:
            sources.append(self.inhand.slots)  # readable when a job returns
            deadline = self.inhand.deadline()
            if deadline is not None:
                timeout = min(timeout, deadline - time.monotonic())
        with self.metrics.waiting():
            readable, _, _ = select.select(sources, [], [], max(0.0, timeout))
        if self._wake_r in readable:
            with contextlib.suppress(BlockingIOError):
                os.read(self._wake_r, 512)
        if self.listener:
            wake = self.listener.wake(readable, self.settings.queues, self.paused, self.done + self.failed)
            if wake.claim:
                self.want_claim = True
            if wake.poll:
                self.next_poll = 0.0
            if wake.due is not None:
                self._due_in(wake.due)

    @property
    def _watchdog_period(self) -> float | None:
        return self.notifier.watchdog_interval

    def _ping_watchdog(self) -> None:
        period = self.notifier.watchdog_interval
        if period is not None and time.monotonic() - self._last_watchdog >= period / 2:
            self._last_watchdog = time.monotonic()
            self.notifier.watchdog()

    def _paused(self) -> None:
        """While the database is down the loop is alive, only waiting: feed the watchdog, show the log."""
        self._ping_watchdog()
        logs.flush()

    def _on_reaped(self, count: int) -> None:
        hint.notify(self.settings, [hint.ANY_QUEUE])

    def _unblocked(self, queues: set[str]) -> None:
        """Jobs waiting for a concurrency slot became ready: claim them here, or wake who serves them."""
        if queues & set(self.settings.queues):
            self.want_claim = True
        if queues:
            hint.notify(self.settings, queues)

    def _status(self, doing: str) -> str:
        return f"{doing}; {self.done} done, {self.failed} failed; queues {','.join(self.settings.queues)}"
