"""Commands for recurring jobs: ``mysqlq schedule list``, ``pause`` and ``resume``."""

from __future__ import annotations

import json
from datetime import UTC, datetime
from typing import Any

import click

from mysqlq.cli import main, settings
from mysqlq.core.config import check_name
from mysqlq.core.errors import NotFound
from mysqlq.leader.schedule_file import Entry, load
from mysqlq.store import schedules as store
from mysqlq.store.db import CLI_RETRY, Database
from mysqlq.store.schema import check_schema

SCHEDULE_OPTION = click.option("--schedule", "path", metavar="FILE", envvar="MYSQLQ_SCHEDULE", show_envvar=True,
                               required=True, help="The schedule file the workers read.")


@main.group()
def schedule() -> None:
    """Recurring jobs declared in a TOML schedule file (`mysqlq worker --schedule FILE`)."""


@schedule.command(name="list")
@SCHEDULE_OPTION
@click.option("--json", "as_json", is_flag=True, envvar="MYSQLQ_SCHEDULE_LIST_JSON", show_envvar=True,
              help="Print JSON.")
@click.pass_context
def list_command(ctx: click.Context, path: str, as_json: bool) -> None:
    """Each entry of the file: when it ticks, what it enqueues, its last and its next run."""
    cfg = settings(ctx)
    entries = load(path, cfg)
    db = Database(cfg.dsn, retry=CLI_RETRY)
    db.run(check_schema)
    now = db.run(store.now)
    states = db.run(store.states)
    rows = [describe(entry, states.get(entry.name), now) for entry in entries]
    if as_json:
        click.echo(json.dumps(rows, indent=2))
        return
    if not rows:
        click.echo(f"no entries in {path}")
    for entry, row in zip(entries, rows, strict=True):
        last = "never" if row["last_tick"] is None else f"{_local(row['last_tick'], entry)} (job {row['last_job_id']})"
        note = {"new": "  (not started: no worker has led with this entry yet)",
                "changed": "  (timing changed: takes effect when the workers restart)",
                "paused": "  (paused: `mysqlq schedule resume` to go on)"}.get(row["state"], "")
        click.echo(f"{entry.name}  {entry.timing}  handler={entry.handler} queue={entry.queue}  "
                   f"last={last}  next={_local(row['next_tick'], entry)}{note}")


@schedule.command()
@click.argument("name")
@click.pass_context
def pause(ctx: click.Context, name: str) -> None:
    """Pause one entry: its ticks pass without a job until it is resumed (the file is not changed)."""
    _set_paused(ctx, name, True)


@schedule.command()
@click.argument("name")
@click.pass_context
def resume(ctx: click.Context, name: str) -> None:
    """Resume a paused entry: it goes on from its next tick (the ticks it missed are not made up)."""
    _set_paused(ctx, name, False)


def _set_paused(ctx: click.Context, name: str, paused: bool) -> None:
    entry = check_name("schedule entry", name)
    db = Database(settings(ctx).dsn, retry=CLI_RETRY)
    db.run(check_schema)
    was = db.run(lambda cur: store.set_paused(cur, entry, paused))
    if was is None:
        raise NotFound(f"no schedule entry named {entry!r} has started: a worker started with the schedule "
                       "file starts its entries when it leads")
    verb = "paused" if paused else "resumed"
    click.echo(f"schedule entry {entry} was {verb} already" if was == paused else f"{verb} schedule entry {entry}")


def describe(entry: Entry, state: store.State | None, now: datetime) -> dict[str, Any]:
    """An entry as plain data: its fields, and its last and next tick (ISO 8601, UTC).

    ``state`` is ``active`` when the workers run it as the file says, ``new`` when no worker has
    started it yet (the next tick shown is then the one it would start at), ``changed`` when the
    workers still run an earlier timing.
    """
    if state is None:
        status, next_tick = "new", entry.next_after(now)
    else:
        status = "paused" if state.paused else "active" if state.timing == entry.timing else "changed"
        next_tick = state.next_tick
    return {
        "name": entry.name, "timing": entry.timing, "cron": entry.cron, "every": entry.every,
        "timezone": entry.timezone, "handler": entry.handler, "payload": entry.payload, "queue": entry.queue,
        "priority": entry.priority, "max_attempts": entry.max_attempts, "time_limit": entry.time_limit,
        "state": status, "last_tick": _iso(state.last_tick if state else None),
        "last_enqueued_at": _iso(state.enqueued_at if state else None),
        "last_job_id": state.last_job_id if state else None, "next_tick": _iso(next_tick),
    }


def _iso(moment: datetime | None) -> str | None:
    return None if moment is None else moment.astimezone(UTC).isoformat().replace("+00:00", "Z")


def _local(iso: str, entry: Entry) -> str:
    """A tick in the entry's own time zone, as people read it."""
    moment = datetime.fromisoformat(iso).astimezone(entry.zone)
    return moment.strftime("%Y-%m-%d %H:%M:%S %Z")
