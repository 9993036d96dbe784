"""The stats command: per queue, jobs by status, the oldest ready job's age, throughput, paused."""

from __future__ import annotations

import datetime
import json
import time
from typing import Any

import click

from mysqlq.cli import main, settings
from mysqlq.core.durations import format_duration, parse_duration
from mysqlq.core.errors import ConfigError
from mysqlq.core.jobs import STATUSES
from mysqlq.store.db import CLI_RETRY, Database
from mysqlq.store.schema import check_schema
from mysqlq.store.stats import queue_stats


@main.command()
@click.option("--json", "as_json", is_flag=True, envvar="MYSQLQ_STATS_JSON", show_envvar=True,
              help="Print JSON instead of a table (one line per refresh with --watch).")
@click.option("--watch", metavar="[SECONDS]", is_flag=False, flag_value="2", default=None, envvar="MYSQLQ_STATS_WATCH",
              show_envvar=True,
              help="Refresh every SECONDS (a duration such as 5 or 1m; 2 if not given) until Ctrl-C.")
@click.pass_context
def stats(ctx: click.Context, as_json: bool, watch: str | None) -> None:
    """Per queue: jobs by status, the age of the oldest ready job, jobs done per minute over the
    last 5 minutes, whether the queue is paused, and whether it keeps no history of its done jobs
    (`mysqlq history`). A queue whose ready jobs carry fairness keys also shows the 3 keys with
    the most of them, as KEY=COUNT, and how many keys have ready jobs (`mysqlq fairness list`
    shows every key)."""
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


def _state(row: dict[str, Any]) -> str:
    state = "paused" if row["paused"] else "active"
    return state if row.get("history", True) else f"{state}, no history"


def _top_keys(row: dict[str, Any]) -> str:
    """The largest backlogs of ready jobs by fairness key, as KEY=COUNT, and how many keys there are besides."""
    if not row["top_keys"]:
        return "-"
    shown = ", ".join(f"{each['key']}={each['ready']}" for each in row["top_keys"])
    rest = row["keys_waiting"] - len(row["top_keys"])
    return f"{shown} (+{rest} more {'key' if rest == 1 else 'keys'})" if rest > 0 else shown


def _stats_text(rows: list[dict[str, Any]], as_json: bool, compact: bool = False) -> str:
    if as_json:
        return json.dumps(rows) if compact else json.dumps(rows, indent=2)
    header = ["queue", *STATUSES, "oldest_ready_s", "done/min", "state"]
    table = [[row["queue"], *(f"{row['counts'][s]}{'+' if s in row['capped'] else ''}" for s in STATUSES),
              "-" if row["oldest_ready_age"] is None else f"{row['oldest_ready_age']:.1f}",
              f"{row['throughput']['done_per_min']:g}", _state(row)] for row in rows]
    if any(row["top_keys"] for row in rows):  # a column of its own only when a queue has keyed ready jobs
        header.insert(-1, "top_keys")
        for line, row in zip(table, rows, strict=True):
            line.insert(-1, _top_keys(row))
    widths = [max(len(h), *(len(r[i]) for r in table)) if table else len(h) for i, h in enumerate(header)]
    lines = ["  ".join(h.ljust(w) for h, w in zip(header, widths, strict=True)).rstrip()]
    lines += ["  ".join(c.ljust(w) for c, w in zip(r, widths, strict=True)).rstrip() for r in table]
    if not table:
        lines.append("(no jobs)")
    return "\n".join(lines)
