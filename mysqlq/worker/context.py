"""What a handler receives besides its payload."""

from __future__ import annotations

from typing import Any

from mysqlq.core.errors import JobCancelled
from mysqlq.store.db import Connection


class JobContext:
    """The running job: its id, attempt, queue, a logger bound to it, whether it was cancelled and, for
    transactional handlers, the connection whose open transaction also completes the job."""

    __slots__ = ("_log", "attempt", "base_log", "cancelled", "conn", "handler", "job_id", "max_attempts", "queue",
                 "worker")

    def __init__(self, job_id: int, attempt: int, max_attempts: int, queue: str, handler: str, worker: str,
                 conn: Connection | None = None, base_log: Any = None) -> None:
        self.job_id = job_id
        self.attempt = attempt
        self.max_attempts = max_attempts
        self.queue = queue
        self.handler = handler
        self.worker = worker
        self.conn = conn
        self.base_log = base_log
        self._log: Any = None
        # Set (from another thread) when the job was cancelled while it ran (``mysqlq cancel``): a
        # long handler checks it between steps, or calls stop_if_cancelled().
        self.cancelled = False

    @property
    def log(self) -> Any:
        """A structlog logger bound to this job (made on first use: most handlers never log)."""
        if self._log is None:
            self._log = self.base_log.bind(job_id=self.job_id, handler=self.handler, attempt=self.attempt,
                                           queue=self.queue)
        return self._log

    def stop_if_cancelled(self) -> None:
        """Raise JobCancelled if the job was cancelled: the job ends cancelled, not failed or retried."""
        if self.cancelled:
            raise JobCancelled(f"job {self.job_id} was cancelled")

    def cancel(self) -> None:
        self.cancelled = True

    def __repr__(self) -> str:
        return (f"JobContext(job_id={self.job_id}, attempt={self.attempt}, queue={self.queue!r}, "
                f"handler={self.handler!r})")
