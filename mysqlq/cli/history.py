"""Whether queues keep a history of their done jobs: ``mysqlq history`` (show), ``on`` and ``off``."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, TypeVar

import click

from mysqlq.cli import main, settings
from mysqlq.core.config import check_name
from mysqlq.core.errors import ConfigError
from mysqlq.store import ops as store
from mysqlq.store.claims import INSTALLATION
from mysqlq.store.db import CLI_RETRY, Database
from mysqlq.store.schema import check_schema

F = TypeVar("F", bound=Callable[..., Any])
KEPT, DELETED = "kept (until --retain-done)", "deleted when they complete"


def _database(ctx: click.Context) -> Database:
    db = Database(settings(ctx).dsn, retry=CLI_RETRY)
    db.run(check_schema)
    return db


def _target(queue: str | None, every: bool, verb: str) -> str:
    if (queue is None) == (not every):
        raise ConfigError(f"give the QUEUE whose history to turn {verb}, or --all for the installation's default")
    return INSTALLATION if every else check_name("queue", queue or "")


def _describe(name: str) -> str:
    return "the installation's default" if name == INSTALLATION else f"queue {name!r}"


@main.group(invoke_without_command=True)
@click.pass_context
def history(ctx: click.Context) -> None:
    """Whether done jobs are kept. By default every done job stays in the table until retention
    (--retain-done, 7 days) deletes it. A queue whose history is off has each job deleted by the
    statement that completes it: no `jobs show`, no result and no once-forever dedupe key outlive it.
    Dead and cancelled jobs, and jobs other jobs wait for, are always kept. Without a subcommand:
    the installation's default and every queue set apart from it."""
    if ctx.invoked_subcommand is not None:
        return
    found = _database(ctx).run(store.keep_done_settings)
    default = found.pop(INSTALLATION, True)
    click.echo(f"done jobs of every queue: {KEPT if default else DELETED}")
    for name, keep in found.items():
        click.echo(f"  {name}: {KEPT if keep else DELETED}")


def _set(ctx: click.Context, queue: str | None, every: bool, keep: bool | None, verb: str) -> None:
    name = _target(queue, every, verb)
    _database(ctx).run(lambda cur: store.set_keep_done(cur, name, keep))
    what = KEPT if keep else DELETED if keep is not None else "as the installation's default says"
    click.echo(f"done jobs of {_describe(name)}: {what}; workers follow at their next poll "
               "(jobs already claimed end as their claim found it)")


def _queue_or_all(func: F) -> F:
    func = click.option("--all", "every", is_flag=True, envvar="MYSQLQ_HISTORY_ALL", show_envvar=True,
                        help="The installation's default, for queues not set alone.")(func)
    return click.argument("queue", required=False)(func)


@history.command("off")
@_queue_or_all
@click.pass_context
def history_off(ctx: click.Context, queue: str | None, every: bool) -> None:
    """Keep no history of QUEUE's done jobs: each is deleted when it completes."""
    _set(ctx, queue, every, False, "off")


@history.command("on")
@_queue_or_all
@click.pass_context
def history_on(ctx: click.Context, queue: str | None, every: bool) -> None:
    """Keep QUEUE's done jobs again (until retention deletes them)."""
    _set(ctx, queue, every, True, "on")


@history.command("default")
@click.argument("queue")
@click.pass_context
def history_default(ctx: click.Context, queue: str) -> None:
    """Let QUEUE follow the installation's default again."""
    _set(ctx, queue, False, None, "default")
