"""Group commit: enqueues that arrive while a commit of the same producer is in flight are written
together as soon as it ends, in one multi-row INSERT and one commit (mysqlq.store.grouped), and each
caller is told its own job's id once that commit is done.

There is no timer. A lone enqueue finds no commit in flight and commits at once, on its own thread,
as it always did. One that comes while a commit is in flight waits for that commit, not for a clock:
as soon as a commit ends, everything that came meanwhile is sent as the next group (natural
batching, as a database's own group commit). An ``aenqueue`` waits without a thread: its job joins
the same groups.

The groups are written by one thread of the producer's, which keeps up to IN_FLIGHT of them in
flight, each on a connection of its own that takes several statements per query (a group is one
query). As soon as a group's answer comes, the next group goes out on that connection, and only then
are the answered group's callers woken: the server works while Python wakes them.
"""

from __future__ import annotations

import contextlib
import threading
from collections import deque
from collections.abc import Callable, Sequence
from functools import partial
from typing import TYPE_CHECKING, Any

import MySQLdb

from mysqlq import hint
from mysqlq.core.config import Settings
from mysqlq.producer import pool as pools
from mysqlq.store import grouped
from mysqlq.store import jobs as store
from mysqlq.store.db import CLI_RETRY, Connection, Database, is_transient
from mysqlq.store.schema import check_schema

if TYPE_CHECKING:
    import asyncio

QUEUE = store.NAMES.index("queue")
PAYLOAD = store.NAMES.index("payload")
IN_FLIGHT = 2  # commits of one producer in flight at most: while one waits for the log, the next is sent
MAX_ROWS = 32  # jobs in one group at most: an async caller's rows are made and rendered holding the GIL
MAX_BYTES = 4 * 1024 * 1024  # nor more payload than this in one group (well under max_allowed_packet)


class _Entry:
    """One caller's job in a group: its row (or, for an async caller, what makes it on the writer's
    thread), and how the caller is told the outcome."""

    __slots__ = ("delay", "error", "future", "job_id", "loop", "make", "row", "waiting")

    def __init__(self, row: Sequence[Any] | None, delay: float, make: Callable[[], Sequence[Any]] | None = None,
                 loop: asyncio.AbstractEventLoop | None = None, future: asyncio.Future[int] | None = None) -> None:
        self.row = row
        self.delay = delay
        self.make = make
        self.loop = loop
        self.future = future
        self.job_id = 0
        self.error: BaseException | None = None
        self.waiting: threading.Lock | None = None  # held until the outcome is known (a waiting thread)
        if future is None:
            self.waiting = threading.Lock()
            self.waiting.acquire()


class _InFlight:
    """A group sent on a writer's connection, its answer not yet read."""

    __slots__ = ("db", "entries", "group", "rows", "sent")

    def __init__(self, db: Database, group: list[_Entry], entries: list[_Entry], rows: list[Sequence[Any]],
                 sent: grouped.SentGroup | None) -> None:
        self.db = db
        self.group = group  # every caller of the group (the refused ones too)
        self.entries = entries  # those whose rows were sent
        self.rows = rows
        self.sent = sent  # None: not sent (sending failed), to be written with retries


class GroupCommit:
    """A producer's plain enqueues (no tags, ``after``, fairness key or period key), grouped."""

    def __init__(self, settings: Settings, renderer: store.RowRenderer, hints: hint.Sender,
                 in_flight: int = IN_FLIGHT) -> None:
        self.settings = settings
        self.renderer = renderer
        self.hints = hints
        self.in_flight = in_flight
        self._reset()

    def _reset(self) -> None:
        # In a forked child the parent's connections must be neither used nor closed, a lock held by
        # one of the parent's threads at the fork would never be released, and its writer is gone.
        self._forks = pools.forks()
        self._lock = threading.Lock()
        self._wanted = threading.Condition(self._lock)  # the writer waits here for jobs to send
        self._busy = 0  # connections in use: a lone enqueue's, or a group's in flight
        self._pending: list[_Entry] = []
        self._idle: list[Database] = []  # the connections not in use
        self._writer: threading.Thread | None = None
        self._closed = False

    def _connection(self) -> Database:
        """An idle connection, or a new one (under the lock, counted busy by the caller)."""
        if self._idle:
            return self._idle.pop()
        return Database(self.settings.dsn, retry=CLI_RETRY, on_connect=_check, multi_statements=True)

    def insert(self, row: Sequence[Any], delay: float) -> int:
        """Enqueue ``row`` (made on the caller's thread, so checked and with the caller's trace context);
        returns its id once committed. Raises what the commit of its group raised."""
        if self._forks != pools.forks():
            self._reset()
        with self._lock:
            db = None
            if self._busy < self.in_flight and not self._pending:
                self._busy += 1
                db = self._connection()
            else:
                entry = _Entry(row, delay)
                self._pending.append(entry)
                self._wake()
        if db is not None:  # nothing waits: at once, on the shortest path
            try:
                job_id = db.run_on(partial(store.insert_rendered, row=row, renderer=self.renderer))
            finally:
                with self._lock:
                    self._busy -= 1
                    self._idle.append(db)
                    if self._pending:
                        self._wake()
            self.hints.notify((row[QUEUE],), delay)
            return job_id
        assert entry.waiting is not None
        entry.waiting.acquire()  # released once its group's outcome is known
        if entry.error is not None:
            raise entry.error
        return entry.job_id

    def submit(self, make: Callable[[], Sequence[Any]], delay: float) -> asyncio.Future[int]:
        """Enqueue, from an event loop, the row ``make()`` makes (on the writer's thread: run it in the
        caller's context); the future holds the job's id once committed, or the error that ``make`` or
        the commit raised."""
        import asyncio  # loaded already: only async callers come here

        if self._forks != pools.forks():
            self._reset()
        loop = asyncio.get_running_loop()
        future: asyncio.Future[int] = loop.create_future()
        with self._lock:
            self._pending.append(_Entry(None, delay, make, loop, future))
            self._wake()
        return future

    def _wake(self) -> None:
        """(Under the lock, with jobs pending.) Wake the writer, or start it."""
        if self._writer is None:
            self._closed = False
            self._writer = threading.Thread(target=self._write, name="mysqlq-group-commit", daemon=True)
            self._writer.start()
        else:
            self._wanted.notify()

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

    def _write(self) -> None:
        """The writer's thread: send each group as soon as a connection is free for it, read the answers
        oldest first; after each answer, send the next group before telling the answered one's callers."""
        flying: deque[_InFlight] = deque()
        try:
            self._writing(flying)
        except BaseException as exc:  # a bug of its own: no caller may wait for ever
            with self._lock:
                stranded, self._pending = [entry for flight in flying for entry in flight.group] + self._pending, []
                self._busy -= len(flying)
                self._writer = None
            for flight in flying:  # in no known state: opened anew when next needed
                flight.db.close()
            for entry in stranded:
                entry.error = exc
            _tell(stranded)
            raise

    def _writing(self, flying: deque[_InFlight]) -> None:
        while True:
            with self._lock:
                while not flying and not (self._pending and self._busy < self.in_flight):
                    if self._closed:
                        self._writer = None
                        return
                    self._wanted.wait()
                group, db = [], None
                if self._pending and self._busy < self.in_flight:
                    self._busy += 1
                    db = self._connection()
                    group = self._take()
            if db is not None:
                flying.append(self._send(group, db))
                if len(flying) < self.in_flight:
                    continue  # another group may go out before the oldest answer is read
            answered = flying.popleft()
            self._receive(answered)
            with self._lock:
                self._busy -= 1
                self._idle.append(answered.db)
                if self._pending and self._busy < self.in_flight:  # the next group, before the wake-ups
                    self._busy += 1
                    db = self._connection()
                    group = self._take()
                else:
                    db = None
            if db is not None:
                flying.append(self._send(group, db))
            _tell(answered.group)
            self._hint(answered.entries)

    def _send(self, group: list[_Entry], db: Database) -> _InFlight:
        """Make the group's rows (an async caller's bad input is refused here, to that caller alone) and
        send them in one query, without waiting for the answer."""
        entries: list[_Entry] = []
        rows: list[Sequence[Any]] = []
        for entry in group:
            if entry.make is not None:
                try:
                    entry.row = entry.make()
                except Exception as exc:
                    entry.error = exc
                    continue
            assert entry.row is not None
            entries.append(entry)
            rows.append(entry.row)
        sent = None
        if rows:
            try:
                sent = grouped.send_group(db.conn, rows, self.renderer)
            except Exception:  # not connected, or the connection is gone: written with retries instead
                db.close()
        return _InFlight(db, group, entries, rows, sent)

    def _receive(self, flight: _InFlight) -> None:
        """The group's outcome: each caller's id, or the error every caller of it hears (nothing of it
        written). A transient failure (a deadlock, a lost certification, a lost connection) is retried
        for the whole group, as a single enqueue's is."""
        if not flight.rows:
            return
        try:
            if flight.sent is None:
                ids = flight.db.run_on(partial(grouped.insert_group, rows=flight.rows, renderer=self.renderer))
            else:
                try:
                    ids = flight.sent.receive()
                except MySQLdb.Error as exc:
                    if not is_transient(exc):
                        raise
                    flight.db.close()
                    ids = flight.db.run_on(partial(grouped.insert_group, rows=flight.rows, renderer=self.renderer))
        except BaseException as exc:
            for entry in flight.entries:
                entry.error = exc
            return
        for entry, job_id in zip(flight.entries, ids, strict=True):
            entry.job_id = job_id

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
        """Close the idle connections (one in use meanwhile stays open until the next close); the writer
        leaves once nothing is in flight or pending."""
        with self._lock:
            idle, self._idle = self._idle, []
            self._closed = True
            self._wanted.notify()
        for db in idle:
            db.close()


def _tell(group: list[_Entry]) -> None:
    """Wake the group's waiting threads, and settle its async callers' futures (one call into each loop)."""
    loops: dict[asyncio.AbstractEventLoop, list[_Entry]] = {}
    for entry in group:
        if entry.waiting is not None:
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
