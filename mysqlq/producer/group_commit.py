"""Group commit: enqueues that arrive while a commit of the same producer is in flight are written
together as soon as it ends, in one multi-row INSERT and one commit (mysqlq.store.grouped), and each
caller is told its own job's id once that commit is done.

There is no timer. A lone enqueue finds no commit in flight and commits at once, on its own thread,
as it always did. Only while one is in flight do the others wait, and they wait for that commit,
not for a clock: then the first thread among them writes all that came (natural batching, as a
database's own group commit). An ``aenqueue`` waits without a thread: its job joins the same
groups, and a group of async callers alone is written on one of the producer's threads.

At most one commit of a producer is in flight, on a connection of its own that takes several
statements per query (the group's INSERT, its check and its COMMIT go out in two round trips).
"""

from __future__ import annotations

import contextlib
import threading
from collections.abc import Callable, Sequence
from functools import partial
from typing import TYPE_CHECKING, Any

from mysqlq import hint
from mysqlq.core.config import Settings
from mysqlq.producer import pool as pools
from mysqlq.store import grouped
from mysqlq.store import jobs as store
from mysqlq.store.db import CLI_RETRY, Connection, Database
from mysqlq.store.schema import check_schema

if TYPE_CHECKING:
    import asyncio

    from mysqlq.producer.offload import Offload

QUEUE = store.NAMES.index("queue")
PAYLOAD = store.NAMES.index("payload")
IN_FLIGHT = 2  # commits of one producer in flight at most: while one waits for the disk, the next is sent
MAX_ROWS = 32  # jobs in one group at most: an async caller's rows are made and rendered holding the GIL
MAX_BYTES = 4 * 1024 * 1024  # nor more payload than this in one group (well under max_allowed_packet)


class _Entry:
    """One caller's job in a group: its row (or, for an async caller, what makes it on the writer's
    thread), and how the caller is told the outcome."""

    __slots__ = ("delay", "error", "future", "job_id", "lead", "loop", "make", "row", "waiting")

    def __init__(self, row: Sequence[Any] | None, delay: float, make: Callable[[], Sequence[Any]] | None = None,
                 loop: asyncio.AbstractEventLoop | None = None, future: asyncio.Future[int] | None = None) -> None:
        self.row = row
        self.delay = delay
        self.make = make
        self.loop = loop
        self.future = future
        self.job_id = 0
        self.error: BaseException | None = None
        self.lead: tuple[list[_Entry], Database] | None = None  # a group this waiting thread is to write
        self.waiting: threading.Lock | None = None  # held until the thread may go on (sync callers)
        if future is None:
            self.waiting = threading.Lock()
            self.waiting.acquire()


class GroupCommit:
    """A producer's plain enqueues (no tags, ``after``, fairness key or period key), grouped."""

    def __init__(self, settings: Settings, renderer: store.RowRenderer, hints: hint.Sender, offload: Offload,
                 in_flight: int = IN_FLIGHT) -> None:
        self.settings = settings
        self.renderer = renderer
        self.hints = hints
        self.offload = offload
        self.in_flight = in_flight
        self._reset()

    def _reset(self) -> None:
        # In a forked child the parent's connections must be neither used nor closed, and a lock held
        # by one of the parent's threads at the fork would never be released.
        self._forks = pools.forks()
        self._lock = threading.Lock()
        self._writing = 0  # commits in flight (or about to be sent)
        self._pending: list[_Entry] = []  # only while all in_flight are: then the next group waits here
        self._idle: list[Database] = []  # the writers' connections not in use

    def _writer(self) -> Database:
        """An idle writer's connection, or a new one (under the lock, with a commit counted in flight)."""
        if self._idle:
            return self._idle.pop()
        return Database(self.settings.dsn, retry=CLI_RETRY, on_connect=_check, multi_statements=True)

    def insert(self, row: Sequence[Any], delay: float) -> int:
        """Enqueue ``row`` (made on the caller's thread, so checked and with the caller's trace context);
        returns its id once committed. Raises what the commit of its group raised."""
        if self._forks != pools.forks():
            self._reset()
        with self._lock:
            if self._writing < self.in_flight:
                self._writing += 1
                db: Database | None = self._writer()
            else:
                db = None
                entry = _Entry(row, delay)
                self._pending.append(entry)
        if db is not None:  # no commit waits: at once, on the shortest path
            try:
                job_id = db.run_on(partial(store.insert_rendered, row=row, renderer=self.renderer))
            finally:
                self._hand_over(db)
            self.hints.notify((row[QUEUE],), delay)
            return job_id
        assert entry.waiting is not None
        entry.waiting.acquire()  # released when the group is written, or when this thread is to write it
        if entry.lead is not None:
            group, db = entry.lead
            self._write(group, db, writer=entry)
        if entry.error is not None:
            raise entry.error
        return entry.job_id

    def submit(self, make: Callable[[], Sequence[Any]], delay: float) -> asyncio.Future[int]:
        """Enqueue, from an event loop, the row ``make()`` makes (on a thread: run it in the caller's
        context); the future holds the job's id once committed, or the error that ``make`` or the
        commit raised."""
        import asyncio  # loaded already: only async callers come here

        if self._forks != pools.forks():
            self._reset()
        loop = asyncio.get_running_loop()
        future: asyncio.Future[int] = loop.create_future()
        entry = _Entry(None, delay, make, loop, future)
        with self._lock:
            self._pending.append(entry)
            if self._writing == self.in_flight:
                return future
            self._writing += 1
            db = self._writer()
            group = self._take()
        self.offload.submit(self._write, group, db, None)
        return future

    def _take(self) -> list[_Entry]:
        """The next group (under the lock): the oldest pending jobs, up to MAX_ROWS and MAX_BYTES."""
        size, count = 0, 0
        for entry in self._pending:
            if count == MAX_ROWS or (count and size >= MAX_BYTES):
                break
            count += 1
            if entry.row is not None:
                size += len(entry.row[PAYLOAD])
        group, self._pending = self._pending[:count], self._pending[count:]
        return group

    def _hand_over(self, db: Database) -> None:
        """After a commit on ``db``: the next group goes to a thread waiting in it, or to one of the
        producer's threads when only async callers wait; with nothing pending, one commit less is in flight."""
        with self._lock:
            if not self._pending:
                self._writing -= 1
                self._idle.append(db)
                return
            group = self._take()
        for entry in group:
            if entry.waiting is not None:
                entry.lead = (group, db)
                entry.waiting.release()
                return
        self.offload.submit(self._write, group, db, None)

    def _write(self, group: list[_Entry], db: Database, writer: _Entry | None) -> None:
        """Write ``group`` in one transaction on ``db``, hand the next one over, then tell each caller."""
        entries: list[_Entry] = []
        rows: list[Sequence[Any]] = []
        for entry in group:
            if entry.make is not None:
                try:
                    entry.row = entry.make()
                except Exception as exc:  # bad input: refused, only this caller's, before the group is sent
                    entry.error = exc
                    continue
            assert entry.row is not None
            entries.append(entry)
            rows.append(entry.row)
        try:
            if entries:
                ids = db.run_on(partial(self._send, rows=rows))
                for entry, job_id in zip(entries, ids, strict=True):
                    entry.job_id = job_id
        except BaseException as exc:  # every caller of the group hears of it; nothing was written
            for entry in entries:
                entry.error = exc
        finally:
            self._hand_over(db)
        _tell(group, writer)
        self._hint(entries)

    def _send(self, conn: Connection, rows: list[Sequence[Any]]) -> list[int]:
        if len(rows) == 1:
            return [store.insert_rendered(conn, rows[0], self.renderer)]
        return grouped.insert_group(conn, rows, self.renderer)

    def _hint(self, entries: list[_Entry]) -> None:
        """One wake-up per group: each queue once, with the shortest delay of its jobs."""
        delays: dict[str, float] = {}
        for entry in entries:
            if entry.error is None and entry.row is not None:
                queue = entry.row[QUEUE]
                delays[queue] = min(delays.get(queue, entry.delay), entry.delay)
        for delay in set(delays.values()):
            self.hints.notify([queue for queue, its in delays.items() if its == delay], delay)

    def close(self) -> None:
        """Close the idle writers' connections (one in use meanwhile stays open until the next close)."""
        with self._lock:
            idle, self._idle = self._idle, []
        for db in idle:
            db.close()


def _tell(group: list[_Entry], writer: _Entry | None) -> None:
    """Wake the group's waiting threads, and settle its async callers' futures (one call into each loop)."""
    loops: dict[asyncio.AbstractEventLoop, list[_Entry]] = {}
    for entry in group:
        if entry.waiting is not None:
            if entry is not writer:
                entry.waiting.release()
        elif entry.loop is not None:
            loops.setdefault(entry.loop, []).append(entry)
    for loop, settled in loops.items():
        with contextlib.suppress(RuntimeError):  # a loop closed meanwhile: nobody awaits these any more
            loop.call_soon_threadsafe(_settle, settled)


def _settle(entries: list[_Entry]) -> None:
    for entry in entries:
        future = entry.future
        if future is None or future.done():  # a cancelled await: the job is enqueued all the same
            continue
        if entry.error is not None:
            future.set_exception(entry.error)
        else:
            future.set_result(entry.job_id)


def _check(conn: Connection) -> None:
    with conn.cursor() as cur:
        check_schema(cur)
