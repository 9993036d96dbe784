"""/metrics: the queues in the Prometheus text format, read from the database at each scrape."""

from __future__ import annotations

from collections.abc import Callable, Iterable
from typing import Any

import MySQLdb
from prometheus_client import CollectorRegistry, generate_latest
from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily
from prometheus_client.metrics_core import Metric
from prometheus_client.registry import Collector

from mysqlq.core import logs
from mysqlq.core.errors import MysqlqError
from mysqlq.core.jobs import ENDED
from mysqlq.web import snapshot

log = logs.get_logger("mysqlq.web")


Run = Callable[[Callable[[Any], Any]], Any]


class QueueCollector(Collector):
    """Collects the queue metrics on each scrape: a few statements on indexes, one round of them."""

    def __init__(self, run: Run, settle: float = snapshot.SETTLE) -> None:
        self.run = run
        self.finished = snapshot.FinishedCounter(settle)

    def collect(self) -> Iterable[Metric]:
        up = GaugeMetricFamily("mysqlq_up", "1 when the last scrape could read the database, else 0.")
        try:
            queues = self.run(snapshot.queues)
            workers = self.run(snapshot.workers)
            limits = self.run(snapshot.rate_limits)
            finished = self.run(self.finished.update)
        except (MysqlqError, MySQLdb.Error) as exc:
            log.warning("metrics.unavailable", error=str(exc).split("\n", 1)[0])
            up.add_metric([], 0)
            yield up
            return
        up.add_metric([], 1)
        yield up
        yield from _queue_metrics(queues, finished)
        yield from _worker_metrics(workers)
        yield from _limit_metrics(limits)


def _queue_metrics(queues: list[snapshot.QueueView], finished: dict[tuple[str, str], int]) -> Iterable[Metric]:
    jobs = GaugeMetricFamily("mysqlq_jobs", "Jobs per queue and status (statuses that are not history: "
                             "ready, scheduled, blocked, waiting, running, dead).", labels=["queue", "status"])
    oldest = GaugeMetricFamily("mysqlq_oldest_ready_job_age_seconds",
                               "How long the oldest ready job of the queue has waited (0: none ready).",
                               labels=["queue"])
    paused = GaugeMetricFamily("mysqlq_queue_paused", "1 when the queue is paused.", labels=["queue"])
    keys = GaugeMetricFamily("mysqlq_fairness_keys_waiting", "Fairness keys with ready jobs in the queue "
                             "(0: none, or no keyed jobs).", labels=["queue"])
    ended = CounterMetricFamily("mysqlq_jobs_finished", "Jobs that ended done, dead or cancelled since this "
                                "exporter started.", labels=["queue", "status"])
    names = {view.name for view in queues} | {queue for queue, _ in finished}
    for view in queues:
        for status, count in view.counts.items():
            jobs.add_metric([view.name, status], count)
        oldest.add_metric([view.name], view.oldest_ready_age or 0.0)
        paused.add_metric([view.name], 1 if view.paused else 0)
        keys.add_metric([view.name], view.backlog.keys)
    for queue in sorted(names):
        for status in ENDED:
            ended.add_metric([queue, status], finished.get((queue, status), 0))
    return [jobs, oldest, paused, keys, ended]


def _worker_metrics(workers: list[dict[str, Any]]) -> Iterable[Metric]:
    alive = GaugeMetricFamily("mysqlq_workers_alive", "Registered workers whose heartbeat is younger than "
                              "their own lease (the reaper's test).")
    registered = GaugeMetricFamily("mysqlq_workers_registered", "Workers in the registry, alive or not.")
    heartbeat = GaugeMetricFamily("mysqlq_worker_heartbeat_age_seconds", "Seconds since the worker's last "
                                  "heartbeat.", labels=["worker"])
    running = GaugeMetricFamily("mysqlq_worker_jobs_running", "Jobs the worker holds now.", labels=["worker"])
    alive.add_metric([], sum(1 for row in workers if row["heartbeat_age"] * 1e6 < row["lease_us"]))
    registered.add_metric([], len(workers))
    for row in workers:
        name = f"{row['name']}#{row['id']}" if sum(w["name"] == row["name"] for w in workers) > 1 else row["name"]
        heartbeat.add_metric([name], row["heartbeat_age"])
        running.add_metric([name], int(row["running"]))
    return [alive, registered, heartbeat, running]


def _limit_metrics(limits: list[snapshot.LimitView]) -> Iterable[Metric]:
    recent = GaugeMetricFamily("mysqlq_rate_limited_starts_last_minute", "Jobs of a rate limit (a handler's, "
                               "over its rate keys, or a queue's) that started in the last minute.", labels=["limit"])
    waiting = GaugeMetricFamily("mysqlq_rate_limited_jobs_waiting", "Jobs over their rate limit, waiting for "
                                "their turn.", labels=["limit"])
    keys = GaugeMetricFamily("mysqlq_rate_limit_keys", "Rate keys of a limit in use (recent starts or jobs "
                             "waiting).", labels=["limit"])
    for view in limits:
        recent.add_metric([view.name], view.recent)
        waiting.add_metric([view.name], view.waiting)
        keys.add_metric([view.name], view.keys)
    return [recent, waiting, keys]


def registry(run: Run) -> CollectorRegistry:
    """A registry of its own (no process metrics of the web server mixed in) holding the queue collector."""
    found = CollectorRegistry(auto_describe=False)
    found.register(QueueCollector(run))
    return found


def render(found: CollectorRegistry) -> bytes:
    return generate_latest(found)
