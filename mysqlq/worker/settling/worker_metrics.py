"""Per-worker Prometheus metrics (``--metrics-port``): what only a worker knows about its jobs.

The worker calls three methods: ``start`` once, ``outcome`` per finished job and ``waiting`` around
its idle wait. Without ``--metrics-port`` they are no-ops, so the loop pays one empty call per job.
"""

from __future__ import annotations

import contextlib
import time
from collections.abc import Iterator
from contextlib import AbstractContextManager
from typing import TYPE_CHECKING

from mysqlq.core.addresses import port_number, split_host_port
from mysqlq.core.errors import ConfigError

if TYPE_CHECKING:
    from prometheus_client import Counter, Histogram

    from mysqlq.core.config import Settings
    from mysqlq.core.jobs import ClaimedJob
    from mysqlq.worker.settling.outcomes import Outcome

# Seconds: from no-op handlers (a millisecond) to the default time limit (300 s).
DURATION_BUCKETS = (0.001, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60, 120, 300, float("inf"))


def parse_listen(value: str) -> tuple[str, int]:
    """``PORT`` (on 127.0.0.1) or ``HOST:PORT`` → (host, port); ConfigError naming the option otherwise."""
    parts = split_host_port(value, "last colon") if ":" in value else ("127.0.0.1", value)
    host, port = parts or ("", "")
    number = port_number(port)
    if not host or number is None:
        raise ConfigError(f"--metrics-port must be PORT or HOST:PORT (e.g. 9101 or 0.0.0.0:9101), got {value!r}")
    return host, number


class NoMetrics:
    """What the worker holds when metrics are off: every call does nothing."""

    _idle = contextlib.nullcontext()

    def outcome(self, job: ClaimedJob, outcome: Outcome) -> None:
        pass

    def waiting(self) -> AbstractContextManager[None]:
        return self._idle


class WorkerMetrics(NoMetrics):
    """Counts outcomes, times jobs per handler and the loop's waiting vs working, on a registry of its own."""

    def __init__(self, worker: str, queues: str) -> None:
        # Imported here: a worker without --metrics-port does not pay for the client's import at start.
        from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram

        self.registry = CollectorRegistry(auto_describe=True)
        self.duration = Histogram("mysqlq_worker_job_duration_seconds", "Time a handler ran, per queue and handler.",
                                  ["queue", "handler"], buckets=DURATION_BUCKETS, registry=self.registry)
        self.jobs = Counter("mysqlq_worker_jobs", "Jobs this worker finished, per queue, handler and outcome "
                            "(done, failed: retried later, dead, lost: its claim was taken over).",
                            ["queue", "handler", "outcome"], registry=self.registry)
        self.seconds = Counter("mysqlq_worker_seconds", "Time the worker spent waiting for work (idle) and "
                               "working (running handlers).", ["state"], registry=self.registry)
        info = Gauge("mysqlq_worker_info", "Always 1; names the worker and its queues.", ["worker", "queues"],
                     registry=self.registry)
        info.labels(worker, queues).set(1)
        self._waited = self.seconds.labels("waiting")
        self._worked = self.seconds.labels("working")
        # Label lookups take a lock; the children are kept per (queue, handler) so a job costs dict reads.
        self._children: dict[tuple[str, str], tuple[Histogram, dict[str, Counter]]] = {}

    def outcome(self, job: ClaimedJob, outcome: Outcome) -> None:
        key = (job.queue, job.handler)
        children = self._children.get(key)
        if children is None:
            children = self._children[key] = (self.duration.labels(*key), {})
        histogram, counters = children
        kind = outcome.kind
        if kind == "failed" and job.attempt >= job.max_attempts:
            kind = "dead"  # its last attempt: the job is dead, as the worker's log line says
        counter = counters.get(kind)
        if counter is None:
            counter = counters[kind] = self.jobs.labels(job.queue, job.handler, kind)
        counter.inc()
        histogram.observe(outcome.duration)
        self._worked.inc(outcome.duration)

    @contextlib.contextmanager
    def _timed_wait(self) -> Iterator[None]:
        started = time.monotonic()
        try:
            yield
        finally:
            self._waited.inc(time.monotonic() - started)

    def waiting(self) -> AbstractContextManager[None]:
        return self._timed_wait()


def start(settings: Settings) -> NoMetrics:
    """Serve this worker's metrics on ``settings.metrics_listen`` (a background thread), or do nothing."""
    if settings.metrics_listen is None:
        return NoMetrics()
    from prometheus_client import start_http_server

    host, port = parse_listen(settings.metrics_listen)
    metrics = WorkerMetrics(settings.worker_name, ",".join(settings.queues))
    try:
        start_http_server(port, host, registry=metrics.registry)
    except OSError as exc:
        raise ConfigError(f"cannot serve worker metrics on {host}:{port}: {exc.strerror or exc}") from None
    return metrics
