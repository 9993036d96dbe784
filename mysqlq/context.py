"""What a handler receives besides its payload."""

from __future__ import annotations

from dataclasses import dataclass
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
    log: Any
    conn: Connection | None = None
