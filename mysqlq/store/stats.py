"""Queue statistics, as plain data for the CLI's table and JSON."""

from __future__ import annotations

from typing import Any

from mysqlq.core.jobs import ENDED, STATUSES
from mysqlq.store import execute, fairness
from mysqlq.store import ops as ops_store
from mysqlq.store.claims import keeps_done
from mysqlq.store.db import Cursor

THROUGHPUT_WINDOW = 300.0  # seconds of history behind the done-per-minute figure
HISTORY_CAP = 10_000  # done, dead and cancelled jobs are counted exactly up to this many per queue
TOP_KEYS = 3  # the fairness keys with the largest backlogs of ready jobs, per queue


def _blank(queue: str, window: float) -> dict[str, Any]:
    return {"queue": queue, "counts": dict.fromkeys(STATUSES, 0), "capped": [], "oldest_ready_age": None,
            "paused": False, "history": True, "top_keys": [], "keys_waiting": 0,
            "throughput": {"window_s": window, "done": 0, "dead": 0, "done_per_min": 0.0}}


def queue_stats(cur: Cursor, window: float = THROUGHPUT_WINDOW, cap: int = HISTORY_CAP) -> list[dict[str, Any]]:
    """One entry per queue: counts by status, the oldest ready job's age in seconds, whether it is
    paused, whether it keeps its done jobs (``history``: see `mysqlq history`), its throughput:
    jobs that ended done or dead in the last ``window`` seconds, and its fair queue's backlog: the
    TOP_KEYS fairness keys with the most ready jobs (``top_keys``, ``{"key", "ready"}`` each) and how
    many keys have ready jobs (``keys_waiting``).

    Ready, scheduled, blocked and running jobs are counted exactly. Finished ones (done, dead, cancelled),
    in the live table and the history alike, are counted up to ``cap`` per queue: a count that reached
    it is ``cap`` and its status is listed in ``capped`` (the table shows "10000+"), so that no figure
    reads the whole history. The backlog by key reads each keyed ready job, of the queues that have
    some only (the counts tell which): a queue without keys pays nothing for it.
    """
    found: dict[str, dict[str, Any]] = {}
    live = ops_store.count_live(cur)
    for (queue, status), count in live.by_status.items():
        found.setdefault(queue, _blank(queue, window))["counts"][status] = count
    for queue in sorted(live.keyed_ready):
        backlog = fairness.backlog(cur, queue, TOP_KEYS)
        found[queue]["top_keys"] = [{"key": each.key, "ready": each.ready} for each in backlog.top]
        found[queue]["keys_waiting"] = backlog.keys
    for status in ENDED:
        for queue, count in ops_store.count_capped(cur, status, cap).items():
            entry = found.setdefault(queue, _blank(queue, window))
            entry["counts"][status] = min(count, cap)
            if count > cap:
                entry["capped"].append(status)
    for queue in ops_store.paused_queues(cur):
        found.setdefault(queue, _blank(queue, window))["paused"] = True
    keep = ops_store.keep_done_settings(cur)
    for entry in found.values():
        entry["history"] = keeps_done(keep, entry["queue"])
    for queue, (done, dead) in ops_store.throughput(cur, window).items():
        rate = found.setdefault(queue, _blank(queue, window))["throughput"]
        rate.update(done=done, dead=dead, done_per_min=round(done * 60 / window, 2))
    execute(cur, "oldest_ready_age")
    for queue, age_us in cur.fetchall():
        if queue in found and age_us is not None:
            found[queue]["oldest_ready_age"] = max(0.0, age_us / 1e6)
    return [found[name] for name in sorted(found)]
