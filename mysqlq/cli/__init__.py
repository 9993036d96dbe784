"""The ``mysqlq`` command: a thin layer of click over the library; user errors are one line."""

from __future__ import annotations

import importlib
import sys
from pathlib import Path
from typing import Any, NoReturn, TypeVar

import click
import MySQLdb
from click.core import ParameterSource

from mysqlq.core.config import DEFAULT_DSN, Dsn, Settings, resolve_dsn
from mysqlq.core.encryption import Keyring
from mysqlq.core.envfile import EnvFiles
from mysqlq.core.errors import ConfigError, MysqlqError
from mysqlq.core.keyfile import resolve_keys
from mysqlq.core.logs import FORMATS, configure, fatal

CONTEXT = {"help_option_names": ["-h", "--help"], "max_content_width": 100, "show_default": True}
GLOBALS = "mysqlq.globals"  # ctx.meta key (meta is shared by every context of one invocation)
ENV_FILES = "mysqlq.env_files"
T = TypeVar("T")


def _remember(ctx: click.Context, param: click.Parameter, value: T) -> T:
    """Record a global option's value for the whole invocation. Parsing goes from ``mysqlq`` down to
    the command, so a value typed after the command wins over one typed before it; a value from the
    environment or a default never replaces one typed anywhere on the command line."""
    source = ctx.get_parameter_source(param.name or "")
    typed = source == ParameterSource.COMMANDLINE
    seen: dict[str, tuple[Any, bool, bool]] = ctx.meta.setdefault(GLOBALS, {})
    name = param.name or ""
    if typed or not seen.get(name, (None, False, False))[1]:
        seen[name] = (value, typed, source not in (ParameterSource.DEFAULT, ParameterSource.DEFAULT_MAP))
    return value


def _load_env_files(ctx: click.Context, param: click.Parameter, paths: tuple[Path, ...]) -> None:
    """Read --env-file (eager: before this level's other options look at the environment)."""
    files: EnvFiles = ctx.meta.setdefault(ENV_FILES, EnvFiles())
    typed = ctx.get_parameter_source(param.name or "") == ParameterSource.COMMANDLINE
    if not typed and files.files:
        return  # MYSQLQ_ENV_FILE was read already, or a file typed before the command replaced it
    for path in paths:
        if path not in files.files:
            files.load(path)


def global_options() -> list[click.Parameter]:
    """The options every command accepts, before or after its name, each with its MYSQLQ_* variable."""
    return [
        click.Option(["--dsn"], envvar="MYSQLQ_DSN", show_envvar=True, default=DEFAULT_DSN, expose_value=False,
                     callback=_remember,
                     help="Database, as mysql://user:password@host:port/db (optionally ?unix_socket=/path)."),
        click.Option(["--dsn-file"], envvar="MYSQLQ_DSN_FILE", show_envvar=True, default=None, expose_value=False,
                     callback=_remember, metavar="PATH",
                     help="Read the DSN from this file instead, e.g. /etc/credstore/mysqlq.dsn (under systemd, the "
                     "credential mysqlq.dsn is read without it)."),
        click.Option(["--password-file"], envvar="MYSQLQ_PASSWORD_FILE", show_envvar=True, default=None,
                     expose_value=False, callback=_remember, metavar="PATH",
                     help="Read the database password from this file, for a DSN without one (no URL-encoding; "
                     "under systemd, the credential mysqlq.password)."),
        click.Option(["--encryption-keys-file"], envvar="MYSQLQ_ENCRYPTION_KEYS_FILE", show_envvar=True, default=None,
                     expose_value=False, callback=_remember, metavar="PATH",
                     help="Encrypt payloads, results and errors with the keys in this file ('<key id> <base64 key>' "
                     "lines, the last one newest; under systemd, the credential mysqlq.keys)."),
        click.Option(["--log-format"], envvar="MYSQLQ_LOG_FORMAT", show_envvar=True, type=click.Choice(FORMATS),
                     default="auto", expose_value=False, callback=_remember,
                     help="auto: the journal under systemd, console lines otherwise."),
        click.Option(["--log-level"], envvar="MYSQLQ_LOG_LEVEL", show_envvar=True, default="info",
                     type=click.Choice(["debug", "info", "warning", "error"]), expose_value=False,
                     callback=_remember),
        click.Option(["--env-file"], envvar="MYSQLQ_ENV_FILE", show_envvar=True, multiple=True, is_eager=True,
                     type=click.Path(readable=False, path_type=Path), expose_value=False,
                     callback=_load_env_files,
                     help="Read MYSQLQ_* settings from VAR=value lines, e.g. /etc/mysqlq/mysqlq.env (repeat: "
                     "later files win; variables already in the environment win over files)."),
    ]


def global_value(ctx: click.Context, name: str, given: bool = False) -> Any:
    """The value of a global option (dsn, log_format, log_level) for this invocation; with ``given``,
    None unless it was given (typed, or from its variable) rather than defaulted."""
    seen: dict[str, tuple[Any, bool, bool]] = ctx.meta.get(GLOBALS, {})
    return seen[name][0] if name in seen and (seen[name][2] or not given) else None


def global_typed(ctx: click.Context, name: str) -> bool:
    """True when a global option's value was typed on the command line (not taken from a variable)."""
    seen: dict[str, tuple[Any, bool, bool]] = ctx.meta.get(GLOBALS, {})
    return name in seen and seen[name][1]


class Command(click.Command):
    """A mysqlq command: its own options plus the global ones; logging is configured just before it runs."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.params.extend(global_options())

    def invoke(self, ctx: click.Context) -> Any:
        ctx.meta["mysqlq.log_format"] = configure(global_value(ctx, "log_format") or "auto",
                                                  global_value(ctx, "log_level") or "info")
        return super().invoke(ctx)


# Which module of mysqlq.cli defines each command: a command's module is imported when the command
# is looked up, so `mysqlq worker` loads none of the others (and their stores). A test holds this
# table to what the modules register.
COMMAND_MODULES = {
    "cancel": "ops", "check": "setup", "enqueue": "produce", "fairness": "fairness", "handlers": "run",
    "history": "history", "install-systemd": "deploy", "jobs": "ops", "keys": "keys", "limits": "limits",
    "migrate": "setup", "pause": "ops", "purge": "ops", "resume": "ops", "retry": "ops", "schedule": "schedule",
    "stats": "stats", "web": "web", "worker": "run", "workers": "run",
}


class Main(click.Group):
    """The command group; runs a command and turns mysqlq's own errors and database errors into one
    line on stderr (at error priority in the journal when that is where it goes), exit 1. The top
    level imports a command's module when the command is asked for (see COMMAND_MODULES)."""

    command_class = Command
    group_class = type  # subgroups (``jobs``) are Main too, so their commands get the global options

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.params.extend(global_options())

    def list_commands(self, ctx: click.Context) -> list[str]:
        if self is main:
            return sorted(COMMAND_MODULES)
        return super().list_commands(ctx)

    def get_command(self, ctx: click.Context, cmd_name: str) -> click.Command | None:
        if self is main and cmd_name in COMMAND_MODULES and cmd_name not in self.commands:
            importlib.import_module(f"mysqlq.cli.{COMMAND_MODULES[cmd_name]}")
        return super().get_command(ctx, cmd_name)

    def parse_args(self, ctx: click.Context, args: list[str]) -> list[str]:
        try:  # an option's callback may refuse (an unreadable --env-file) before invoke() runs
            return super().parse_args(ctx, args)
        except MysqlqError as exc:
            self._fail(ctx, f"mysqlq: error: {exc}")
            raise  # not reached: _fail exits

    def invoke(self, ctx: click.Context) -> Any:
        try:
            return super().invoke(ctx)
        except MysqlqError as exc:
            self._fail(ctx, f"mysqlq: error: {exc}")
        except MySQLdb.Error as exc:
            detail = exc.args[1] if len(exc.args) > 1 else str(exc)
            self._fail(ctx, f"mysqlq: database error: {detail}")

    @staticmethod
    def _fail(ctx: click.Context, line: str) -> NoReturn:
        fmt = ctx.meta.get("mysqlq.log_format") or global_value(ctx, "log_format")
        fatal(line, fmt, command=ctx.invoked_subcommand)
        sys.exit(1)


@click.group(cls=Main, context_settings=CONTEXT)
@click.version_option(package_name="mysqlq")
def main() -> None:
    """mysqlq: a durable job queue on the MySQL or MariaDB you already run.

    Producers enqueue jobs; `mysqlq worker` processes run them through handlers installed as
    entry points (group mysqlq.handlers). Every option can also be set with the MYSQLQ_*
    variable shown beside it; --dsn, --log-format, --log-level and --env-file go before or
    after the command's name.
    """


def database(ctx: click.Context) -> Dsn:
    """The DSN of this invocation: --dsn, --dsn-file or the credential mysqlq.dsn, with the password
    from --password-file or the credential mysqlq.password when given (mysqlq.core.secrets)."""
    names = ("dsn", "dsn_file", "password_file")
    return resolve_dsn(*(global_value(ctx, name, given=True) for name in names),
                               typed={name for name in names if global_typed(ctx, name)})


def encryption_keys(ctx: click.Context) -> Keyring | None:
    """The encryption keys of this invocation: --encryption-keys-file or the credential mysqlq.keys
    (mysqlq.core.keyfile); None when neither is given."""
    return resolve_keys(global_value(ctx, "encryption_keys_file", given=True),
                        typed=global_typed(ctx, "encryption_keys_file"))


def parse_limit(value: str) -> int:
    """A --limit as typed (a whole number from 1 to 100,000); ConfigError, one line, for anything else."""
    text = value.strip()
    if not text.isdigit() or not 1 <= int(text) <= 100_000:
        raise ConfigError(f"--limit must be a whole number from 1 to 100000, got {value!r}")
    return int(text)


def settings(ctx: click.Context, **values: Any) -> Settings:
    """Settings from the global DSN and a command's options (None means: keep the default)."""
    given = {key: value for key, value in values.items() if value is not None}
    return Settings(dsn=database(ctx), keys=encryption_keys(ctx), **given)

