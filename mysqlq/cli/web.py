"""The ``mysqlq web`` command: serve /metrics and the dashboard with waitress."""

from __future__ import annotations

import os

import click
from click.core import ParameterSource

from mysqlq.cli import main, settings
from mysqlq.core import secrets
from mysqlq.core.addresses import parse_address
from mysqlq.core.errors import ConfigError
from mysqlq.store.db import CLI_RETRY, Database
from mysqlq.store.schema import check_schema


@main.command()
@click.option("--bind", envvar="MYSQLQ_WEB_BIND", show_envvar=True, default="127.0.0.1:8080",
              help="Address to listen on, HOST:PORT.")
@click.option("--token", envvar="MYSQLQ_WEB_TOKEN", show_envvar=True, default=None, show_default=False,
              help="Require this access token on every request (header `Authorization: Bearer TOKEN`, or the "
              "login form's cookie). Prefer a file: a command line is visible to every user, a variable to "
              "the process's children.")
@click.option("--token-file", envvar="MYSQLQ_WEB_TOKEN_FILE", show_envvar=True, default=None, metavar="PATH",
              help="Read the access token from this file (under systemd, the credential mysqlq.web-token is read "
              "without it).")
@click.option("--read-only", envvar="MYSQLQ_WEB_READ_ONLY", show_envvar=True, is_flag=True,
              help="Hide and refuse every action (retry, cancel, pause, resume).")
@click.option("--threads", envvar="MYSQLQ_WEB_THREADS", show_envvar=True, type=click.IntRange(1, 64), default=4,
              help="Requests served at once (one database connection each).")
@click.pass_context
def web(ctx: click.Context, bind: str, token: str | None, token_file: str | None, read_only: bool,
        threads: int) -> None:
    """Serve Prometheus metrics at /metrics and a dashboard at / until SIGTERM."""
    from waitress.server import create_server

    from mysqlq.web import WebSettings, create_app

    host, port = parse_address(bind, "--bind", port_required=True, numeric=False)
    typed = {name for name in ("token", "token_file") if ctx.get_parameter_source(name) == ParameterSource.COMMANDLINE}
    found = secrets.resolve_token(token, token_file, typed=typed)
    token = found[0] if found else None
    if found and len(found[0]) < 16:
        raise ConfigError(f"{found[1].named} must be at least 16 characters (e.g. `openssl rand -hex 24`)")
    cfg = settings(ctx, hint_dir=os.environ.get("MYSQLQ_HINT_DIR") or None)
    Database(cfg.dsn, retry=CLI_RETRY).run(check_schema)
    app = create_app(WebSettings(cfg, token=token, read_only=read_only))
    try:
        server = create_server(app, host=host, port=port, threads=threads, ident="mysqlq")
    except OSError as exc:
        raise ConfigError(f"cannot listen on {bind}: {exc.strerror or exc}") from None
    mode = ", read-only" if read_only else ""
    click.echo(f"mysqlq web: serving http://{bind}/ (metrics at /metrics{mode}"
               f"{', token required' if token else ''})", err=True)
    server.run()
