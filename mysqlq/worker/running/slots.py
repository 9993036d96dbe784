"""N places to run jobs at once: daemon threads for ``def`` handlers, one asyncio loop for ``async def``."""

from __future__ import annotations

import concurrent.futures
import contextlib
import os
import queue
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from functools import partial
from typing import TYPE_CHECKING

import MySQLdb

from mysqlq.core.config import Settings
from mysqlq.core.errors import DatabaseUnavailable
from mysqlq.core.jobs import ClaimedJob
from mysqlq.store.db import Connection, Database
from mysqlq.worker.running.job_runner import Prepared, Runner, describe, failed
from mysqlq.worker.settling.outcomes import Outcome

if TYPE_CHECKING:
    import asyncio

STUCK_GRACE = 2.0  # seconds past its limit after which a job that has not returned counts as stuck


@dataclass(slots=True, eq=False)
class Running:
    """A job in a slot."""

    job: ClaimedJob
    batch_id: int
    slot: int
    prepared: Prepared
    deadline: float  # monotonic: the job's time limit ends here
    timed_out: bool = False  # recorded failed at its limit while its thread still ran
    outcome: Outcome | None = field(default=None)


class Slots:
    """Runs prepared jobs off the main thread and hands their outcomes back through a queue.

    Threads are daemons, made as needed up to ``size``: a handler that never returns must not
    keep the process from exiting. Transactional handlers get the connection of their slot.
    ``fileno()`` becomes readable when an outcome is waiting, so the worker can ``select`` on it.
    """

    def __init__(self, size: int, settings: Settings, runner: Runner,
                 doubtful: Callable[[int], bool] | None = None) -> None:
        self.size = size
        self.settings = settings
        self.runner = runner
        self.free = list(range(size - 1, -1, -1))  # slot numbers; pop() takes the lowest
        self.running: dict[int, Running] = {}  # by slot
        self._tasks: queue.SimpleQueue[Running | None] = queue.SimpleQueue()
        self._done: queue.SimpleQueue[Running] = queue.SimpleQueue()
        self._threads: list[threading.Thread] = []
        self._idle_threads = 0
        self._lock = threading.Lock()
        self.doubtful = doubtful  # whether a batch's lease could have lapsed
        self._dbs: dict[int, Database] = {}
        self._loop: asyncio.AbstractEventLoop | None = None
        self._wake_r, self._wake_w = os.pipe()
        os.set_blocking(self._wake_r, False)
        os.set_blocking(self._wake_w, False)

    def fileno(self) -> int:
        return self._wake_r

    @property
    def busy(self) -> int:
        return len(self.running)

    def start(self, job: ClaimedJob, batch_id: int, prepared: Prepared) -> Running:
        """Start a job in the lowest free slot (the caller checked that one is free)."""
        slot = self.free.pop()
        running = Running(job, batch_id, slot, prepared, time.monotonic() + prepared.limit)
        self.running[slot] = running
        if prepared.is_async:
            import asyncio  # only where async handlers run

            future = asyncio.run_coroutine_threadsafe(self._run_async(running), self._event_loop())
            future.add_done_callback(partial(self._finished_coroutine, running))
        else:
            self._submit(running)
        return running

    def finished(self) -> list[Running]:
        """Jobs that returned since the last call; their slots are free again."""
        with contextlib.suppress(BlockingIOError):
            os.read(self._wake_r, 4096)
        out: list[Running] = []
        while True:
            try:
                running = self._done.get_nowait()
            except queue.Empty:
                return out
            del self.running[running.slot]
            self.free.append(running.slot)
            self.free.sort(reverse=True)
            out.append(running)

    def overdue(self, now: float) -> list[Running]:
        """Thread jobs past their limit that were not yet recorded as failed."""
        return [r for r in self.running.values() if not r.timed_out and not r.prepared.is_async and now >= r.deadline]

    def stuck(self, now: float) -> list[Running]:
        """Jobs still running well past their limit (a coroutine past it means a blocked event loop)."""
        return [r for r in self.running.values() if now >= r.deadline + STUCK_GRACE]

    def waiting_for(self, now: float) -> int:
        """Jobs worth waiting for: running, and not yet past the point where they count as stuck."""
        return sum(1 for r in self.running.values() if now < r.deadline + STUCK_GRACE)

    def next_deadline(self, now: float) -> float | None:
        """The next moment a running job passes its limit or becomes stuck (past ones are known)."""
        deadlines = [r.deadline + (STUCK_GRACE if r.timed_out or r.prepared.is_async else 0.0)
                     for r in self.running.values()]
        future = [deadline for deadline in deadlines if deadline > now]
        return min(future) if future else None

    def close(self) -> None:
        """Stop idle threads and the event loop; connections of the slots are closed."""
        for _ in self._threads:
            self._tasks.put(None)
        if self._loop is not None:
            self._loop.call_soon_threadsafe(self._loop.stop)
        for db in self._dbs.values():
            db.close()
        os.close(self._wake_r)  # a thread finishing late finds its write refused (and ignores it)
        os.close(self._wake_w)

    # ------------------------------------------------------------------ on other threads

    def _finish(self, running: Running, outcome: Outcome) -> None:
        running.outcome = outcome
        self._done.put(running)
        with contextlib.suppress(OSError):  # full (a wake-up is pending anyway), or closed at exit
            os.write(self._wake_w, b"x")

    def _finished_coroutine(self, running: Running, future: concurrent.futures.Future[Outcome]) -> None:
        self._finish(running, future.result())

    def _submit(self, running: Running) -> None:
        with self._lock:
            spawn = self._idle_threads == 0 and len(self._threads) < self.size
            if not spawn:
                self._idle_threads -= 1
        if spawn:
            thread = threading.Thread(target=self._thread_loop, name=f"mysqlq-slot-{len(self._threads)}",
                                      daemon=True)
            self._threads.append(thread)
            thread.start()
        self._tasks.put(running)

    def _thread_loop(self) -> None:
        while True:
            running = self._tasks.get()
            if running is None:
                return
            try:
                outcome = self._call(running)
            except BaseException as exc:
                outcome = failed(exc, running.prepared.started)
            with self._lock:
                self._idle_threads += 1
            self._finish(running, outcome)

    def _call(self, running: Running) -> Outcome:
        # Handed over before a freeze (SIGSTOP, a long GC pause, swapping) but begun only after it:
        # if the claim's lease could have lapsed meanwhile, another worker may own the job now.
        if self.doubtful is not None and self.doubtful(running.batch_id):
            return Outcome("release", 0.0, "the claim's lease may have lapsed before the job began; not run")
        conn = self._slot_connection(running)
        if isinstance(conn, Outcome):
            return conn
        return self.runner.call(running.prepared, running.batch_id, conn)

    def _slot_connection(self, running: Running) -> Connection | Outcome | None:
        """The slot's own connection for a transactional handler (None for others), or the
        ``release`` outcome when the database cannot be reached: the job goes back unspent."""
        if not running.prepared.transactional:
            return None
        try:
            return self._connection(running.slot)
        except (DatabaseUnavailable, MySQLdb.Error) as exc:
            return Outcome("release", 0.0, describe(exc))

    def _connection(self, slot: int) -> Connection:
        with self._lock:
            db = self._dbs.get(slot)
            if db is None:
                db = self._dbs[slot] = Database(self.settings.dsn, isolation=self.settings.isolation,
                                                worker_name=self.settings.worker_name)
        return db.conn

    def drop_connection(self, slot: int) -> None:
        """After a database failure under a slot's transaction: the next job reconnects."""
        db = self._dbs.get(slot)
        if db is not None:
            db.close()

    async def _run_async(self, running: Running) -> Outcome:
        conn = self._slot_connection(running)
        if isinstance(conn, Outcome):
            return conn
        try:
            return await self.runner.run_async(running.prepared, running.batch_id, conn)
        except BaseException as exc:
            return failed(exc, running.prepared.started)

    def _event_loop(self) -> asyncio.AbstractEventLoop:
        if self._loop is None:
            import asyncio

            loop = asyncio.new_event_loop()
            ready = threading.Event()

            def serve() -> None:
                asyncio.set_event_loop(loop)
                loop.call_soon(ready.set)
                loop.run_forever()

            threading.Thread(target=serve, name="mysqlq-async", daemon=True).start()
            ready.wait()
            self._loop = loop
        return self._loop

