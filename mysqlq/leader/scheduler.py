"""The scheduler: the leading worker enqueues each due tick of the schedule file, once cluster-wide.

Exactly once does not rest on there being a single leader. A tick's job and the advance of the
entry's row in ``mysqlq_schedules`` (a compare-and-set on the tick that was due) commit together, and
the job carries the dedupe key ``mysqlq:schedule:<name>:<tick in UTC>``, so two workers that both
think they lead make one job: the second one's insert waits for the first one's key, finds it taken,
and its compare-and-set changes nothing.

Ticks are judged by the server's clock. An entry seen for the first time starts at its next tick
(nothing from before it was known runs). After downtime the missed ticks collapse into one job, the
one for the latest of them, enqueued at once; the entry then goes on from its next tick. An entry
whose cron or interval changed starts again at the next tick of its new timing, and the state of
entries no longer in the file is deleted when a worker with that file starts leading.
"""

from __future__ import annotations

from datetime import datetime

from mysqlq import hint
from mysqlq.core.config import Settings
from mysqlq.core.logs import Log
from mysqlq.leader.schedule_file import Entry, load
from mysqlq.store import schedules as store
from mysqlq.store.db import Database

IDLE = 60.0  # seconds between turns when no tick is due sooner (each turn re-reads the state)
SLACK = 0.005  # seconds past a tick before looking, so that the server's clock has passed it too
AFTER_ERROR = 10.0  # seconds before an entry that failed is tried again


class Scheduler:
    """The leader's chore of recurring jobs: :meth:`run` enqueues what is due, returns seconds until the next tick."""

    name = "scheduler"

    def __init__(self, settings: Settings, db: Database, log: Log, entries: list[Entry] | None = None) -> None:
        self.settings = settings
        self.db = db
        self.log = log
        self.enabled = entries is not None or settings.schedule is not None
        if entries is None:
            entries = load(settings.schedule, settings) if settings.schedule else []
        self.entries = entries
        self._forgot = False

    def elected(self) -> None:
        """Nothing to reset when this worker starts leading: the state is in the database."""

    def run(self) -> float:
        if not self.enabled:
            return IDLE
        return self.turn(self.db.run(store.now))

    def turn(self, now: datetime) -> float:
        """Enqueue every tick due at ``now`` (the server's clock, aware UTC); returns seconds until the next."""
        if not self._forgot:
            names = [entry.name for entry in self.entries]
            forgotten = self.db.run(lambda cur: store.forget_others(cur, names))
            if forgotten:
                self.log.info("schedule.forgotten", entries=forgotten, note="no longer in the schedule file")
            self._forgot = True
        states = self.db.run(store.states)
        wait = IDLE
        for entry in self.entries:
            try:
                next_tick = self._step(entry, states.get(entry.name), now)
            except Exception as exc:  # one entry's failure must not stop the others
                self.log.error("schedule.error", schedule=entry.name, error=f"{type(exc).__name__}: {exc}")
                wait = min(wait, AFTER_ERROR)
                continue
            wait = min(wait, (next_tick - now).total_seconds() + SLACK)
        return max(SLACK, wait)

    def _step(self, entry: Entry, state: store.State | None, now: datetime) -> datetime:
        """Bring one entry up to ``now``; returns its next tick."""
        name = entry.name
        if state is None or state.timing != entry.timing:
            next_tick = entry.next_after(now)
            if state is None:
                self.db.run(lambda cur: store.add(cur, name, entry.timing, next_tick))
            else:
                self.db.run(lambda cur: store.retime(cur, name, state.timing, entry.timing, next_tick))
            self.log.info("schedule.started" if state is None else "schedule.retimed", schedule=name,
                          timing=entry.timing, next_tick=next_tick.isoformat())
            return next_tick
        if state.next_tick > now:
            return state.next_tick
        tick = max(entry.latest_at(now), state.next_tick)
        next_tick = entry.next_after(now)
        if state.paused:  # its ticks pass without a job: resumed, it goes on from its next tick
            if self.db.run(lambda cur: store.skip(cur, name, state.next_tick, next_tick)):
                self.log.info("schedule.skipped", schedule=name, tick=tick.isoformat(), note="paused")
            return next_tick
        row = entry.job(tick).row(self.settings)
        job_id, advanced = self.db.run(lambda cur: store.enqueue_tick(cur, name, row, state.next_tick, tick,
                                                                      next_tick))
        if advanced:
            missed = {"missed_from": state.next_tick.isoformat()} if tick > state.next_tick else {}
            self.log.info("schedule.enqueued", schedule=name, tick=tick.isoformat(), job_id=job_id, **missed)
            hint.notify(self.settings, [entry.queue])
        return next_tick
