"""Commands for the database's set-up: migrate (create or upgrade the schema) and check (the
configuration, the schema version, and every installed handler)."""

from __future__ import annotations

import click

from mysqlq.cli import main, settings
from mysqlq.core import handlers as handler_registry
from mysqlq.core.errors import MysqlqError
from mysqlq.leader.schedule_file import load as load_schedule
from mysqlq.store import schema
from mysqlq.store.db import CLI_RETRY, Database, connect
from mysqlq.store.leadership import galera
from mysqlq.store.schema import applied_version, check_schema, latest_version


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
