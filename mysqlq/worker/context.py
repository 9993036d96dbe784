"""What a handler receives besides its payload."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from mysqlq.core import logs
from mysqlq.core.errors import JobCancelled
from mysqlq.core.jobs import ClaimedJob, Parent
from mysqlq.store.db import Connection


class JobContext:
    """The running job: its id, attempt, queue, a logger bound to it, whether it was cancelled and, for
    transactional handlers, the connection whose open transaction also completes the job; for a job
    enqueued after others (``after=``, a group's callback, a chain's step), those jobs and their results."""

    __slots__ = ("_job", "_log", "_parents", "base_log", "cancelled", "conn", "read_parents", "worker")

    def __init__(self, job: ClaimedJob, worker: str, conn: Connection | None = None, base_log: Any = None,
                 read_parents: Callable[[int], list[Parent]] | None = None) -> None:
        self._job = job  # made for every job: the fields are read from the claimed row when asked for
        self.worker = worker
        self.conn = conn
        self.base_log = base_log
        self.read_parents = read_parents
        self._log: Any = None
        self._parents: list[Parent] | None = None
        # Set (from another thread) when the job was cancelled while it ran (``mysqlq cancel``): a
        # long handler checks it between steps, or calls stop_if_cancelled().
        self.cancelled = False

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
        if self._log is None:
            self._log = logs.for_handler(self.base_log, job_id=self.job_id, handler=self.handler,
                                         attempt=self.attempt, queue=self.queue)
        return self._log

    @property
    def parents(self) -> list[Parent]:
        """The jobs this job was enqueued after (its group's members, its chain's previous step), in id
        order, each with ``id``, ``status`` and ``result`` (what its handler returned). Empty for a job
        enqueued without ``after``. Read from the database on first use."""
        if self._parents is None:
            self._parents = self.read_parents(self.job_id) if self.read_parents is not None else []
        return self._parents

    @property
    def parent_result(self) -> Any:
        """The result of the one job this job was enqueued after (a chain's previous step); ValueError
        for a job with no parent or with several (read ``parents`` then)."""
        parents = self.parents
        if len(parents) != 1:
            raise ValueError(f"job {self.job_id} has {len(parents)} parents, not one: read ctx.parents")
        return parents[0].result

    def stop_if_cancelled(self) -> None:
        """Raise JobCancelled if the job was cancelled: the job ends cancelled, not failed or retried."""
        if self.cancelled:
            raise JobCancelled(f"job {self.job_id} was cancelled")

    def cancel(self) -> None:
        self.cancelled = True

    def __repr__(self) -> str:
        return (f"JobContext(job_id={self.job_id}, attempt={self.attempt}, queue={self.queue!r}, "
                f"handler={self.handler!r})")
