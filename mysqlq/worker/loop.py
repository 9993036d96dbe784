"""The worker loop: has-task hint → claim what the slots can start soon → hand it to the dispatcher
(mysqlq.worker.dispatcher), which runs it, and the batches (mysqlq.worker.batches), which write and log
its outcomes → wait → repeat. One loop for every concurrency."""

from __future__ import annotations

import contextlib
import os
import select
import signal
import threading
import time
from collections.abc import Iterable
from types import FrameType
from typing import Any

from mysqlq import hint
from mysqlq.core import logs, systemdbinding
from mysqlq.core.config import Settings
from mysqlq.core.errors import SchemaError
from mysqlq.core.handlers import Registry
from mysqlq.core.systemd import Notifier
from mysqlq.leader.elector import Elector
from mysqlq.leader.maintainer import Maintainer
from mysqlq.store import claims
from mysqlq.store.db import FOREVER, Database, RetryPolicy, StopRequested
from mysqlq.store.schema import check_schema, migration_running
from mysqlq.worker.background import BackgroundThread
from mysqlq.worker.batches import Batches
from mysqlq.worker.dispatcher import Dispatcher, StopFlag
from mysqlq.worker.heartbeat import Heartbeat
from mysqlq.worker.intake.claimer import Claimer
from mysqlq.worker.intake.claimsize import claim_limit
from mysqlq.worker.intake.concurrency_admission import Limits
from mysqlq.worker.intake.rate_admission import Rates
from mysqlq.worker.queue_watch import QueueWatch
from mysqlq.worker.running.cancels import Cancels, CancelWatch
from mysqlq.worker.running.job_runner import Runner
from mysqlq.worker.running.progress import LatestProgress, ProgressWriter
from mysqlq.worker.running.slots import Slots
from mysqlq.worker.settling import worker_metrics
from mysqlq.worker.settling.leases import Leases
from mysqlq.worker.settling.report import Report

STOP_SIGNALS = (signal.SIGTERM, signal.SIGINT)
ONCE = RetryPolicy(attempts=1)
MIGRATION_CHECK = 1.0  # seconds between looks at the schema while a `mysqlq migrate` runs
EXIT_STUCK = 70  # EX_SOFTWARE: a handler thread never returned; systemd's Restart= brings a fresh process


class Worker:
    """A long-running consumer of one or more queues. ``run()`` returns the process exit code."""

    def __init__(self, settings: Settings, registry: Registry | None = None) -> None:
        if os.environ.get("NOTIFY_SOCKET") or logs.stderr_is_journal():  # started by systemd: say at once
            systemdbinding.require()  # what is missing, not after systemd's start timeout without READY=1
        self.settings = settings
        self.log = logs.get_logger("mysqlq.worker").bind(worker=settings.worker_name)
        self.stop_requested_at: float | None = None
        # Its own statements only (a transactional handler gets another connection): it may send several
        # in one query.
        self.db = Database(settings.dsn, isolation=settings.isolation, retry=FOREVER, multi_statements=True,
                           on_pause=self._paused, stop_requested=lambda: self.stop_requested_at,
                           worker_name=settings.worker_name)
        self.metrics = worker_metrics.start(settings)  # per-worker metrics (--metrics-port); a no-op when off
        self.report = Report(self.metrics)
        self.cancels = Cancels()
        self.progress = LatestProgress()  # handlers' progress reports, written by the background thread
        runner = Runner(settings, registry or Registry(), self.log, self.cancels, self.progress)
        self.registry = runner.registry
        alarm = runner.alarm
        self.notifier = Notifier(job_deadline=lambda: alarm.deadline)  # feeds the watchdog while a job runs here
        self.limits = Limits(runner.registry, self.db, self.log)  # jobs with a concurrency key
        self.rates = Rates(runner.registry, self.db, self.log, runner.enter_by)  # jobs with a rate limit
        self.leases = Leases(settings.lease, settings.heartbeat_interval)
        self.stop = StopFlag()
        self.batches = Batches(settings, self.db, self.log, self.leases, self.cancels, self.limits, self.report,
                               self._wake_others, runner.runs)
        self.slots = Slots(settings.concurrency, settings, runner, doubtful=self.leases.doubtful)
        self.dispatcher = Dispatcher(settings, runner, self.batches, self.slots, self.leases, self.stop, self.log,
                             self._wake_others)
        # The background thread: the heartbeat, and the leader's chores when this worker leads.
        looks = threading.Event()  # set when a poll saw the election change
        self.background = BackgroundThread(settings, self.log, looks, lambda: self.stop_requested_at)
        self.heartbeat = Heartbeat(settings, self.background.db, self.log, self.leases, self._hint_entry)
        self.elector = Elector(settings, self.background.db, self.log, lambda: self.heartbeat.worker_id, looks)
        self.maintainer = Maintainer(settings, self.background.db, self.log, self.elector)
        self.background.attach([self.heartbeat, self.maintainer,
                                CancelWatch(self.background.db, self.cancels, self.log),
                                ProgressWriter(self.background.db, self.progress, lambda: self.heartbeat.worker_id)])
        self.queue_watch = QueueWatch(settings, self.db, self.elector, self.rates.changed_at, self._discarding)
        self.claimer = Claimer(settings, self.db, self.limits, self.rates, lambda: self.heartbeat.worker_id)
        self._last_status: tuple[int, int] | None = None
        self.stopping = False
        self.listener: hint.Listener | None = None
        self._wake_r, self._wake_w = os.pipe()
        self._last_watchdog = 0.0

    # ------------------------------------------------------------------ lifecycle

    def run(self) -> int:
        self._install_signals()
        try:
            return self._run()
        finally:
            self.dispatcher.close()
            signal.set_wakeup_fd(-1)
            os.close(self._wake_r)
            os.close(self._wake_w)

    def _schema_ready(self) -> bool:
        """Check the schema (a missing or other one is the CLI's one-line error). While a `mysqlq
        migrate` is at work, wait for it instead of exiting: workers started during an upgrade begin
        once it is done. False when asked to stop meanwhile."""
        waiting = False
        while True:
            try:
                self.db.run(check_schema)
                if waiting:
                    self.log.info("worker.migration_done")
                return True
            except SchemaError:
                if not self.db.run(migration_running):
                    raise
            if not waiting:
                self.log.info("worker.waiting_for_migration", note="a `mysqlq migrate` is at work; starting after it")
                logs.flush()
                waiting = True
            self.notifier.extend_start(MIGRATION_CHECK * 10, "waiting for `mysqlq migrate` to finish")
            deadline = time.monotonic() + MIGRATION_CHECK
            while time.monotonic() < deadline:
                if self.stopping:
                    return False
                time.sleep(0.1)

    def _run(self) -> int:
        exit_code = 0
        beating = False
        try:
            if not self._schema_ready():  # stopped while a migration ran
                self.log.info("worker.stopped", done=0, failed=0, exit_code=0)
                logs.flush()
                return 0
        except StopRequested as exc:
            self.log.warning("worker.stopped_waiting", error=str(exc))
            self.log.info("worker.stopped", done=0, failed=0, exit_code=0)
            logs.flush()
            return 0
        try:
            if self.settings.hint:  # before registering: the registry row says where network hints go
                try:
                    self.listener = hint.Listener(self.settings, self.log,
                                                  lambda: self.db.run(claims.newest_job_id))
                except OSError as exc:
                    self.log.warning("hint.unavailable", error=str(exc), note="polling only")
            self.registry.preload()  # now, not at the first job (which then starts sooner)
            self.maintainer.prepare(self.background.db)
            self.heartbeat.register()
            self.background.start()
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
            if beating:
                self.heartbeat.stopping = True
                self.background.stop()
                self.maintainer.release(self.db)  # another worker takes the role over at once
                self.heartbeat.unregister(self.db)
            else:
                self.background.db.close()  # it registered, or tried to
            self.db.close()
            if beating:  # a worker refused at registration never started: the CLI says why
                hinted = {"hints_postponed": self.listener.postponed} if self.listener else {}
                self.log.info("worker.stopped", done=self.report.done, failed=self.report.failed,
                              exit_code=exit_code, **hinted)
            logs.flush()
        return exit_code

    def _install_signals(self) -> None:
        def on_signal(signum: int, frame: FrameType | None) -> None:
            if self.stopping:
                os._exit(128 + signum)  # a second signal: leave now, the reaper recovers our claims
            self.stopping = True  # only record it: the loop notices between jobs
            self.stop_requested_at = time.monotonic()
            self.stop.requested = True
            self.notifier.stopping(self._status("stopping"))

        for sig in STOP_SIGNALS:
            signal.signal(sig, on_signal)
        os.set_blocking(self._wake_w, False)
        os.set_blocking(self._wake_r, False)
        signal.set_wakeup_fd(self._wake_w)

    def _run_until_stopped(self) -> int:
        """Turn until stopped (every job in flight finished, the unstarted rest released) or drained."""
        dispatcher = self.dispatcher
        while self._turn(dispatcher):
            pass
        self.batches.release_unstarted()  # what a signal during the last turn left unstarted
        self.batches.write(final_only=True)
        self.rates.log_set_aside()
        if dispatcher.stuck is not None:
            self.log.error("worker.exit_stuck", job_id=dispatcher.stuck.job.id, exit_code=EXIT_STUCK)
            return EXIT_STUCK
        return 0

    # ------------------------------------------------------------------ the loop

    def _turn(self, dispatcher: Dispatcher) -> bool:
        """One turn of the loop; False when the worker should end."""
        self._ping_watchdog()
        queue_watch = self.queue_watch
        ending = self.stopping or dispatcher.stuck is not None
        dispatcher.turn(starting=not ending)
        self._log_set_aside()
        self._act_on_findings()
        ending = self.stopping or dispatcher.stuck is not None  # the turn may have found a stuck job
        self._report()
        if ending:
            self.batches.write_held()
            self._act_on_findings()
            if not self.slots.waiting_for(time.monotonic()):
                return False
            queue_watch.stopping()
            self._wait()
            return True
        queue_watch.look()
        turn = self.rates.next_turn()  # jobs set aside for their rate limit: promote each group in its turn
        if turn is not None:
            queue_watch.due_in(turn)
        found: bool | None = False
        if queue_watch.want_claim:  # not while jobs admitted under a rate limit wait to start (None: no claim sent)
            found = None if dispatcher.entering else self._claim(dispatcher)
        if self.listener:  # a hinted wake-up costs a token only when its claim (or poll) found nothing
            self.listener.settle(found)
        self.batches.write_held()  # when no claim took its completion along
        self._act_on_findings()
        if found:
            return True
        if self.settings.burst and dispatcher.empty and not queue_watch.want_claim:
            drained = queue_watch.drained()
            if drained is not None:
                return not drained
        self._wait()
        return True

    def _log_set_aside(self) -> None:
        """Log the jobs set aside for their rate limit once no claimed job waits to start: a claim
        sets hundreds aside, and their lines must not use up the grace of the jobs it admitted."""
        if self.rates.unlogged and not self.batches.unstarted:
            self.rates.log_set_aside()

    def _act_on_findings(self) -> None:
        """What the writes found: a retry coming due, queues that gained ready jobs."""
        findings = self.batches.take_findings()
        if findings.retry_in is not None:
            self.queue_watch.due_in(findings.retry_in)
        self.queue_watch.ready_in(findings.ready)

    def _claim(self, dispatcher: Dispatcher) -> bool | None:
        """Claim what the slots can start soon (mysqlq.worker.intake.claimsize): True when jobs came (or were
        set aside, blocked by their concurrency limit), False when none did, None when no claim was sent
        (no slot free for one)."""
        settings, queue_watch, batches = self.settings, self.queue_watch, self.batches
        first = queue_watch.first_queue()
        average = dispatcher.durations.estimate(first, time.monotonic()) if first is not None else None
        limit = claim_limit(settings.concurrency, len(self.slots.free), batches.unstarted, average,
                            settings.batch_size)
        if not limit:
            return None
        # The held batch's completion rides along; if it went, its lines come first (it ended before).
        claim = self.claimer.claim(limit, queue_watch.paused, batches)
        jobs = claim.jobs
        if jobs or claim.set_aside:
            self.log.info("batch.claimed", batch_id=claim.batch_id, jobs=len(jobs))
        queue_watch.claimed(full=len(jobs) >= limit, set_aside=claim.set_aside, found=bool(jobs) or claim.set_aside)
        if claim.due_in is not None:  # jobs set aside for their rate limit: promote the first in its turn
            queue_watch.due_in(claim.due_in)
        if not jobs:
            self._log_set_aside()
            return claim.set_aside
        spans = dispatcher.runner.spans
        if spans is not None:
            spans.claimed(jobs, claim.batch_id, claim.claimed_at)
        batches.add(claim, unsized=average is None)
        if dispatcher.runner.enter_by:  # jobs admitted under a rate limit: started now, within their grace
            dispatcher.dispatch()
        self._log_set_aside()
        self._report()
        return True

    def _report(self) -> None:
        """STATUS= says how many slots are busy (or which batch runs on the main thread), whenever that changes."""
        busy, batches = self.slots.busy, self.batches
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
        timeout = self.queue_watch.timeout()
        if self.notifier.watchdog_interval is not None:
            timeout = min(timeout, self.notifier.watchdog_interval)
        sources: list[Any] = [self._wake_r, self.slots]  # the slots: readable when a job returns
        if self.listener:
            sources += self.listener.sockets
            postponed = self.listener.deferred_for()  # a hinted wake-up waiting for the rate bound
            if postponed is not None:
                timeout = min(timeout, postponed)
        deadline = self.dispatcher.deadline()
        if deadline is not None:
            timeout = min(timeout, deadline - time.monotonic())
        with self.metrics.waiting():
            readable, _, _ = select.select(sources, [], [], max(0.0, timeout))
        if self._wake_r in readable:
            with contextlib.suppress(BlockingIOError):
                os.read(self._wake_r, 512)
        if self.listener:
            self.queue_watch.hinted(self.listener.wake(readable, self.settings.queues, self.queue_watch.paused))

    def _ping_watchdog(self) -> None:
        period = self.notifier.watchdog_interval
        if period is not None and time.monotonic() - self._last_watchdog >= period / 2:
            self._last_watchdog = time.monotonic()
            self.notifier.watchdog()

    def _discarding(self, queues: frozenset[str]) -> None:
        """The last poll's word on which of our queues keep no history: their done jobs are deleted by
        the completions of batches claimed from now on (and by transactional handlers' own)."""
        self.batches.discard_done = self.dispatcher.runner.discard_done = queues

    def _paused(self) -> None:
        """While the database is down the loop is alive, only waiting: feed the watchdog, show the log."""
        self._ping_watchdog()
        logs.flush()

    def _wake_others(self, queues: Iterable[str]) -> None:
        hint.notify(self.settings, queues)

    def _hint_entry(self) -> tuple[str | None, bytes | None]:
        """Where producers on other hosts send this worker's hints, and the key they sign with."""
        return self.listener.registry_entry if self.listener else (None, None)

    def _status(self, doing: str) -> str:
        return (f"{doing}; {self.report.done} done, {self.report.failed} failed; "
                f"queues {','.join(self.settings.queues)}")
