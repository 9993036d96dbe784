"""The ``mysqlq`` command: a thin layer of click over the library; user errors are one line."""

from __future__ import annotations

import sys
from typing import Any

import click
import MySQLdb

from ..config import Dsn, Settings
from ..errors import MysqlqError
from ..logs import FORMATS, configure

CONTEXT = {"help_option_names": ["-h", "--help"], "max_content_width": 100, "show_default": True}


class Main(click.Group):
    """Runs a command and turns mysqlq's own errors and database errors into one line on stderr."""

    def invoke(self, ctx: click.Context) -> Any:
        try:
            return super().invoke(ctx)
        except MysqlqError as exc:
            click.echo(f"mysqlq: error: {exc}", err=True)
            sys.exit(1)
        except MySQLdb.Error as exc:
            detail = exc.args[1] if len(exc.args) > 1 else str(exc)
            click.echo(f"mysqlq: database error: {detail}", err=True)
            sys.exit(1)


@click.group(cls=Main, context_settings=CONTEXT)
@click.option("--dsn", envvar="MYSQLQ_DSN", show_envvar=True, default="mysql://root@127.0.0.1:3306/test",
              help="Database, as mysql://user:password@host:port/db (optionally ?unix_socket=/path).")
@click.option("--log-format", envvar="MYSQLQ_LOG_FORMAT", show_envvar=True, type=click.Choice(FORMATS),
              default="auto", help="auto: the journal under systemd, console lines otherwise.")
@click.option("--log-level", envvar="MYSQLQ_LOG_LEVEL", show_envvar=True, default="info",
              type=click.Choice(["debug", "info", "warning", "error"]))
@click.version_option(package_name="mysqlq")
@click.pass_context
def main(ctx: click.Context, dsn: str, log_format: str, log_level: str) -> None:
    """mysqlq: a durable job queue on the MySQL or MariaDB you already run.

    Producers enqueue jobs; `mysqlq worker` processes run them through handlers installed as
    entry points (group mysqlq.handlers). Every option can also be set with the MYSQLQ_*
    variable shown beside it.
    """
    configure(log_format, log_level)
    ctx.obj = dsn


def settings(ctx: click.Context, **values: Any) -> Settings:
    """Settings from the group's DSN and a command's options (None means: keep the default)."""
    given = {key: value for key, value in values.items() if value is not None}
    return Settings(dsn=Dsn.parse(ctx.find_root().obj), **given)


# Command modules register themselves on ``main``.
from . import deploy, ops, produce, run, schedule  # noqa: E402, F401
