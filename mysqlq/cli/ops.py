"""Commands for operating a queue: jobs list/show, retry, cancel, pause, resume, purge."""

from __future__ import annotations

import datetime as dt
import json
import os
import sys
from collections.abc import Callable, Iterable, Mapping, Sequence
from functools import partial
from typing import TYPE_CHECKING, Any

import click

from mysqlq import hint
from mysqlq.cli import main, parse_limit, settings
from mysqlq.core.config import Settings, check_name
from mysqlq.core.durations import format_duration, parse_duration
from mysqlq.core.encryption import readable
from mysqlq.core.errors import ConfigError, MysqlqError, NotFound
from mysqlq.core.jobs import CANCELLABLE, ENDED, STATUSES, Status, any_of, check_tags
from mysqlq.leader.retention import Purge
from mysqlq.store import ops as store
from mysqlq.store.db import CLI_RETRY, Cursor, Database
from mysqlq.store.revive import retry_every_dead
from mysqlq.store.schema import check_schema

if TYPE_CHECKING:
    from click._termui_impl import ProgressBar

DEFAULT_LIMIT = 50


class JobStateError(MysqlqError):
    """An operation that the named job's status does not allow (retry of a job that is not dead...)."""


# ---------------------------------------------------------------------------- parsing


def parse_ids(values: Iterable[str]) -> list[int]:
    """Job ids as given on the command line, deduplicated in order; MysqlqError for anything else."""
    ids: list[int] = []
    for value in values:
        text = value.strip()
        if not text.isdigit() or int(text) == 0 or int(text) >= 2**64:
            raise ConfigError(f"job id must be a positive whole number, got {value!r}")
        if int(text) not in ids:
            ids.append(int(text))
    return ids


def parse_status(value: str | None) -> str | None:
    if value is None:
        return None
    if value not in STATUSES:
        raise ConfigError(f"there is no job status {value!r}; statuses are {', '.join(STATUSES)}")
    return value


def parse_tag(value: str | None) -> str | None:
    return None if value is None else check_tags([value])[0]


def parse_queue(value: str | None) -> str | None:
    return None if value is None else check_name("queue", value)


def _database(ctx: click.Context) -> tuple[Settings, Database]:
    cfg = settings(ctx, hint_dir=os.environ.get("MYSQLQ_HINT_DIR") or None)
    db = Database(cfg.dsn, retry=CLI_RETRY)
    db.run(check_schema)
    return cfg, db


# ---------------------------------------------------------------------------- formatting


def _time(value: dt.datetime | None) -> str:
    return "-" if value is None else value.strftime("%Y-%m-%d %H:%M:%S")


def _iso(value: object) -> object:
    """JSON for a column value: times as ISO 8601 UTC, bytes as text."""
    if isinstance(value, dt.datetime):
        return value.isoformat() + "Z"
    if isinstance(value, bytes):
        return value.decode("utf-8", errors="replace")
    return value


def _payload(raw: bytes | str | None) -> Any:
    """The stored payload: its JSON value, or the raw text when it is not valid JSON (or what an
    encrypted one this command cannot open shows, mysqlq.core.encryption.readable)."""
    if raw is None or isinstance(raw, str):
        return raw
    text = raw.decode("utf-8", errors="replace")
    try:
        return json.loads(text)
    except ValueError:
        return text


def _table(header: Sequence[str], rows: Sequence[Sequence[str]]) -> str:
    widths = [max([len(h), *(len(r[i]) for r in rows)]) for i, h in enumerate(header)]
    return "\n".join("  ".join(c.ljust(w) for c, w in zip(line, widths, strict=True)).rstrip()
                     for line in [header, *rows])


def _progress(row: dict[str, Any]) -> str:
    if row["progress"] is None:
        return "-"
    note = f" ({row['progress_note']})" if row["progress_note"] else ""
    return f"{row['progress'] * 100:.0f}%{note}"


def _dedupe(row: Mapping[str, Any]) -> str:
    """The job's dedupe key and how long it holds it."""
    if not row["dedupe_key"]:
        return "-"
    held = "while queued or running" if row["dedupe_scope"] == "active" else "until purged"
    return f"{row['dedupe_key']} (held {held})"


def _short(text: str | None, width: int) -> str:
    if not text:
        return ""
    return text if len(text) <= width else text[: width - 1] + "…"


# ---------------------------------------------------------------------------- jobs list / show


@main.group()
def jobs() -> None:
    """Inspect jobs: list them, or show one with its payload and last error."""


@jobs.command(name="list")
@click.option("--queue", metavar="QUEUE", envvar="MYSQLQ_JOBS_QUEUE", show_envvar=True, help="Only jobs of this queue.")
@click.option("--status", metavar="STATUS", envvar="MYSQLQ_JOBS_STATUS", show_envvar=True,
              help=f"Only jobs with this status ({', '.join(STATUSES)}).")
@click.option("--handler", metavar="NAME", envvar="MYSQLQ_JOBS_HANDLER", show_envvar=True,
              help=f"Only jobs naming this handler (of the newest {store.HISTORY_WINDOW:,} jobs, unless "
                   "--status is one other than done).")
@click.option("--tag", metavar="TAG", envvar="MYSQLQ_JOBS_TAG", show_envvar=True,
              help=f"Only jobs with this tag (with another filter: among the newest {store.HISTORY_WINDOW:,} "
                   "jobs with the tag).")
@click.option("--limit", metavar="N", envvar="MYSQLQ_JOBS_LIMIT", show_envvar=True, default=str(DEFAULT_LIMIT),
              help="How many jobs to show at most.")
@click.option("--json", "as_json", is_flag=True, envvar="MYSQLQ_JOBS_JSON", show_envvar=True, help="Print JSON.")
@click.pass_context
def list_command(ctx: click.Context, queue: str | None, status: str | None, handler: str | None, tag: str | None,
                 limit: str, as_json: bool) -> None:
    """List jobs, newest first."""
    unit = partial(store.list_jobs, queue=parse_queue(queue), status=parse_status(status), handler=handler,
                   limit=parse_limit(limit), tag=parse_tag(tag))
    _, db = _database(ctx)
    rows = [readable(row, None) for row in db.run(unit)]  # an encrypted error's first line shows as such
    if tag is not None:
        if (queue, status, handler) != (None, None, None) and len(rows) < parse_limit(limit):
            click.echo(f"note: --tag with another filter looks through the newest {store.HISTORY_WINDOW:,} jobs "
                       "with the tag", err=True)
    elif handler is not None and status in (None, Status.DONE) and len(rows) < parse_limit(limit):
        click.echo(f"note: --handler looks through the newest {store.HISTORY_WINDOW:,} jobs "
                   "(with another --status, the whole of that status)", err=True)
    if as_json:
        click.echo(json.dumps([{key: _iso(value) for key, value in row.items()} for row in rows], indent=2))
        return
    if not rows:
        click.echo("no jobs match")
        return
    header = ["id", "queue", "handler", "status", "attempts", "enqueued (UTC)", "finished (UTC)", "worker", "error"]
    table = [[str(r["id"]), r["queue"], r["handler"], r["status"], f"{r['attempts']}/{r['max_attempts']}",
              _time(r["enqueued_at"]), _time(r["finished_at"]), r["worker"] or "-", _short(r["error"], 60)]
             for r in rows]
    if any(r["tags"] for r in rows):  # a column of its own only when a listed job has tags
        header.insert(-1, "tags")
        for line, r in zip(table, rows, strict=True):
            line.insert(-1, _short(" ".join(r["tags"]), 40) if r["tags"] else "-")
    click.echo(_table(header, table))


@jobs.command(name="show")
@click.argument("job_id", metavar="ID", required=False)
@click.option("--json", "as_json", is_flag=True, envvar="MYSQLQ_JOBS_JSON", show_envvar=True, help="Print JSON.")
@click.pass_context
def show_command(ctx: click.Context, job_id: str | None, as_json: bool) -> None:
    """Show one job: payload, status, attempts, times, worker, batch, result, last error with its traceback."""
    if job_id is None:
        raise ConfigError("give the id of the job to show")
    (wanted,) = parse_ids([job_id])
    cfg, db = _database(ctx)
    row = db.run(lambda cur: store.get_job(cur, wanted))
    if row is None:
        raise NotFound(f"no job with id {wanted}")
    parents, dependents = db.run(lambda cur: store.links(cur, wanted, SHOW_LINKS))
    row = readable(row, cfg.keys)  # decrypted with the keys given, else "(encrypted with key k1)"
    payload, result = _payload(row.pop("payload")), _payload(row.pop("result"))
    if as_json:
        click.echo(json.dumps({**{key: _iso(value) for key, value in row.items()}, "payload": payload,
                               "result": result, "parents": [{"id": i, "status": s} for i, s in parents],
                               "dependents": [{"id": i, "status": s} for i, s in dependents]}, indent=2))
        return
    worker = "-" if row["worker"] is None else f"{row['worker']} (registry id {row['worker_id']})"
    time_limit = "the worker's default" if row["time_limit"] is None else f"{row['time_limit']}s"
    fields = [
        ("queue", row["queue"]),
        ("handler", row["handler"]),
        ("status", row["status"]),
        ("attempts", f"{row['attempts']} of {row['max_attempts']}"),
        ("snoozed", f"{row['snoozes']} times" if row["snoozes"] else "-"),
        ("progress", _progress(row)),
        ("priority", str(row["priority"])),
        ("time limit", time_limit),
        ("dedupe key", _dedupe(row)),
        ("concurrency", "-" if row["concurrency_key"] is None else f"key {row['concurrency_key']}"),
        ("tags", " ".join(row["tags"]) or "-"),
        ("trace", row["trace_context"] or "-"),
        ("enqueued", _time(row["enqueued_at"]) + " UTC"),
        ("run at", _time(row["run_at"]) + " UTC"),
        ("started", _time(row["started_at"])),
        ("finished", _time(row["finished_at"])),
        ("lease until", _time(row["lease_until"])),
        ("worker", worker),
        ("batch_id", "-" if row["batch_id"] is None else str(row["batch_id"])),
        ("waits for", _links(parents)),
        ("dependents", _links(dependents)),
    ]
    lines = [f"job {row['id']}"] + [f"  {name:<12}{value}" for name, value in fields]
    lines.append("payload:")
    body = json.dumps(payload, indent=2, ensure_ascii=False) if not isinstance(payload, str) else payload
    lines += [("  " + line).rstrip() for line in body.splitlines()]
    if result is None:
        lines.append("result: -")
    else:
        lines.append("result:")
        shown = json.dumps(result, indent=2, ensure_ascii=False) if not isinstance(result, str) else result
        lines += [("  " + line).rstrip() for line in shown.splitlines()]
    lines.append("last error:" + ("" if row["last_error"] else " -"))
    lines += [("  " + line).rstrip() for line in (row["last_error"] or "").splitlines()]
    click.echo("\n".join(lines))


def _links(jobs: list[tuple[int, str]]) -> str:
    if not jobs:
        return "-"
    shown = ", ".join(f"{job_id} ({status})" for job_id, status in jobs)
    return shown + (f", … (the first {SHOW_LINKS})" if len(jobs) == SHOW_LINKS else "")


# ---------------------------------------------------------------------------- retry / cancel

SHOW_LINKS = 50  # parents and dependents `jobs show` lists at most


def _refuse(found: Mapping[int, tuple[str, str]], ids: Sequence[int], allowed: Sequence[str], action: str) -> None:
    """Raise (so nothing changes) unless every named job exists and has an allowed status."""
    missing = [job_id for job_id in ids if job_id not in found]
    if missing:
        listed = ", ".join(map(str, missing))
        raise NotFound(f"no job with id {listed}" if len(missing) == 1 else f"no jobs with ids {listed}")
    wrong = [(job_id, found[job_id][0]) for job_id in ids if found[job_id][0] not in allowed]
    if wrong:
        listed = ", ".join(f"job {job_id} is {status}" for job_id, status in wrong)
        raise JobStateError(f"{listed}: only {any_of(allowed)} jobs can be {action}; nothing was changed")


def _change(db: Database, statement: str, ids: Sequence[int], allowed: Sequence[str], action: str) -> store.Change:
    def unit(cur: Cursor) -> store.Change:
        return store.change_jobs(cur, statement, ids, allowed, lambda found: _refuse(found, ids, allowed, action))

    return db.run(unit)


def _jobs(count: int) -> str:
    return f"{count} job" if count == 1 else f"{count} jobs"


@main.command()
@click.argument("ids", nargs=-1, metavar="[ID]...")
@click.option("--dead", "every_dead", is_flag=True, envvar="MYSQLQ_RETRY_DEAD", show_envvar=True,
              help="Retry every dead job (of --queue, if given).")
@click.option("--queue", metavar="QUEUE", envvar="MYSQLQ_RETRY_QUEUE", show_envvar=True,
              help="With --dead: only this queue's dead jobs.")
@click.pass_context
def retry(ctx: click.Context, ids: tuple[str, ...], every_dead: bool, queue: str | None) -> None:
    """Bring dead jobs back to ready: the named ones, or with --dead all of them.

    Attempts start again from 0 (the job gets its full max_attempts); the last error stays on the
    job for the record until its next failure replaces it.
    """
    if every_dead == bool(ids):
        raise ConfigError("give job ids or --dead, not both" if ids else "give the ids of dead jobs, or --dead")
    if queue is not None and not every_dead:
        raise ConfigError("--queue goes with --dead (named jobs are retried whatever their queue)")
    cfg, db = _database(ctx)
    if ids:
        change = _change(db, "retry_jobs", parse_ids(ids), [Status.DEAD], "retried")
        retried, queues = change.changed, set(change.queues)
    else:
        retried, queues = retry_every_dead(db.run, parse_queue(queue))
    if queues:
        hint.notify(cfg, queues)
    where = f" in queue {queue!r}" if queue else ""
    if every_dead and not retried:
        click.echo(f"no dead jobs{where}")
    else:
        click.echo(f"retried {_jobs(retried)}{where}: ready again with attempts reset")


@main.command()
@click.argument("ids", nargs=-1, metavar="ID...")
@click.option("--workflow", "workflow", is_flag=True, envvar="MYSQLQ_CANCEL_WORKFLOW", show_envvar=True,
              help="Cancel every job of ID's workflow that has not ended: the jobs it waits for, those that wait "
              "for it, theirs in turn (a group's members and callback, a whole chain).")
@click.pass_context
def cancel(ctx: click.Context, ids: tuple[str, ...], workflow: bool) -> None:
    """Cancel jobs: ready, scheduled, blocked or waiting ones will not run; a running one's handler is asked to stop.

    The worker holding a running job finds it cancelled within a second: an `async def` handler is
    cancelled, a `def` handler sees `ctx.cancelled` (or `ctx.stop_if_cancelled()` raises). A handler
    that ignores the request runs on until it returns or reaches its time limit. Either way the job
    ends cancelled and is not retried. Jobs enqueued after a cancelled job are cancelled with it,
    and what waits for them in turn (unless they were enqueued to run anyway): cancelling a chain's
    first step cancels the chain.
    """
    if not ids:
        raise ConfigError("give the ids of the jobs to cancel")
    job_ids = parse_ids(ids)
    _, db = _database(ctx)
    if workflow:
        if len(job_ids) != 1:
            raise ConfigError("--workflow takes the id of one job of the workflow")
        (job_id,) = job_ids
        change = db.run(lambda cur: store.cancel_workflow(cur, job_id, lambda found: _refuse(
            found, [job_id], [*CANCELLABLE, *ENDED], "cancelled")))
        where = f" of the workflow of job {job_id}"
    else:
        change = _change(db, "cancel_jobs", job_ids, CANCELLABLE, "cancelled")
        where = ""
    running = f" ({_jobs(change.running)} running: asked to stop)" if change.running else ""
    click.echo(f"cancelled {_jobs(change.changed)}{where}{running}")


# ---------------------------------------------------------------------------- pause / resume


def _queue_argument(queue: str | None, verb: str) -> str:
    if queue is None:
        raise ConfigError(f"give the name of the queue to {verb}")
    return check_name("queue", queue)


@main.command()
@click.argument("queue", required=False)
@click.pass_context
def pause(ctx: click.Context, queue: str | None) -> None:
    """Stop workers claiming from QUEUE (at their next poll); jobs already running finish."""
    name = _queue_argument(queue, "pause")
    _, db = _database(ctx)
    before = db.run(lambda cur: store.queue_paused(cur, name))
    if before:
        click.echo(f"queue {name!r} is already paused")
        return
    has_jobs = db.run(lambda cur: store.queue_has_jobs(cur, name))
    db.run(lambda cur: store.set_paused(cur, name, True))
    note = "" if has_jobs else " (it has no jobs yet)"
    click.echo(f"paused queue {name!r}{note}: workers stop claiming from it at their next poll; "
               "running jobs finish. `mysqlq resume` restarts it")


@main.command()
@click.argument("queue", required=False)
@click.pass_context
def resume(ctx: click.Context, queue: str | None) -> None:
    """Let workers claim from QUEUE again (and wake the idle ones on this host)."""
    name = _queue_argument(queue, "resume")
    cfg, db = _database(ctx)
    before = db.run(lambda cur: store.queue_paused(cur, name))
    if not before:
        click.echo(f"queue {name!r} was not paused")
        return
    db.run(lambda cur: store.set_paused(cur, name, False))
    hint.notify(cfg, [name])
    click.echo(f"resumed queue {name!r}")


# ---------------------------------------------------------------------------- purge


@main.command()
@click.option("--done-older-than", "done_age", metavar="AGE", envvar="MYSQLQ_PURGE_DONE_OLDER_THAN", show_envvar=True,
              help="Delete done and cancelled jobs that ended more than AGE ago (7d, 12h, 30m, 90s; 0: all).")
@click.option("--dead-older-than", "dead_age", metavar="AGE", envvar="MYSQLQ_PURGE_DEAD_OLDER_THAN", show_envvar=True,
              help="Delete dead jobs that ended more than AGE ago.")
@click.option("--queue", metavar="QUEUE", envvar="MYSQLQ_PURGE_QUEUE", show_envvar=True, help="Only this queue's jobs.")
@click.option("--dry-run", is_flag=True, envvar="MYSQLQ_PURGE_DRY_RUN", show_envvar=True,
              help="Count what would be deleted; delete nothing.")
@click.pass_context
def purge(ctx: click.Context, done_age: str | None, dead_age: str | None, queue: str | None, dry_run: bool) -> None:
    """Delete old ended jobs now, in batches of 1000 (workers also do this on their own, see
    --retain-done and --retain-dead of `mysqlq worker`)."""
    if done_age is None and dead_age is None:
        raise ConfigError("give --done-older-than and/or --dead-older-than (e.g. --done-older-than 7d)")
    ages: list[tuple[str, float]] = []
    if done_age is not None:
        age = parse_duration(done_age, "--done-older-than")
        ages += [(Status.DONE, age), (Status.CANCELLED, age)]
    if dead_age is not None:
        ages.append((Status.DEAD, parse_duration(dead_age, "--dead-older-than")))
    only = parse_queue(queue)
    _, db = _database(ctx)
    job = Purge(db, ages, queue=only)
    counts = job.counts()
    if dry_run:
        click.echo(_purge_summary(counts, ages, "would delete"))
        return
    bar: ProgressBar[int]
    with click.progressbar(length=sum(counts.values()), label="purging", file=sys.stderr) as bar:
        progress: Callable[[int], object] = bar.update
        deleted = job.run(progress=progress)
    click.echo(_purge_summary(deleted, ages, "deleted"))


def _purge_summary(counts: Mapping[str, int], ages: Sequence[tuple[str, float]], verb: str) -> str:
    """``deleted 5 done and 1 cancelled jobs that ended more than 7d ago; 2 dead jobs ... 30d ago``."""
    by_age: dict[float, list[str]] = {}
    for status, age in ages:
        by_age.setdefault(age, []).append(f"{counts.get(status, 0)} {status}")
    parts = [f"{' and '.join(names)} jobs that ended more than {format_duration(age) if age else '0s'} ago"
             for age, names in by_age.items()]
    return f"{verb} {'; '.join(parts)}"
