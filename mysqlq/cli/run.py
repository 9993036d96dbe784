"""Commands for running work: worker, handlers, workers."""

from __future__ import annotations

import json

import click

from mysqlq.cli import main, settings
from mysqlq.core import handlers as handler_registry
from mysqlq.core.config import ClaimStrategy, Isolation, default_worker_name
from mysqlq.core.durations import parse_retention
from mysqlq.store import workers as worker_store
from mysqlq.store.db import CLI_RETRY, Database
from mysqlq.store.schema import check_schema
from mysqlq.worker.settling import worker_metrics

# One slot claims whole batches and gives none back (its jobs run one after another on the main
# thread), so it keeps the batch it always had unless told otherwise.
ONE_SLOT_BATCH = 100


def _split_queues(ctx: click.Context, param: click.Parameter, value: tuple[str, ...]) -> tuple[str, ...] | None:
    names = tuple(name.strip() for item in value for name in item.replace(",", " ").split() if name.strip())
    return names or None


def _retention(ctx: click.Context, param: click.Parameter, value: str) -> float:
    return parse_retention(value, f"--{(param.name or '').replace('_', '-')}")


def _metrics_listen(ctx: click.Context, param: click.Parameter, value: str | None) -> str | None:
    if value is not None:
        worker_metrics.parse_listen(value)  # a bad value is a one-line error before anything starts
    return value


def _instance_name() -> str:
    """Under systemd the template instance (worker@3 → "3" is passed as --name); else host:pid."""
    return default_worker_name()


@main.command()
@click.option("--name", envvar="MYSQLQ_WORKER_NAME", show_envvar=True, default=None,
              help="Worker name shown in jobs and logs [default: host:pid; the instance name under systemd].")
@click.option("--queue", "queues", envvar="MYSQLQ_QUEUES", show_envvar=True, multiple=True, callback=_split_queues,
              help="Queue to work (repeat, or comma-separate; earlier queues first) [default: default].")
@click.option("--batch-size", envvar="MYSQLQ_BATCH_SIZE", show_envvar=True, type=click.IntRange(1, 10_000),
              default=None, help="Most jobs claimed per round trip; fewer when the queue's jobs are slow (a worker "
              "claims what its slots start within ~50 ms) [default: 500; 100 with --concurrency 1, whose claims are "
              "always this size: lower it for slow jobs there].")
@click.option("--concurrency", envvar="MYSQLQ_CONCURRENCY", show_envvar=True, type=click.IntRange(1, 256),
              default=5, help="Jobs in flight at once: plain handlers on threads, async ones on one event loop "
              "(1: one at a time on the main thread). CPU-bound work scales by processes instead.")
@click.option("--poll-interval", envvar="MYSQLQ_POLL_INTERVAL", show_envvar=True, type=click.FloatRange(min=0.01),
              default=2.0, help="Seconds between polls when idle; hints from producers wake it sooner.")
@click.option("--flush-interval", envvar="MYSQLQ_FLUSH_INTERVAL", show_envvar=True, type=click.FloatRange(min=0),
              default=0.5, help="Seconds a finished job's outcome may wait to be written with others of its batch "
              "(0: one write per job).")
@click.option("--time-limit", envvar="MYSQLQ_TIME_LIMIT", show_envvar=True, type=click.FloatRange(min=0.001),
              default=300.0, help="Default seconds a job may run before it counts as failed.")
@click.option("--result-max-bytes", envvar="MYSQLQ_RESULT_MAX_BYTES", show_envvar=True,
              type=click.IntRange(1, 16 * 1024 * 1024 - 1), default=64 * 1024,
              help="The largest return value stored as a job's result, in bytes of JSON; a larger one fails "
              "the job.")
@click.option("--lease", envvar="MYSQLQ_LEASE", show_envvar=True, type=click.FloatRange(min=1), default=60.0,
              help="Seconds a claim lasts without heartbeats before others may take it over.")
@click.option("--heartbeat-interval", envvar="MYSQLQ_HEARTBEAT_INTERVAL", show_envvar=True,
              type=click.FloatRange(min=0.05), default=10.0, help="Seconds between heartbeats (and lease extensions).")
@click.option("--processlist-check/--no-processlist-check", envvar="MYSQLQ_PROCESSLIST_CHECK", show_envvar=True,
              default=True, help="Reap a worker whose connection is gone from the server's process list "
              "(turn off behind poolers or proxies that reuse connection ids).")
@click.option("--retry-base", envvar="MYSQLQ_RETRY_BASE", show_envvar=True, type=click.FloatRange(min=0),
              default=2.0, help="First retry delay in seconds; doubles per attempt, with jitter.")
@click.option("--max-snoozes", envvar="MYSQLQ_MAX_SNOOZES", show_envvar=True, type=click.IntRange(1, 65535),
              default=100, help="A job whose handler snoozed it this often (mysqlq.Snooze) ends dead the next time.")
@click.option("--claim", "claim_strategy", envvar="MYSQLQ_CLAIM", show_envvar=True,
              type=click.Choice([str(strategy) for strategy in ClaimStrategy]), default=str(ClaimStrategy.UPDATE),
              help="Claim statement: UPDATE…LIMIT then SELECT by batch_id, or SELECT…SKIP LOCKED then UPDATE.")
@click.option("--isolation", envvar="MYSQLQ_ISOLATION", show_envvar=True,
              type=click.Choice([str(level) for level in Isolation]), default=None,
              help="Transaction isolation of the worker's session [default: the server's].")
@click.option("--hint/--no-hint", envvar="MYSQLQ_HINT", show_envvar=True, default=True,
              help="Listen for has-task hints from producers (on this host and, see --hint-bind, others).")
@click.option("--hint-bind", envvar="MYSQLQ_HINT_BIND", show_envvar=True, default="auto", metavar="ADDR[:PORT]",
              help="UDP address for signed hints from producers on other hosts: ADDR[:PORT] ([ADDR]:PORT for "
              "IPv6; port 0: any), off, or auto = this host's address on the route to the database, any port "
              "(none when the database is reached through loopback or a unix socket).")
@click.option("--hint-dir", envvar="MYSQLQ_HINT_DIR", show_envvar=True, default=None,
              help="Directory of hint sockets [default: /run/mysqlq, created if missing and allowed; else a per-user "
              "temp dir].")
@click.option("--retain-done", metavar="AGE", envvar="MYSQLQ_RETAIN_DONE", show_envvar=True, default="7d",
              callback=_retention,
              help="Delete done and cancelled jobs this long after they ended (90s, 30m, 12h, 7d; 0 or off: keep).")
@click.option("--retain-dead", metavar="AGE", envvar="MYSQLQ_RETAIN_DEAD", show_envvar=True, default="30d",
              callback=_retention,
              help="Delete dead jobs this long after they ended (0 or off: keep).")
@click.option("--schedule", metavar="FILE", envvar="MYSQLQ_SCHEDULE", show_envvar=True, default=None,
              help="A TOML file of recurring jobs, enqueued by the worker leading the reaper (give every worker "
              "the same file; see `mysqlq schedule list`).")
@click.option("--burst", is_flag=True, envvar="MYSQLQ_BURST", show_envvar=True,
              help="Drain what is ready, then exit 0 (a worker started beside others waits a moment for jobs "
              "their first claims give back before it calls the queues drained).")
@click.option("--metrics-port", "metrics_listen", metavar="[HOST:]PORT", envvar="MYSQLQ_METRICS_PORT",
              show_envvar=True, default=None, callback=_metrics_listen,
              help="Serve this worker's Prometheus metrics at http://HOST:PORT/metrics [default: off; HOST: "
              "127.0.0.1]. Under systemd give each instance its own port (in /etc/mysqlq/INSTANCE.env).")
@click.pass_context
def worker(ctx: click.Context, /, name: str | None, queues: tuple[str, ...] | None, **options: object) -> None:
    """Run jobs until SIGTERM: finish the jobs in flight, release the claimed rest, exit 0."""
    from mysqlq.worker.loop import Worker  # here: the other commands need none of the worker's modules

    if options["batch_size"] is None and options["concurrency"] == 1:
        options["batch_size"] = ONE_SLOT_BATCH
    cfg = settings(ctx, worker_name=name or _instance_name(), queues=queues, **options)
    raise SystemExit(Worker(cfg).run())


@main.command()
@click.option("--json", "as_json", is_flag=True, envvar="MYSQLQ_HANDLERS_JSON", show_envvar=True, help="Print JSON.")
def handlers(as_json: bool) -> None:
    """List installed handlers (entry points in group mysqlq.handlers), without importing them."""
    found = handler_registry.installed()
    if as_json:
        click.echo(json.dumps([vars(info) for info in found], indent=2))
        return
    if not found:
        click.echo("no handlers installed (declare entry points in group 'mysqlq.handlers')")
    for info in found:
        click.echo(f"{info.name}  {info.target}  ({info.distribution})")


@main.command()
@click.option("--json", "as_json", is_flag=True, envvar="MYSQLQ_WORKERS_JSON", show_envvar=True, help="Print JSON.")
@click.pass_context
def workers(ctx: click.Context, as_json: bool) -> None:
    """List registered workers: age, last heartbeat, lease, jobs running, and which one leads the reaper."""
    cfg = settings(ctx)
    db = Database(cfg.dsn, retry=CLI_RETRY)
    db.run(check_schema)
    rows = db.run(worker_store.listing)
    if as_json:
        click.echo(json.dumps(rows, indent=2, default=str))
        return
    if not rows:
        click.echo("no workers registered")
    for row in rows:
        role = "  (leader)" if row["leader"] else ""
        click.echo(f"{row['name']}  host={row['host']} pid={row['pid']} queues={row['queues']} "
                   f"up={row['age_us'] / 1e6:.0f}s heartbeat={row['heartbeat_age_us'] / 1e6:.1f}s ago "
                   f"(every {row['heartbeat_interval_us'] / 1e6:g}s, lease {row['lease_us'] / 1e6:g}s) "
                   f"running={row['running']}{role}")
