"""What the worker says of each outcome once it is written: one journal line per job, the per-worker
metrics, and the counts its systemd STATUS shows."""

from __future__ import annotations

from mysqlq.core import logs
from mysqlq.core.jobs import ClaimedJob
from mysqlq.worker.settling.outcomes import Entry, Outcome
from mysqlq.worker.settling.worker_metrics import NoMetrics

DONE_KEYS = ("job_id", "queue", "handler", "attempt", "duration")


class Report:
    """Logs outcomes after their write said whether the claim still held; counts them."""

    def __init__(self, metrics: NoMetrics) -> None:
        self.metrics = metrics
        self.counting = type(metrics) is not NoMetrics
        self.done = 0
        self.failed = 0

    def written(self, log: logs.Log, entries: list[Entry], lost: set[int], done_only: bool = False) -> None:
        """``entries`` were just written, in order; ``lost`` are the ids fenced out among them;
        ``done_only``: every entry is a job done with nothing to store, (job, seconds).

        ``job.done`` lines, most of them, are written a run at a time (logs.log_many); any other
        outcome is logged on its own, in its place."""
        if done_only and not lost:  # most batches
            if entries:
                self._done(log, entries)  # type: ignore[arg-type]
            return
        done: list[tuple[ClaimedJob, float]] = []
        for job, outcome in entries:
            if isinstance(outcome, float):  # done, with nothing stored: most jobs
                if not lost or job.id not in lost:
                    done.append((job, outcome))
                    continue
            elif outcome.kind == "done" and (not lost or job.id not in lost):
                done.append((job, outcome.duration))
                continue
            if done:
                self._done(log, done)
                done = []
            if isinstance(outcome, float) or (job.id in lost and outcome.kind != "lost"):  # fenced out
                log.warning("job.claim_lost", job_id=job.id, note="another worker took the claim over; nothing written")
            else:
                self.outcome(log, job, outcome)
        if done:
            self._done(log, done)

    def _done(self, log: logs.Log, done: list[tuple[ClaimedJob, float]]) -> None:
        rows = [(job.id, job.queue, job.handler, job.attempt, seconds) for job, seconds in done]
        logs.log_many(log, "info", "job.done", DONE_KEYS, rows)
        self.done += len(done)
        if self.counting:
            for job, seconds in done:
                self.metrics.outcome(job, Outcome("done", seconds))

    def outcome(self, log: logs.Log, job: ClaimedJob, outcome: Outcome) -> None:
        fields = {"job_id": job.id, "queue": job.queue, "handler": job.handler, "attempt": job.attempt,
                  "duration": outcome.duration}
        self.metrics.outcome(job, outcome)
        if outcome.kind == "done":
            self.done += 1
            log.info("job.done", **fields)
        elif outcome.kind == "lost":
            log.warning("job.claim_lost", **fields, note=outcome.error)
        elif outcome.kind == "cancelled":
            log.info("job.cancelled", **fields, note=outcome.error)
        elif outcome.kind == "snoozed":
            log.info("job.snoozed", **fields, seconds=outcome.delay, snoozes=job.snoozes + 1)
        else:
            self.failed += 1
            final = outcome.kind == "dead" or job.attempt >= job.max_attempts
            summary = (outcome.error or "").split("\n", 1)[0]
            log.error("job.dead" if final else "job.failed", **fields, error=summary,
                      max_attempts=job.max_attempts)
