"""Commands for the producer side and the schema: migrate, check, enqueue, stats."""

from __future__ import annotations

import datetime
import json
import sys
import time
from pathlib import Path
from typing import Any

import click

from mysqlq.cli import main, settings
from mysqlq.core import handlers as handler_registry
from mysqlq.core.config import Settings
from mysqlq.core.durations import format_duration, parse_duration
from mysqlq.core.errors import ConfigError, InvalidJob, MysqlqError
from mysqlq.core.jobs import DEDUPE_SCOPES, PARENT_FAILURE, STATUSES, Job, loads_strict
from mysqlq.leader.schedule_file import load as load_schedule
from mysqlq.producer.enqueue import Producer
from mysqlq.store import schema
from mysqlq.store.db import CLI_RETRY, Database, connect
from mysqlq.store.leadership import galera
from mysqlq.store.schema import applied_version, check_schema, latest_version
from mysqlq.store.stats import queue_stats


@main.command(name="migrate")
@click.option("--create-database", is_flag=True, envvar="MYSQLQ_CREATE_DATABASE", show_envvar=True,
              help="Create the DSN's database first if it does not exist (needs the CREATE privilege).")
@click.pass_context
def migrate_command(ctx: click.Context, create_database: bool) -> None:
    """Create or upgrade the schema (safe to run again, and from many hosts at once)."""
    cfg = settings(ctx)
    if create_database:
        server = connect(cfg.dsn, use_database=False)
        try:
            with server.cursor() as cur:
                if schema.create_database(cur, cfg.dsn.database):
                    click.echo(f"created database {cfg.dsn.database!r}")
        finally:
            server.close()
    db = Database(cfg.dsn, retry=CLI_RETRY)
    applied = db.run(lambda cur: schema.migrate(cur, cfg.dsn.database, renew_on=lambda: connect(cfg.dsn)))
    if applied:
        click.echo(f"schema migrated to version {applied[-1]} (applied {', '.join(map(str, applied))})")
    else:
        click.echo(f"schema is up to date (version {latest_version()})")


@main.command()
@click.option("--schedule", metavar="FILE", envvar="MYSQLQ_SCHEDULE", show_envvar=True, default=None,
              help="Also check this schedule file: every entry valid, every handler it names installed.")
@click.pass_context
def check(ctx: click.Context, schedule: str | None) -> None:
    """Check the configuration: connect, compare schema versions, resolve every installed handler."""
    cfg = settings(ctx)
    entries = load_schedule(schedule, cfg) if schedule else []
    db = Database(cfg.dsn, retry=CLI_RETRY)
    version = db.run(applied_version)
    db.run(check_schema)
    click.echo(f"database: ok ({cfg.dsn.redacted()}, schema version {version})")
    if db.run(galera):
        click.echo("cluster: MariaDB Galera (wsrep_on): leadership and migrations by lease rows, the process-list "
                   "check per node, no wake-up lock; certification failures retried like deadlocks")
    else:
        click.echo("cluster: none (a single server)")
    if schedule:
        names = {info.name for info in handler_registry.installed()}
        missing = [entry for entry in entries if entry.handler not in names]
        if missing:
            raise MysqlqError(f"schedule {schedule}: entry {missing[0].name!r} names handler {missing[0].handler!r},"
                              " which no installed entry point provides")
        click.echo(f"schedule: ok ({len(entries)} entries in {schedule})")
    registry = handler_registry.Registry()
    problems = []
    for info in handler_registry.installed():
        try:
            registry.resolve(info.name)
        except MysqlqError as exc:
            problems.append(str(exc))
    count = len(handler_registry.installed())
    if problems:
        raise MysqlqError(f"{len(problems)} of {count} handlers cannot be loaded: {problems[0]}")
    click.echo(f"handlers: ok ({count} installed)")


def _payload(text: str | None) -> Any:
    if text is None:
        return None
    if text == "-":
        text = sys.stdin.read()
    try:
        return loads_strict(text)
    except ValueError as exc:
        raise InvalidJob(f"payload is not valid JSON: {exc}") from None


def _job_from_line(number: int, line: str, defaults: dict[str, Any], cfg: Settings) -> Job:
    try:
        item = loads_strict(line)
    except ValueError as exc:
        raise InvalidJob(f"line {number}: not valid JSON: {exc}") from None
    if not isinstance(item, dict) or "handler" not in item:
        raise InvalidJob(f"line {number}: expected an object with at least \"handler\"")
    known = {"handler", "payload", "queue", "delay", "priority", "dedupe_key", "dedupe_scope", "max_attempts",
             "time_limit", "concurrency_key", "after", "on_parent_failure"}
    unknown = set(item) - known
    if unknown:
        raise InvalidJob(f"line {number}: unknown field(s) {', '.join(sorted(unknown))}")
    job = Job(**{**defaults, **item})
    try:
        job.row(cfg)  # every line is checked before anything is written
        job.parents()
    except InvalidJob as exc:
        raise InvalidJob(f"line {number}: {exc}") from None
    return job


@main.command()
@click.argument("handler", required=False)
@click.argument("payload", required=False)
@click.option("--file", "path", type=click.Path(dir_okay=False, path_type=Path), envvar="MYSQLQ_ENQUEUE_FILE",
              show_envvar=True,
              help="Enqueue every line of a JSON-lines file (handler, payload, queue, delay, ...), all or nothing.")
@click.option("--queue", envvar="MYSQLQ_QUEUE", show_envvar=True, default="default", help="Queue name.")
@click.option("--delay", envvar="MYSQLQ_ENQUEUE_DELAY", show_envvar=True, type=float, default=0.0,
              help="Seconds to wait before the job may run.")
@click.option("--priority", envvar="MYSQLQ_ENQUEUE_PRIORITY", show_envvar=True, type=int, default=0,
              help="Lower runs first.")
@click.option("--dedupe-key", envvar="MYSQLQ_ENQUEUE_DEDUPE_KEY", show_envvar=True,
              help="Enqueue at most once per key: a taken key prints the existing job's id.")
@click.option("--dedupe-scope", envvar="MYSQLQ_DEDUPE_SCOPE", show_envvar=True, type=click.Choice(DEDUPE_SCOPES),
              default="forever", help="How long the key holds: until the job is purged (forever), or until it "
              "ends, done, dead or cancelled (active).")
@click.option("--max-attempts", type=int, envvar="MYSQLQ_MAX_ATTEMPTS", show_envvar=True, default=None,
              help="Attempts before the job is dead [default: 5].")
@click.option("--time-limit", envvar="MYSQLQ_ENQUEUE_TIME_LIMIT", show_envvar=True, type=float,
              help="Seconds the job may run [default: the worker's].")
@click.option("--concurrency-key", envvar="MYSQLQ_ENQUEUE_CONCURRENCY_KEY", show_envvar=True,
              help="Run at most the handler's concurrency_limit jobs with this key at once "
              "(with --file: for lines that name none).")
@click.option("--after", "after", metavar="ID", multiple=True, type=int, envvar="MYSQLQ_ENQUEUE_AFTER",
              show_envvar=True,
              help="Run only once job ID is done (repeat for several; the job waits until the last is). "
              "With --file, lines give \"after\": [ids].")
@click.option("--on-parent-failure", type=click.Choice(PARENT_FAILURE), default="cancel",
              envvar="MYSQLQ_ON_PARENT_FAILURE", show_envvar=True,
              help="When a job it waits for ends dead or cancelled: cancel this one too, or run it anyway.")
@click.pass_context
def enqueue(ctx: click.Context, handler: str | None, payload: str | None, path: Path | None, queue: str,
            delay: float, priority: int, dedupe_key: str | None, dedupe_scope: str, max_attempts: int | None,
            time_limit: float | None, concurrency_key: str | None, after: tuple[int, ...],
            on_parent_failure: str) -> None:
    """Enqueue HANDLER with a JSON PAYLOAD ("-": read it from stdin) and print its id,
    or bulk-load jobs with --file."""
    cfg = settings(ctx)
    if path is not None:
        if handler is not None or payload is not None:
            raise click.UsageError("give either HANDLER [PAYLOAD] or --file, not both")
        if after:
            raise click.UsageError("--after takes one job; with --file, give \"after\" on each line")
        defaults = {"queue": queue, "delay": delay, "priority": priority, "max_attempts": max_attempts,
                    "time_limit": time_limit, "dedupe_scope": dedupe_scope, "concurrency_key": concurrency_key,
                    "on_parent_failure": on_parent_failure}
        try:
            lines = path.read_text(encoding="utf-8").splitlines()
        except (OSError, UnicodeDecodeError) as exc:
            raise InvalidJob(f"cannot read {path}: {exc}") from None
        try:
            jobs = [_job_from_line(n, line, defaults, cfg) for n, line in enumerate(lines, 1) if line.strip()]
        except InvalidJob as exc:
            raise InvalidJob(f"{path}: {exc}; nothing was enqueued") from None
        with Producer(cfg) as producer, click.progressbar(length=len(jobs), label="enqueuing", file=sys.stderr) as bar:
            inserted = producer.enqueue_many(jobs, progress=bar.update)
        click.echo(f"enqueued {inserted} jobs ({len(jobs) - inserted} skipped by dedupe key)")
        return
    if handler is None:
        raise click.UsageError("HANDLER is required (or --file)")
    with Producer(cfg) as producer:
        job_id = producer.enqueue(handler, _payload(payload), queue=queue, delay=delay, priority=priority,
                                  dedupe_key=dedupe_key, dedupe_scope=dedupe_scope, max_attempts=max_attempts,
                                  time_limit=time_limit, concurrency_key=concurrency_key, after=after,
                                  on_parent_failure=on_parent_failure)
    click.echo(job_id)


@main.command()
@click.option("--json", "as_json", is_flag=True, envvar="MYSQLQ_STATS_JSON", show_envvar=True,
              help="Print JSON instead of a table (one line per refresh with --watch).")
@click.option("--watch", metavar="[SECONDS]", is_flag=False, flag_value="2", default=None, envvar="MYSQLQ_STATS_WATCH",
              show_envvar=True,
              help="Refresh every SECONDS (a duration such as 5 or 1m; 2 if not given) until Ctrl-C.")
@click.pass_context
def stats(ctx: click.Context, as_json: bool, watch: str | None) -> None:
    """Per queue: jobs by status, the age of the oldest ready job, jobs done per minute over the
    last 5 minutes, and whether the queue is paused."""
    cfg = settings(ctx)
    every = None if watch is None else parse_duration(watch, "--watch interval")
    if every is not None and every <= 0:
        raise ConfigError("--watch interval must be more than 0 seconds")
    db = Database(cfg.dsn, retry=CLI_RETRY)
    db.run(check_schema)
    if every is None:
        click.echo(_stats_text(db.run(queue_stats), as_json))
        return
    try:
        while True:
            text = _stats_text(db.run(queue_stats), as_json, compact=True)
            if not as_json:
                click.clear()
                stamp = datetime.datetime.now().strftime("%Y-%m-%d %H:%M:%S")
                text = f"mysqlq stats, every {format_duration(every)} (Ctrl-C to stop)  {stamp}\n\n{text}"
            click.echo(text)
            time.sleep(every)
    except KeyboardInterrupt:
        return


def _stats_text(rows: list[dict[str, Any]], as_json: bool, compact: bool = False) -> str:
    if as_json:
        return json.dumps(rows) if compact else json.dumps(rows, indent=2)
    header = ["queue", *STATUSES, "oldest_ready_s", "done/min", "state"]
    table = [[row["queue"], *(f"{row['counts'][s]}{'+' if s in row['capped'] else ''}" for s in STATUSES),
              "-" if row["oldest_ready_age"] is None else f"{row['oldest_ready_age']:.1f}",
              f"{row['throughput']['done_per_min']:g}", "paused" if row["paused"] else "active"] for row in rows]
    widths = [max(len(h), *(len(r[i]) for r in table)) if table else len(h) for i, h in enumerate(header)]
    lines = ["  ".join(h.ljust(w) for h, w in zip(header, widths, strict=True)).rstrip()]
    lines += ["  ".join(c.ljust(w) for c, w in zip(r, widths, strict=True)).rstrip() for r in table]
    if not table:
        lines.append("(no jobs)")
    return "\n".join(lines)
