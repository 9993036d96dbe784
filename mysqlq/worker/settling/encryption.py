"""The worker's side of encryption at rest: payloads opened as they are claimed, what is written sealed.

A worker with keys opens every claimed payload once, so that what reads it next (rate keys, the
handler) sees plain JSON. A payload it cannot open stays as stored: the job then fails without
running (:func:`refusal`), with an error that names the key, and is retried as usual, so that a
worker that has the key may take it. Without keys nothing here runs for a plaintext job.
"""

from __future__ import annotations

import contextlib

from mysqlq.core.encryption import PREFIX_BYTES, EncryptedValue, Keyring, key_id_of, missing_key
from mysqlq.core.jobs import ClaimedJob


def open_payloads(jobs: list[ClaimedJob], keys: Keyring) -> list[ClaimedJob]:
    """``jobs`` with their encrypted payloads decrypted; one that does not open is left as stored."""
    for n, job in enumerate(jobs):
        payload = job.payload
        if payload.startswith(PREFIX_BYTES):
            with contextlib.suppress(EncryptedValue):  # if not, refusal() says why when the job comes to run
                jobs[n] = job._replace(payload=keys.open_payload(payload, job.queue, job.handler))
    return jobs


def refusal(job: ClaimedJob, keys: Keyring | None) -> str | None:
    """Why a job whose payload is not JSON must not run, when it is encrypted: its key is missing
    here, or it does not open (moved from another job, or altered). None for a payload not encrypted."""
    key_id = key_id_of(job.payload)
    if key_id is None:
        return None
    if keys is None:
        return missing_key("payload", key_id) + "; not run"
    try:
        keys.open_payload(job.payload, job.queue, job.handler)
    except EncryptedValue as exc:
        return f"{exc}; not run"
    return None


def sealed_error(error: str, job_id: int, keys: Keyring | None) -> str:
    """A handler's error as written: encrypted, bound to its job, when the worker has keys."""
    return error if keys is None or not error else keys.seal_error(error, job_id)


def sealed_result(result: bytes | None, job_id: int, keys: Keyring | None) -> bytes | None:
    """A handler's return value (JSON) as written: encrypted, bound to its job, when the worker has keys."""
    return result if keys is None or result is None else keys.seal_result(result, job_id)

