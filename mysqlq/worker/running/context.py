"""What a handler receives besides its payload."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, NamedTuple, NoReturn

from mysqlq.core import logs
from mysqlq.core.errors import JobCancelled, Snooze
from mysqlq.core.jobs import ClaimedJob, Parent
from mysqlq.store.db import Connection
from mysqlq.worker.running.progress import LatestProgress, checked


class WorkerShared(NamedTuple):
    """What every job of a worker shares: the worker's name, the logger ``ctx.log`` binds, how the
    jobs a job was enqueued after are read, and where progress reports go."""

    worker: str
    log: Any = None
    read_parents: Callable[[int], list[Parent]] | None = None
    progress: LatestProgress | None = None


class JobContext:
    """The running job: its id, attempt, queue, a logger bound to it, whether it was cancelled and, for
    transactional handlers, the connection whose open transaction also completes the job; for a job
    enqueued after others (``after=``, a group's callback, a chain's step), those jobs and their results."""

    # Made by the worker for every job: three slots are set, the others on first use.
    __slots__ = ("_cancelled", "_job", "_log", "_parents", "_shared", "conn")
    _cancelled: bool
    _log: Any
    _parents: list[Parent]

    def __init__(self, job: ClaimedJob, shared: WorkerShared, conn: Connection | None = None) -> None:
        self._job = job  # the fields are read from the claimed row when asked for
        self._shared = shared
        self.conn = conn

    @property
    def worker(self) -> str:
        """The name of the worker running the job (``host:pid``, or the systemd instance)."""
        return self._shared.worker

    @property
    def cancelled(self) -> bool:
        """Set (from another thread) when the job was cancelled while it ran (``mysqlq cancel``): a
        long handler checks it between steps, or calls stop_if_cancelled()."""
        try:
            return self._cancelled
        except AttributeError:
            return False

    @property
    def job_id(self) -> int:
        return self._job.id

    @property
    def attempt(self) -> int:
        """1 on the first run, 2 on the first retry, …"""
        return self._job.attempt

    @property
    def max_attempts(self) -> int:
        return self._job.max_attempts

    @property
    def queue(self) -> str:
        return self._job.queue

    @property
    def handler(self) -> str:
        return self._job.handler

    @property
    def log(self) -> Any:
        """A structlog logger bound to this job (made on first use: most handlers never log); in an
        application that runs a worker itself, a logger of the ``logging`` module's records."""
        try:
            return self._log
        except AttributeError:
            self._log = logs.for_handler(self._shared.log, job_id=self.job_id, handler=self.handler,
                                         attempt=self.attempt, queue=self.queue)
            return self._log

    @property
    def parents(self) -> list[Parent]:
        """The jobs this job was enqueued after (its group's members, its chain's previous step), in id
        order, each with ``id``, ``status`` and ``result`` (what its handler returned). Empty for a job
        enqueued without ``after``. Read from the database on first use."""
        try:
            return self._parents
        except AttributeError:
            read = self._shared.read_parents
            self._parents = read(self.job_id) if read is not None else []
            return self._parents

    @property
    def parent_result(self) -> Any:
        """The result of the one job this job was enqueued after (a chain's previous step); ValueError
        for a job with no parent or with several (read ``parents`` then)."""
        parents = self.parents
        if len(parents) != 1:
            raise ValueError(f"job {self.job_id} has {len(parents)} parents, not one: read ctx.parents")
        return parents[0].result

    def progress(self, fraction: float, note: str | None = None) -> None:
        """Report how far the job has got: ``fraction`` from 0 to 1 and a short note ("step 2 of 5"),
        shown by `mysqlq jobs show` and the dashboard. Cheap: the worker writes the latest report of a
        job at most once a second, so a handler may call it in a loop."""
        fraction, note = checked(fraction, note)
        board = self._shared.progress
        if board is not None:
            board.report(self._job.id, fraction, note)

    def snooze(self, seconds: float) -> NoReturn:
        """End this run without failing: the job runs again ``seconds`` from now, its attempt not spent
        (raises :class:`mysqlq.Snooze`)."""
        raise Snooze(seconds)

    def stop_if_cancelled(self) -> None:
        """Raise JobCancelled if the job was cancelled: the job ends cancelled, not failed or retried."""
        if self.cancelled:
            raise JobCancelled(f"job {self.job_id} was cancelled")

    def cancel(self) -> None:
        self._cancelled = True

    def __repr__(self) -> str:
        return (f"JobContext(job_id={self.job_id}, attempt={self.attempt}, queue={self.queue!r}, "
                f"handler={self.handler!r})")
