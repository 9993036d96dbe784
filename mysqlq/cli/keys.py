"""Encryption keys: ``mysqlq keys generate`` (a new key's line) and ``rotate`` (waiting jobs to the newest)."""

from __future__ import annotations

import click

from mysqlq.cli import main, settings
from mysqlq.core.errors import ConfigError
from mysqlq.core.keyfile import new_key_line
from mysqlq.store import encryption as store
from mysqlq.store.db import CLI_RETRY, Database
from mysqlq.store.schema import check_schema


@main.group()
def keys() -> None:
    """Keys that encrypt payloads, results and errors at rest (docs/security.md).

    The keys file holds one '<key id> <base64 key>' line per key; the last one encrypts, every one
    decrypts. Give it with --encryption-keys-file, MYSQLQ_ENCRYPTION_KEYS_FILE or, under systemd,
    the credential mysqlq.keys."""


@keys.command(name="generate")
@click.option("--id", "key_id", envvar="MYSQLQ_KEYS_ID", show_envvar=True, default=None, metavar="ID",
              help="The new key's id (letters, digits, '_', '.', '-'; at most 32). Default: the time, "
              "k20261129T155302.")
def generate_command(key_id: str | None) -> None:
    """Print a new key's line: append it to the keys file (mode 600) of every worker and producer,
    then, once all have it, run `mysqlq keys rotate`."""
    click.echo(new_key_line(key_id))


@keys.command(name="rotate")
@click.option("--batch", envvar="MYSQLQ_KEYS_BATCH", show_envvar=True, type=click.IntRange(1, 10_000), default=200,
              help="Jobs per transaction.")
@click.pass_context
def rotate_command(ctx: click.Context, batch: int) -> None:
    """Re-encrypt the jobs not started yet (and dead ones, which `mysqlq retry` brings back) with the
    newest key: their payload and last error. Jobs enqueued without keys are encrypted too.

    Safe while workers run: each write is fenced, so a job claimed or retried meanwhile is left as it
    is (run it again to take those). Once it reports no job on an older key, the older keys are
    needed only for the results and errors of jobs already ended."""
    cfg = settings(ctx)
    if cfg.keys is None:
        raise ConfigError("no encryption keys: give --encryption-keys-file, MYSQLQ_ENCRYPTION_KEYS_FILE "
                          "or the credential mysqlq.keys")
    db = Database(cfg.dsn, retry=CLI_RETRY)
    try:
        db.run(check_schema)
        done = store.reencrypt(db, cfg.keys, batch)
    finally:
        db.close()
    click.echo(f"re-encrypted {done.resealed} job(s) with key {cfg.keys.newest}; {done.current} already were"
               + (f"; {done.changed} changed meanwhile (run it again)" if done.changed else ""))
    if done.missing:
        missing = ", ".join(f"{key_id} ({count} job(s))" for key_id, count in sorted(done.missing.items()))
        raise ConfigError(f"jobs encrypted with keys not in the keys file were left as they are: {missing}")
