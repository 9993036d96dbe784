"""The spans a traced worker's jobs ran in, from the start of a run until its outcome is written.

A job that others wait for (a group's member, a chain's step) ends in a transaction that releases
them (mysqlq.store.dependencies); a worker that traces writes there, too, the span the job ran in, so
that the span of a job that waited for it links to its run (mysqlq.worker.running.job_spans). Which jobs have
dependents is known only when their outcome is written: every run's span is noted here when it
starts, and forgotten when its outcome is written. A worker that does not trace notes nothing.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import TYPE_CHECKING

from mysqlq.core.tracing import stored_context

if TYPE_CHECKING:
    from opentelemetry.trace import Span


class Runs:
    """Job id → the trace context of the span its current run is in (mysqlq.core.tracing). Written
    by the slots' threads, read and emptied by the worker's main thread: single dict operations."""

    def __init__(self) -> None:
        self._ran_in: dict[int, str] = {}

    def __bool__(self) -> bool:
        return bool(self._ran_in)

    def started(self, job_id: int, span: Span) -> None:
        """``job_id``'s run is in ``span`` (an OpenTelemetry Span)."""
        context = span.get_span_context()
        if context.is_valid:
            self._ran_in[job_id] = stored_context(context)

    def of(self, job_id: int) -> str | None:
        """The span ``job_id``'s run is in (None: none noted)."""
        return self._ran_in.get(job_id)

    def take(self, ids: Iterable[int]) -> dict[int, str]:
        """Those of ``ids`` a span was noted for, forgotten here."""
        pop = self._ran_in.pop
        return {job_id: context for job_id in ids if (context := pop(job_id, None)) is not None}
