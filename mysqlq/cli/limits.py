"""Rate limits at run time: ``mysqlq limits`` (list), ``set``, ``lift`` and ``reset``."""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any, TypeVar

import click

from mysqlq import hint
from mysqlq.cli import main, settings
from mysqlq.core import handlers as handler_registry
from mysqlq.core.config import Settings, check_name
from mysqlq.core.errors import ConfigError, MysqlqError
from mysqlq.core.rates import RateLimit, bucket_owner, parse_rate
from mysqlq.store import rates as store
from mysqlq.store.db import CLI_RETRY, Database
from mysqlq.store.schema import check_schema

F = TypeVar("F", bound=Callable[..., Any])


def _scope(handler: str | None, queue: str | None) -> tuple[str, str]:
    if (handler is None) == (queue is None):
        raise ConfigError("give one of --handler NAME or --queue NAME")
    if handler is not None:
        return "handler", check_name("handler", handler)
    return "queue", check_name("queue", queue or "")


def _target(func: F) -> F:
    func = click.option("--handler", metavar="NAME", default=None, envvar="MYSQLQ_LIMITS_HANDLER", show_envvar=True,
                        help="A handler's limit (per rate key).")(func)
    return click.option("--queue", metavar="NAME", default=None, envvar="MYSQLQ_LIMITS_QUEUE", show_envvar=True,
                        help="A whole queue's limit.")(func)


@main.group(invoke_without_command=True)
@click.option("--json", "as_json", is_flag=True, envvar="MYSQLQ_LIMITS_JSON", show_envvar=True, help="Print JSON.")
@click.pass_context
def limits(ctx: click.Context, as_json: bool) -> None:
    """Rate limits: each bucket in use (a handler, a handler's rate key, or a queue) with its limit,
    its starts in the last period and the jobs waiting for their turn; `set`, `lift` and `reset`
    change a limit on every worker within a second."""
    if ctx.invoked_subcommand is not None:
        return
    cfg = settings(ctx)
    db = Database(cfg.dsn, retry=CLI_RETRY)
    db.run(check_schema)
    overrides = {(o.scope, o.name): o.limit for o in db.run(store.overrides)}
    registry = handler_registry.Registry()  # one for the listing: it reads the entry points once
    rows = [_row(use, _limit_of(use.bucket, overrides, registry), db)
            for use in db.run(lambda cur: store.buckets(cur, 60.0))]
    lifted = [f"{scope} {name}" for (scope, name), limit in sorted(overrides.items()) if limit is None]
    if as_json:
        click.echo(json.dumps({"buckets": rows, "overrides": [
            {"scope": scope, "name": name, "limit": None if limit is None else str(limit)}
            for (scope, name), limit in sorted(overrides.items())]}, indent=2))
        return
    for (scope, name), limit in sorted(overrides.items()):
        click.echo(f"set by an operator: {scope} {name}: {'lifted' if limit is None else limit}")
    if not rows:
        click.echo("no rate-limited jobs have started lately")
    for row in rows:
        click.echo(f"{row['bucket']}  limit={row['limit'] or '?'}  starts in the last period={row['recent']}  "
                   f"waiting={row['waiting']}")
    if lifted:
        click.echo(f"lifted: {', '.join(lifted)}")


def _limit_of(bucket: str, overrides: dict[tuple[str, str], RateLimit | None],
              registry: handler_registry.Registry) -> RateLimit | None:
    """A bucket's limit as the workers see it: an operator's, or what its handler declares here."""
    scope, name = bucket_owner(bucket)
    if (scope, name) in overrides:
        return overrides[(scope, name)]
    if scope != "handler":
        return None
    try:
        return handler_registry.declared_rate_limit(registry.resolve(name))[0]
    except MysqlqError:
        return None


def _row(use: store.BucketUse, limit: RateLimit | None, db: Database) -> dict[str, Any]:
    recent = use.recent
    if limit is not None and limit.period != 60.0:
        recent = db.run(lambda cur: store.recent_starts(cur, use.bucket, limit.period))
    return {"bucket": use.bucket, "limit": None if limit is None else str(limit), "recent": recent,
            "waiting": use.waiting}


def _changed(cfg: Settings) -> None:
    hint.notify(cfg, [hint.POLL_NOW])  # every worker polls now, and reads the limits again


@limits.command(name="set")
@_target
@click.argument("rate")
@click.pass_context
def set_command(ctx: click.Context, handler: str | None, queue: str | None, rate: str) -> None:
    """Set a limit: RATE is N/PERIOD (100/m, 5/s, 20/10s). For a handler it replaces what its code
    declares (still per its rate key); for a queue it applies to its jobs whose handler has none."""
    scope, name = _scope(handler, queue)
    limit = parse_rate(rate)
    cfg = settings(ctx)
    db = Database(cfg.dsn, retry=CLI_RETRY)
    db.run(check_schema)
    db.run(lambda cur: store.set_limit(cur, scope, name, limit))
    _changed(cfg)
    click.echo(f"{scope} {name}: at most {limit.starts} jobs start in any {limit.period:g} s")


@limits.command()
@_target
@click.pass_context
def lift(ctx: click.Context, handler: str | None, queue: str | None) -> None:
    """Lift a limit: a handler's jobs start unlimited even if its code declares one (until `reset`);
    a queue's limit is removed."""
    scope, name = _scope(handler, queue)
    cfg = settings(ctx)
    db = Database(cfg.dsn, retry=CLI_RETRY)
    db.run(check_schema)
    if scope == "queue":
        db.run(lambda cur: store.reset_limit(cur, scope, name))
    else:
        db.run(lambda cur: store.set_limit(cur, scope, name, None))
    _changed(cfg)
    click.echo(f"{scope} {name}: no rate limit")


@limits.command()
@_target
@click.pass_context
def reset(ctx: click.Context, handler: str | None, queue: str | None) -> None:
    """Remove what an operator set: a handler's own declaration applies again."""
    scope, name = _scope(handler, queue)
    cfg = settings(ctx)
    db = Database(cfg.dsn, retry=CLI_RETRY)
    db.run(check_schema)
    removed = db.run(lambda cur: store.reset_limit(cur, scope, name))
    _changed(cfg)
    click.echo(f"{scope} {name}: " + ("as its code declares" if removed else "nothing was set"))
