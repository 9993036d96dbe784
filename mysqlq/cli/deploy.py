"""Deployment: ``mysqlq install-systemd`` writes the worker template unit, its target and /etc/mysqlq."""

from __future__ import annotations

import os
import re
import shutil
import stat
import subprocess
import sys
from collections.abc import Iterable
from pathlib import Path

import click

from mysqlq.cli import main
from mysqlq.core import systemdbinding
from mysqlq.core.errors import ConfigError, MysqlqError
from mysqlq.core.secrets import DSN_CREDENTIAL, PASSWORD_CREDENTIAL, TOKEN_CREDENTIAL

TEMPLATE = "myjob@.service"


def _template_dir() -> Path:
    """The source tree's systemd/ (a checkout), else the copy a wheel installs under the prefix."""
    source = Path(__file__).resolve().parents[2] / "systemd"
    installed = Path(sys.prefix) / "share" / "mysqlq" / "systemd"
    return source if (source / TEMPLATE).is_file() else installed


TEMPLATE_DIR = _template_dir()
TARGET = "myjob.target"
PLACEHOLDER = "@MYSQLQ@"
UNIT_DIR = Path("etc/systemd/system")
CONFIG_DIR = Path("etc/mysqlq")
CREDSTORE = Path("etc/credstore")  # where systemd (251+) finds LoadCredential=NAME without a path
ENCRYPTED_CREDSTORE = Path("etc/credstore.encrypted")  # ... and LoadCredentialEncrypted=NAME
HOME_DIRS = (Path("/home"), Path("/root"), Path("/run/user"))
TMP_DIRS = (Path("/tmp"), Path("/var/tmp"))
DYNAMIC_USER = "User=mysqlq\nGroup=mysqlq\nDynamicUser=yes\n"
NAME = re.compile(r"[A-Za-z0-9_.:-]+")

EXAMPLE_ENV = """\
# mysqlq: settings for every {name}@*.service instance, one VAR=value per line (no quotes needed).
# /etc/mysqlq/INSTANCE.env (e.g. 1.env for {name}@1) is read after this file and overrides it.
# Every `mysqlq worker --help` option has a MYSQLQ_* variable. Keep this file readable by root
# only (systemd reads it before dropping privileges).

# The database (required) is not set here: its DSN, on one line such as
#   mysql://mysqlq:secret@db.example.com:3306/app
# goes in the credential {credential}, which systemd hands to the
# workers without putting it in their environment. Before the first start, create the schema:
#   {read_dsn}migrate [--create-database]
# Or only the password goes in {password_credential}, and the rest of the DSN here:
#MYSQLQ_DSN=mysql://mysqlq@db.example.com:3306/app
# (A whole DSN here, password included, works too, as in installs before the credentials.)

# Queues to work, earliest first, and jobs claimed per round trip.
#MYSQLQ_QUEUES=default
#MYSQLQ_BATCH_SIZE=100

# Seconds between polls when idle (hints from producers on this host wake workers sooner).
#MYSQLQ_POLL_INTERVAL=2

# Default seconds a job may run. A stopping worker finishes the job in hand first, so when you
# raise this, raise TimeoutStopSec= too: `systemctl edit {name}@.service`.
#MYSQLQ_TIME_LIMIT=300

#MYSQLQ_LOG_LEVEL=info

# Recurring jobs (an example with every entry commented out is in this file).
#MYSQLQ_SCHEDULE=/etc/mysqlq/schedule.toml
"""

EXAMPLE_SCHEDULE = """\
# mysqlq: recurring jobs, for workers started with MYSQLQ_SCHEDULE=/etc/mysqlq/schedule.toml (see
# mysqlq.env). Give every worker the same file; after a change, restart them: `systemctl restart
# {name}.target`. A bad entry keeps the workers from starting, with one line naming it; try a change
# first with `mysqlq check --schedule FILE`. `mysqlq schedule list` shows each entry's last and next run.

# [nightly-report]
# cron = "0 3 * * *"            # minute hour day month weekday, or @hourly, @daily, @weekly, @monthly
# timezone = "Europe/Berlin"    # an IANA name; default UTC
# handler = "report.build"      # an installed handler (`mysqlq handlers`)
# payload = {{kind = "daily"}}
# queue = "reports"             # and priority, max_attempts, time_limit, concurrency_key as for `mysqlq enqueue`

# [refresh-cache]
# every = "30s"                 # an interval instead of cron
# handler = "cache.refresh"
# dedupe_scope = "1h"           # hold each tick's key an hour (default forever: until the job is purged)
"""


WEB_UNIT = "mysqlq-web.service"
EXAMPLE_WEB_ENV = """\
# mysqlq web (mysqlq-web.service): read after mysqlq.env; the DSN comes from the same credential
# as the workers'. Keep this file readable by root only.

# Where to listen. Prometheus and browsers on other hosts need a reachable address, e.g. 0.0.0.0:8080.
#MYSQLQ_WEB_BIND=127.0.0.1:8080

# Every request must carry an access token (Prometheus: `authorization: {{credentials_file: ...}}`;
# browsers: the login form). Keep it in the credential {token_credential}:
# one line made with `openssl rand -hex 24`. Set here, it works too, but sits in the environment.
#MYSQLQ_WEB_TOKEN=

# Show the queues, refuse every action (retry, cancel, pause, resume).
#MYSQLQ_WEB_READ_ONLY=true
"""


def migrate_command(dsn: Path, encrypted: bool) -> str:
    """The start of a root shell's command line running mysqlq with the units' settings and DSN."""
    if encrypted:  # the decrypted DSN goes through a pipe, never into a file or the environment
        return f"systemd-creds decrypt {dsn} - | mysqlq --env-file /etc/mysqlq/mysqlq.env --dsn-file /dev/stdin "
    return f"mysqlq --env-file /etc/mysqlq/mysqlq.env --dsn-file {dsn} "


def credential_path(name: str, encrypted: bool = False) -> Path:
    """Where systemd finds credential ``name`` for a unit's ``LoadCredential[Encrypted]=name``."""
    return Path("/") / (ENCRYPTED_CREDSTORE if encrypted else CREDSTORE) / name


def _credstore(root: Path, encrypted: bool) -> tuple[str, Path]:
    """Make the credential store (root's alone) that the units read their secrets from, if missing."""
    store = root / (ENCRYPTED_CREDSTORE if encrypted else CREDSTORE)
    if store.is_dir():
        return ("kept", store)
    store.mkdir(mode=0o700, parents=True)
    os.chmod(store, 0o700)
    return ("made", store)


def install_web(root: Path, executable: Path, template: Path, encrypted: bool = False) -> list[tuple[str, Path]]:
    """Write mysqlq-web.service (hardened like the workers' unit) and an example web.env under ``root``."""
    try:
        source = template.read_text(encoding="utf-8")
    except OSError as exc:
        raise ConfigError(f"cannot read the web unit template: {exc}") from None
    paths = runtime_paths(executable)
    in_tmp = needs_tmp(paths)
    rendered = render_unit(source, executable, needs_home(paths), bool(hidden_from_others(paths)) or in_tmp, in_tmp,
                           encrypted)
    unit, env = root / UNIT_DIR / WEB_UNIT, root / CONFIG_DIR / "web.env"
    done = [(_write(unit, rendered, 0o644), unit)]
    example = EXAMPLE_WEB_ENV.format(token_credential=credential_path(TOKEN_CREDENTIAL, encrypted))
    done.append(("kept", env) if env.exists() else (_write(env, example, 0o600), env))
    return done


def default_executable() -> Path:
    """The installed ``mysqlq`` console script: the one running, else the venv's, else on PATH."""
    running = Path(sys.argv[0])
    if running.name == "mysqlq" and running.is_file():
        return running.absolute()
    beside = Path(sys.executable).parent / "mysqlq"
    if beside.is_file():
        return beside
    found = shutil.which("mysqlq")
    if found:
        return Path(found).absolute()
    raise ConfigError("cannot find the installed mysqlq command; pass --executable /path/to/venv/bin/mysqlq")


def interpreter(executable: Path) -> Path:
    """The interpreter named by a console script's #! line (this Python if there is none)."""
    try:
        with executable.open("rb") as script:
            first = script.readline(4096).decode(errors="replace")
    except OSError:
        first = ""
    return Path(first[2:].split()[0]) if first.startswith("#!") and first[2:].split() else Path(sys.executable)


def runtime_paths(executable: Path) -> list[Path]:
    """What the unit's process reads: the script, its interpreter (as named and resolved), import paths."""
    python = interpreter(executable)
    imports = [Path(entry) for entry in sys.path if entry and Path(entry).exists()]
    return [executable, python, python.resolve(), *imports]


def needs_home(paths: Iterable[Path]) -> bool:
    """True when one of ``paths`` lives under a home directory (then ProtectHome=read-only, not yes)."""
    return any(path.absolute().is_relative_to(home) for path in paths for home in HOME_DIRS)


def hidden_from_others(paths: Iterable[Path]) -> list[Path]:
    """Those of ``paths`` that a user other than their owners cannot read (a directory on the way lacks o+x)."""
    hidden = []
    for path in paths:
        for chain in (path.absolute(), path.resolve()):
            steps = [*reversed(chain.parents), chain]
            try:
                modes = [os.stat(step).st_mode for step in steps]
            except OSError:
                continue
            if any(not mode & stat.S_IXOTH for mode in modes[:-1]) or not modes[-1] & stat.S_IROTH:
                hidden.append(chain)
                break
    return hidden


def needs_tmp(paths: Iterable[Path]) -> bool:
    """True when the interpreter or packages live under /tmp or /var/tmp, which PrivateTmp= hides."""
    return any(path.absolute().is_relative_to(tmp) for path in paths for tmp in TMP_DIRS)


def render_unit(template: str, executable: Path, home_readable: bool = False, as_root: bool = False,
                shared_tmp: bool = False, encrypted: bool = False) -> str:
    """The template with the executable's absolute path in ExecStart; ``home_readable`` turns
    ProtectHome=yes into read-only, ``as_root`` drops the dynamic user (other hardening stays),
    ``shared_tmp`` turns PrivateTmp off (a venv under /tmp would be invisible to the worker),
    ``encrypted`` loads the credentials with LoadCredentialEncrypted= (made by systemd-creds)."""
    if PLACEHOLDER not in template:
        raise ConfigError(f"the unit template has no {PLACEHOLDER} placeholder in ExecStart")
    text = template.replace(PLACEHOLDER, str(executable))
    if encrypted:
        text = text.replace("\nLoadCredential=", "\nLoadCredentialEncrypted=")
    if home_readable:
        text = text.replace("\nProtectHome=yes\n", "\nProtectHome=read-only\n")
    if shared_tmp:
        note = "# mysqlq is installed under /tmp, which PrivateTmp= would hide.\n"
        text = text.replace("\nPrivateTmp=yes\n", f"\n{note}PrivateTmp=no\n")
    if as_root:
        text = text.replace(DYNAMIC_USER, "# Runs as root: its Python or packages are not readable by other users.\n")
    return text


def _write(path: Path, text: str, mode: int) -> str:
    """Write ``text`` atomically; returns what happened (wrote, updated, unchanged)."""
    if path.is_file() and path.read_text(encoding="utf-8") == text:
        return "unchanged"
    existed = path.exists()
    path.parent.mkdir(parents=True, exist_ok=True)
    temporary = path.with_name(f".{path.name}.tmp")
    temporary.write_text(text, encoding="utf-8")
    os.chmod(temporary, mode)
    os.replace(temporary, path)
    return "updated" if existed else "wrote"


def install(root: Path, name: str, executable: Path, template: Path, encrypted: bool = False) -> list[tuple[str, Path]]:
    """Write NAME@.service, NAME.target and (unless there are) an example env file and schedule under
    ``root``, and make the credential store the units read the DSN from (``encrypted``: the one for
    credentials made by systemd-creds).

    Returns (what happened, path) pairs; a ("warning: ...", path) pair when the unit must run as root.
    """
    if not NAME.fullmatch(name) or name.endswith((".service", ".target")):
        raise ConfigError(f"unit name {name!r} may use only letters, digits and _ . : - (no @ or .service)")
    if not executable.is_absolute() or not os.access(executable, os.X_OK):
        raise ConfigError(f"{executable} is not an absolute path to an executable mysqlq")
    try:
        source = template.read_text(encoding="utf-8")
        target_source = (template.parent / TARGET).read_text(encoding="utf-8")
    except OSError as exc:
        raise ConfigError(f"cannot read the unit template: {exc}; pass --template systemd/{TEMPLATE}") from None
    unit_dir, config_dir = root / UNIT_DIR, root / CONFIG_DIR
    paths = runtime_paths(executable)
    hidden = hidden_from_others(paths)
    unit, target = unit_dir / f"{name}@.service", unit_dir / f"{name}.target"
    in_tmp = needs_tmp(paths)  # DynamicUser= implies PrivateTmp=, so both must go
    rendered = render_unit(source, executable, needs_home(paths), bool(hidden) or in_tmp, in_tmp, encrypted)
    done = [(_write(unit, rendered, 0o644), unit), (_write(target, target_source, 0o644), target)]
    if in_tmp:
        done.append(("warning: PrivateTmp is off and the unit runs as root, since mysqlq is installed under a"
                     " temporary directory:", paths[0]))
    if hidden:
        done.append(("warning: the unit runs as root, not as a dynamic user (install mysqlq where every user can"
                     " read it for that); other users cannot read", hidden[0]))
    config_dir.mkdir(mode=0o755, parents=True, exist_ok=True)
    env = config_dir / "mysqlq.env"
    if env.exists():
        done.append(("kept", env))
    else:
        dsn = credential_path(DSN_CREDENTIAL, encrypted)
        example = EXAMPLE_ENV.format(name=name, credential=dsn, read_dsn=migrate_command(dsn, encrypted),
                                     password_credential=credential_path(PASSWORD_CREDENTIAL, encrypted))
        done.append((_write(env, example, 0o600), env))
    schedule = config_dir / "schedule.toml"  # no secrets: readable by the worker's dynamic user
    if schedule.exists():
        done.append(("kept", schedule))
    else:
        done.append((_write(schedule, EXAMPLE_SCHEDULE.format(name=name), 0o644), schedule))
    done.append(_credstore(root, encrypted))
    return done


def daemon_reload() -> None:
    """``systemctl daemon-reload``, with a one-line error when systemd is not there."""
    try:
        result = subprocess.run(["systemctl", "daemon-reload"], capture_output=True, text=True, check=False)
    except OSError as exc:
        raise MysqlqError(f"systemctl daemon-reload: {exc}; the files are written (pass --no-reload)") from None
    if result.returncode != 0:
        detail = (result.stderr.strip().splitlines() or ["failed"])[-1]
        raise MysqlqError(f"systemctl daemon-reload: {detail}; the files are written (pass --no-reload)")


@main.command(name="install-systemd")
@click.option("--name", envvar="MYSQLQ_INSTALL_NAME", show_envvar=True, default="myjob",
              help="Install as NAME@.service, so that `systemctl start NAME@1` works.")
@click.option("--root", type=click.Path(file_okay=False, path_type=Path), envvar="MYSQLQ_INSTALL_ROOT",
              show_envvar=True, default=Path("/"),
              help="Install below this directory instead of / (for images and packages; implies --no-reload).")
@click.option("--executable", type=click.Path(dir_okay=False, path_type=Path), envvar="MYSQLQ_INSTALL_EXECUTABLE",
              show_envvar=True, default=None, help="The mysqlq the unit runs [default: this one].")
@click.option("--template", type=click.Path(dir_okay=False, path_type=Path), envvar="MYSQLQ_INSTALL_TEMPLATE",
              show_envvar=True, default=TEMPLATE_DIR / TEMPLATE,
              help="The unit template (NAME.target is taken from beside it).")
@click.option("--reload/--no-reload", envvar="MYSQLQ_INSTALL_RELOAD", show_envvar=True, default=True,
              help="Run `systemctl daemon-reload` afterwards.")
@click.option("--web", is_flag=True, envvar="MYSQLQ_INSTALL_WEB", show_envvar=True,
              help=f"Also install {WEB_UNIT} (`mysqlq web`: metrics and dashboard) and an example /etc/mysqlq/web.env.")
@click.option("--credentials", type=click.Choice(["plain", "encrypted"]), envvar="MYSQLQ_INSTALL_CREDENTIALS",
              show_envvar=True, default="plain",
              help="How the units read the DSN and the dashboard's token: files in /etc/credstore/ "
              "(LoadCredential=), or files encrypted by `systemd-creds encrypt` in /etc/credstore.encrypted/ "
              "(LoadCredentialEncrypted=).")
def install_systemd(name: str, root: Path, executable: Path | None, template: Path, reload: bool, web: bool,
                    credentials: str) -> None:
    """Install the worker template unit NAME@.service (and NAME.target, which starts and stops the
    enabled instances together); instance NAME@X runs `mysqlq worker --name X`."""
    systemdbinding.require()  # a unit whose worker would stop at once without it is not written
    executable = executable.absolute() if executable else default_executable()
    encrypted = credentials == "encrypted"
    done = install(root, name, executable, template, encrypted)
    if web:
        done += install_web(root, executable, template.parent / WEB_UNIT, encrypted)
    for what, path in done:
        click.echo(f"{what} {path}")
    if reload and root.resolve() == Path("/"):
        daemon_reload()
        click.echo("systemctl daemon-reload: done")
    dsn = credential_path(DSN_CREDENTIAL, encrypted)
    store = (f"`systemd-creds encrypt --name={DSN_CREDENTIAL} - {dsn}` (type the DSN, then Ctrl-D)" if encrypted
             else f"`sudoedit {dsn}` (the DSN, on one line)")
    click.echo(f"next: write the DSN into {dsn} with {store}, the other settings into /etc/mysqlq/mysqlq.env, "
               f"run `{migrate_command(dsn, encrypted)}migrate`, then `systemctl start {name}@1 {name}@2` "
               f"(at boot: `systemctl enable {name}.target {name}@1 {name}@2`)")
    if web:
        token = credential_path(TOKEN_CREDENTIAL, encrypted)
        how = (f"`openssl rand -hex 24 | systemd-creds encrypt --name={TOKEN_CREDENTIAL} - {token}`" if encrypted
               else f"`(umask 077; openssl rand -hex 24 > {token})`")
        click.echo(f"next: make the dashboard's token with {how}, then `systemctl enable --now {WEB_UNIT}`")
