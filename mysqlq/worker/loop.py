"""The worker loop: has-task hint → claim what the slots can start soon → hand it to the keeper
(mysqlq.worker.keeper), which runs, writes and logs → wait → repeat. One loop for every concurrency."""

from __future__ import annotations

import contextlib
import os
import random
import select
import signal
import threading
import time
from collections.abc import Iterable
from types import FrameType
from typing import Any

import structlog

from mysqlq import hint
from mysqlq.core import logs
from mysqlq.core.config import Settings
from mysqlq.core.handlers import Registry
from mysqlq.core.jobs import ClaimedJob
from mysqlq.core.systemd import Notifier
from mysqlq.leader.elector import Elector
from mysqlq.leader.maintainer import Maintainer
from mysqlq.store import claims
from mysqlq.store.db import FOREVER, Cursor, Database, RetryPolicy, StopRequested
from mysqlq.store.schema import check_schema
from mysqlq.worker import metrics as worker_metrics
from mysqlq.worker.claimsize import claim_limit
from mysqlq.worker.heartbeat import Heartbeat
from mysqlq.worker.keeper import Keeper
from mysqlq.worker.leases import Leases
from mysqlq.worker.limits import Limits, keyed
from mysqlq.worker.report import Report
from mysqlq.worker.runner import Runner
from mysqlq.worker.services import Services

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
        self.metrics = worker_metrics.start(settings)  # per-worker metrics (--metrics-port); a no-op when off
        self.report = Report(self.metrics)
        runner = Runner(settings, registry or Registry(), self.log)
        self.limits = Limits(runner.registry, self.db, self.log)  # jobs with a concurrency key
        self.leases = Leases(settings.lease, settings.heartbeat_interval)
        self.keeper = Keeper(settings, runner, self.db, self.log, self.leases, self.limits, self.report,
                             self.notifier, self._wake_others)
        # The background thread: the heartbeat, and the leader's chores when this worker leads.
        looks = threading.Event()  # set when a poll saw the election change
        self.services = Services(settings, self.log, looks, lambda: self.stop_requested_at)
        self.heartbeat = Heartbeat(settings, self.services.db, self.log, self.leases)
        self.elector = Elector(settings, self.services.db, self.log, lambda: self.heartbeat.worker_id, looks)
        self.maintainer = Maintainer(settings, self.services.db, self.log, self.elector)
        self.services.attach([self.heartbeat, self.maintainer])
        self.claim = claims.CLAIMS[settings.claim_strategy]
        self._last_status: tuple[int, int] | None = None
        self.stopping = False
        self.want_claim = True
        self.next_poll = 0.0
        self.next_due: float | None = None
        self.paused: frozenset[str] = frozenset()
        self.listener: hint.Listener | None = None
        self._wake_r, self._wake_w = os.pipe()
        self._last_watchdog = 0.0
        self._polled_since_claim = False
        self._queue_rank = {queue: rank for rank, queue in enumerate(settings.queues)}
        self._first_queue = settings.queues[0]

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
            self.maintainer.prepare(self.services.db)
            self.heartbeat.register()
            self.services.start()
            beating = True
            self.log.info("worker.started", queues=",".join(self.settings.queues),
                          worker_id=self.heartbeat.worker_id, batch_size=self.settings.batch_size,
                          concurrency=self.settings.concurrency, dsn=self.settings.dsn.redacted())
            self.notifier.ready(self._status("idle"))
            exit_code = self._run_until_stopped()
        except StopRequested as exc:
            # Asked to stop while the database was unreachable: nothing more can be written, and
            # whatever we hold stays leased to us until the reaper gives it back.
            self.log.warning("worker.stopped_waiting", error=str(exc))
            self.db.retry = ONCE  # leaving the registry gets one try: the reaper forgets us anyway
        finally:
            self.notifier.stopping(self._status("stopping"))
            if self.listener:
                self.listener.close()
            self.keeper.close()
            if beating:
                self.heartbeat.stopping = True
                self.services.stop()
                self.maintainer.release(self.db)  # another worker takes the role over at once
                self.heartbeat.unregister(self.db)
            self.db.close()
            if beating:  # a worker refused at registration never started: the CLI says why
                self.log.info("worker.stopped", done=self.report.done, failed=self.report.failed,
                              exit_code=exit_code)
            logs.flush()
        return exit_code

    def _install_signals(self) -> None:
        def on_signal(signum: int, frame: FrameType | None) -> None:
            if self.stopping:
                os._exit(128 + signum)  # a second signal: leave now, the reaper recovers our claims
            self.stopping = True  # only record it: the loop notices between jobs
            self.stop_requested_at = time.monotonic()
            self.keeper.halted = True
            self.notifier.stopping(self._status("stopping"))

        for sig in STOP_SIGNALS:
            signal.signal(sig, on_signal)
        os.set_blocking(self._wake_w, False)
        os.set_blocking(self._wake_r, False)
        signal.set_wakeup_fd(self._wake_w)

    def _run_until_stopped(self) -> int:
        """Turn until stopped (every job in flight finished, the unstarted rest released) or drained."""
        keeper = self.keeper
        while self._turn(keeper):
            pass
        keeper.release_stock()  # what a signal during the last turn left unstarted
        keeper.write(final_only=True)
        if keeper.stuck is not None:
            self.log.error("worker.exit_stuck", job_id=keeper.stuck.job.id, exit_code=EXIT_STUCK)
            return EXIT_STUCK
        return 0

    # ------------------------------------------------------------------ the loop

    def _turn(self, keeper: Keeper) -> bool:
        """One turn of the loop; False when the worker should end."""
        self._ping_watchdog()
        ending = self.stopping or keeper.stuck is not None
        keeper.turn(starting=not ending)
        self._hear(keeper)
        ending = self.stopping or keeper.stuck is not None  # the turn may have found a stuck job
        self._report(keeper)
        if ending:
            if not keeper.slots.waiting_for(time.monotonic()):
                return False
            self.next_poll, self.next_due = time.monotonic() + self.settings.poll_interval, None
            self._wait()
            return True
        self._poll_and_promote()
        if self.want_claim:
            first = self._first_queue if self._first_queue not in self.paused else next(
                (queue for queue in self.settings.queues if queue not in self.paused), None)
            average = keeper.by_queue.get(first) if first is not None else None
            limit = claim_limit(self.settings.concurrency, len(keeper.slots.free), keeper.stock, average,
                                self.settings.batch_size)
            if limit:
                claimed_at = time.monotonic()  # the lease runs from no earlier than this
                batch_id, jobs = self._claim(limit)
                self.want_claim = len(jobs) >= limit
                if jobs:
                    keeper.add(batch_id, claimed_at, jobs)
                    self._report(keeper)
                    return True
        if self.settings.burst and keeper.empty and not self.want_claim:
            drained = self._burst_drained()
            if drained is not None:
                return not drained
        self._wait()
        return True

    def _hear(self, keeper: Keeper) -> None:
        """What the keeper's writes found: a retry coming due, queues whose waiting jobs became ready."""
        retry_in, queues = keeper.news()
        if retry_in is not None:
            self._due_in(retry_in)
        if queues & set(self.settings.queues):  # claim them here (other workers were woken too)
            self.want_claim = True

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
        elector = self.elector
        result = self.db.run(lambda cur: claims.poll(cur, self.settings.queues, elector.beacon))
        elector.observe(result.leader_remaining, result.beacon_free)
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

    def _claim(self, limit: int) -> tuple[int, list[ClaimedJob]]:
        settings = self.settings
        batch_id = new_batch_id()  # made before any retry, so a retried claim keeps one token
        claimed = 0
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
        jobs = self.db.run(lambda cur: claims.fetch_batch(cur, batch_id))
        if keyed(jobs):  # admitted, or set aside until their key has a free slot
            jobs = self.limits.admit(batch_id, jobs)
            self.next_poll = 0.0  # what was set aside made room in the claim: look again at once
        if len(settings.queues) > 1:  # earlier queues first; within one, (priority, id) as fetched
            jobs.sort(key=lambda job: self._queue_rank.get(job.queue, 0))
        self.log.info("batch.claimed", batch_id=batch_id, jobs=len(jobs))
        return batch_id, jobs

    def _report(self, keeper: Keeper) -> None:
        """STATUS= says how many slots are busy (or which batch runs on the main thread), whenever that changes."""
        busy, batches = keeper.slots.busy, keeper.batches
        shape = (busy, len(batches))
        if shape != self._last_status:
            self._last_status = shape
            if busy:
                doing = f"running {busy} of {self.settings.concurrency} slots"
            elif len(batches) == 1:
                (batch,) = batches.values()
                doing = f"running batch {batch.batch_id} ({len(batch.jobs)} jobs)"
            else:
                doing = f"running {len(batches)} batches" if batches else "idle"
            self.notifier.status(self._status(doing))

    # ------------------------------------------------------------------ waiting

    def _wait(self) -> None:
        """Sleep until a hint for our queues, the next poll, a due job, a job's return, or a signal."""
        logs.flush()
        timeout = self.next_poll - time.monotonic()
        if self.next_due is not None:
            timeout = min(timeout, self.next_due - time.monotonic())
        if self.notifier.watchdog_interval is not None:
            timeout = min(timeout, self.notifier.watchdog_interval)
        sources: list[Any] = [self._wake_r, self.keeper.slots]  # the slots: readable when a job returns
        if self.listener:
            sources += self.listener.sockets
            postponed = self.listener.deferred_for()  # a hinted wake-up waiting for the rate bound
            if postponed is not None:
                timeout = min(timeout, postponed)
        deadline = self.keeper.deadline()
        if deadline is not None:
            timeout = min(timeout, deadline - time.monotonic())
        with self.metrics.waiting():
            readable, _, _ = select.select(sources, [], [], max(0.0, timeout))
        if self._wake_r in readable:
            with contextlib.suppress(BlockingIOError):
                os.read(self._wake_r, 512)
        if self.listener:
            wake = self.listener.wake(readable, self.settings.queues, self.paused,
                                      self.report.done + self.report.failed)
            if wake.claim:
                self.want_claim = True
            if wake.poll:
                self.next_poll = 0.0
            if wake.due is not None:
                self._due_in(wake.due)

    def _ping_watchdog(self) -> None:
        period = self.notifier.watchdog_interval
        if period is not None and time.monotonic() - self._last_watchdog >= period / 2:
            self._last_watchdog = time.monotonic()
            self.notifier.watchdog()

    def _paused(self) -> None:
        """While the database is down the loop is alive, only waiting: feed the watchdog, show the log."""
        self._ping_watchdog()
        logs.flush()

    def _wake_others(self, queues: Iterable[str]) -> None:
        hint.notify(self.settings, queues)

    def _status(self, doing: str) -> str:
        return (f"{doing}; {self.report.done} done, {self.report.failed} failed; "
                f"queues {','.join(self.settings.queues)}")
