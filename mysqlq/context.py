"""What a handler receives besides its payload."""

from __future__ import annotations

from dataclasses import dataclass, field
from functools import cached_property
from typing import Any

from .db import Connection


@dataclass(frozen=True)
class JobContext:
    """The running job: its id, attempt, queue, a logger bound to it and, for transactional
    handlers, the connection whose open transaction also completes the job."""

    job_id: int
    attempt: int
    max_attempts: int
    queue: str
    handler: str
    worker: str
    conn: Connection | None = None
    base_log: Any = field(default=None, repr=False)

    @cached_property
    def log(self) -> Any:
        """A structlog logger bound to this job (made on first use: most handlers never log)."""
        return self.base_log.bind(job_id=self.job_id, handler=self.handler, attempt=self.attempt, queue=self.queue)
