"""Fair queues at run time: ``mysqlq fairness list`` (the keys waiting, with their weights) and ``weight``."""

from __future__ import annotations

import json

import click

from mysqlq.cli import main, parse_limit, settings
from mysqlq.core.config import check_name
from mysqlq.core.errors import ConfigError
from mysqlq.core.jobs import check_fairness_key
from mysqlq.store import fairness as store
from mysqlq.store.db import CLI_RETRY, Database
from mysqlq.store.schema import check_schema

DEFAULT_LIMIT = 100


def _database(ctx: click.Context) -> Database:
    db = Database(settings(ctx).dsn, retry=CLI_RETRY)
    db.run(check_schema)
    return db


def parse_weight(value: str) -> float:
    """A weight as typed: a number from store.MIN_WEIGHT to store.MAX_WEIGHT; one line for anything else."""
    try:
        weight = float(value.strip())
    except ValueError:
        raise ConfigError(f"a fairness weight must be a number from {store.MIN_WEIGHT:g} to {store.MAX_WEIGHT:g}, "
                          f"got {value!r}") from None
    store.weight_step(weight)  # refuses a weight out of range (nan and inf included)
    return weight


def _shown(weight: float) -> int | float:
    """A weight as JSON shows it: 2 rather than 2.0."""
    return int(weight) if weight.is_integer() else weight


@main.group()
def fairness() -> None:
    """Fair queues: within a queue and a priority, jobs that carry a fairness key (a tenant, a
    customer) are taken in turn across keys. `list` shows the keys with ready jobs and their
    weights; `weight` gives a key a larger or smaller share of its queue."""


@fairness.command(name="weight")
@click.argument("queue")
@click.argument("key")
@click.argument("weight")
@click.pass_context
def weight_command(ctx: click.Context, queue: str, key: str, weight: str) -> None:
    """Set a key's weight in a queue.

    KEY gets a share of QUEUE in proportion to WEIGHT, a number from 0.01 to 1000 (1 is the
    default): a key of weight 2 takes two turns for every one of a key of weight 1, a key of weight
    0.5 one for every two. It applies to the jobs the key enqueues from now on; those already
    waiting keep their turns. KEY '' (empty) stands for the queue's jobs without a key, which are
    taken in turn with the keys as one key of their own."""
    check_name("queue", queue)
    if key != store.KEYLESS:
        check_fairness_key(key)
    number = parse_weight(weight)
    _database(ctx).run(lambda cur: store.set_weight(cur, queue, key, number))
    shown = store.weight_of(store.weight_step(number))
    click.echo(f"queue {queue!r}, {_named(key)}: weight {shown:g}, for the jobs it enqueues from now on")


def _named(key: str) -> str:
    """A key as a sentence names it."""
    return "jobs without a key" if key == store.KEYLESS else f"key {key!r}"


@fairness.command(name="list")
@click.option("--queue", metavar="QUEUE", envvar="MYSQLQ_FAIRNESS_QUEUE", show_envvar=True,
              help="Only the keys of this queue.")
@click.option("--limit", metavar="N", envvar="MYSQLQ_FAIRNESS_LIMIT", show_envvar=True, default=str(DEFAULT_LIMIT),
              help="How many keys to show at most.")
@click.option("--json", "as_json", is_flag=True, envvar="MYSQLQ_FAIRNESS_JSON", show_envvar=True,
              help="Print a JSON list of {queue, key, ready, weight}.")
@click.pass_context
def list_command(ctx: click.Context, queue: str | None, limit: str, as_json: bool) -> None:
    """The keys waiting, with their weights.

    The fairness keys with ready jobs, the largest backlog first: per key its queue, its ready jobs
    and its weight; then the keys given a weight other than 1 that have no ready job (ready 0), and
    the weight of jobs without a key ("(no key)", null in JSON) if one was given.
    Reads every ready job that carries a key (of QUEUE, with --queue)."""
    only = None if queue is None else check_name("queue", queue)
    most = parse_limit(limit)
    found = _database(ctx).run(lambda cur: store.listing(cur, only, most + 1))
    if len(found) > most:
        click.echo(f"note: the first {most} keys are shown; --limit shows more", err=True)
        found = found[:most]
    if as_json:
        click.echo(json.dumps([{"queue": each.queue, "key": each.key or None, "ready": each.ready,
                                "weight": _shown(each.weight)} for each in found], indent=2))
        return
    if not found:
        click.echo("no fairness key has ready jobs or a weight" + ("" if only is None else f" in queue {only!r}"))
        return
    header = ["queue", "key", "ready", "weight"]
    table = [[each.queue, each.key or "(no key)", str(each.ready), f"{each.weight:g}"] for each in found]
    widths = [max(len(h), *(len(row[i]) for row in table)) for i, h in enumerate(header)]
    for line in [header, *table]:
        click.echo("  ".join(cell.ljust(width) for cell, width in zip(line, widths, strict=True)).rstrip())
