"""Re-encrypting waiting jobs with the newest key (``mysqlq keys rotate``), in short fenced writes."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from functools import partial
from typing import Any

from mysqlq.core.encryption import EncryptedValue, Keyring, key_id_of
from mysqlq.store import execute
from mysqlq.store.db import Connection, Cursor, Database, transaction


@dataclass
class Rotation:
    """What a rotation did: jobs re-encrypted, jobs already on the newest key, jobs changed meanwhile
    (claimed or retried: left for the next rotation), and jobs whose key is missing here (by key id)."""

    resealed: int = 0
    current: int = 0
    changed: int = 0
    missing: dict[str, int] = field(default_factory=dict)


def reencrypt(db: Database, keys: Keyring, batch: int = 200,
              progress: Callable[[Rotation], None] | None = None) -> Rotation:
    """Re-encrypt the payload and last error of every job not started yet (or dead) with the newest
    of ``keys``; a plaintext one is encrypted. One short transaction per ``batch`` jobs, each write
    fenced (see the statement reseal_job), so that workers may run meanwhile."""
    done = Rotation()
    after = 0
    while True:
        rows = db.run(partial(_read, after=after, limit=batch))
        if not rows:
            return done
        after = int(rows[-1][0])
        writes = []
        for job_id, queue, handler, payload, error in rows:
            try:
                write = _resealed(keys, int(job_id), str(queue), str(handler), bytes(payload), error)
            except EncryptedValue as exc:
                key_id = exc.key_id or "?"
                done.missing[key_id] = done.missing.get(key_id, 0) + 1
                continue
            if write is None:
                done.current += 1
            else:
                writes.append(write)
        if writes:
            written = db.run_on(partial(_write, writes=writes))
            done.resealed += written
            done.changed += len(writes) - written
        if progress is not None:
            progress(done)


def _read(cur: Cursor, after: int, limit: int) -> list[tuple[Any, ...]]:
    execute(cur, "waiting_sealable", {"after": after, "limit": limit})
    return list(cur.fetchall())


def _resealed(keys: Keyring, job_id: int, queue: str, handler: str, payload: bytes,
              error: str | None) -> dict[str, object] | None:
    """The reseal_job parameters of one job; None when both columns are sealed with the newest key."""
    payload_key, error_key = key_id_of(payload), key_id_of(error)
    if payload_key == keys.newest and (not error or error_key == keys.newest):
        return None
    plain = keys.open_payload(payload, queue, handler) if payload_key is not None else payload
    new_payload = payload if payload_key == keys.newest else keys.seal_payload(plain, queue, handler)
    new_error = error
    if error and error_key != keys.newest:
        text = keys.open_error(error, job_id) if error_key is not None else error
        new_error = keys.seal_error(text, job_id)
    return {"id": job_id, "payload": new_payload, "error": new_error, "was_payload": payload, "was_error": error}


def _write(conn: Connection, writes: list[dict[str, object]]) -> int:
    with transaction(conn), conn.cursor() as cur:
        return sum(execute(cur, "reseal_job", params) for params in writes)
