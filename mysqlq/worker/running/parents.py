"""What a handler reads of the jobs its job waited for (``ctx.parents``), on a connection of its own.

Only jobs enqueued after others ask (and a worker that traces, for the spans their parents ran or were
enqueued in); the connection is opened on the first question and shared by
the worker's slots, one question at a time.
"""

from __future__ import annotations

import dataclasses
import threading
from collections.abc import Callable
from typing import TypeVar

from mysqlq.core.config import Settings
from mysqlq.core.encryption import EncryptedValue, Keyring, key_id_of
from mysqlq.core.jobs import Parent
from mysqlq.store import dependencies
from mysqlq.store.db import CLI_RETRY, Cursor, Database

T = TypeVar("T")


def _opened(parent: Parent, keys: Keyring) -> Parent:
    """A parent with its result decrypted; as stored when ``keys`` cannot (reading it then says why)."""
    assert parent.result_json is not None
    try:
        return dataclasses.replace(parent, result_json=keys.open_result(parent.result_json, parent.id))
    except EncryptedValue:
        return parent


class ParentsReader:
    def __init__(self, settings: Settings) -> None:
        self.settings = settings
        self._db: Database | None = None
        self._lock = threading.Lock()

    def __call__(self, job_id: int) -> list[Parent]:
        parents = self._run(lambda cur: dependencies.parents_of(cur, job_id))
        keys = self.settings.keys
        if keys is None:
            return parents  # a result encrypted all the same says so when it is read (Parent.result)
        return [_opened(parent, keys) if key_id_of(parent.result_json) else parent for parent in parents]

    def trace_contexts(self, job_id: int, limit: int) -> list[tuple[str, bool]]:
        """The spans the parents of ``job_id`` ran in (True) or were enqueued in (False): the links of
        its span, mysqlq.worker.running.job_spans."""
        return self._run(lambda cur: dependencies.parents_trace_contexts(cur, job_id, limit))

    def _run(self, question: Callable[[Cursor], T]) -> T:
        with self._lock:
            if self._db is None:
                self._db = Database(self.settings.dsn, retry=CLI_RETRY)
            return self._db.run(question)

    def close(self) -> None:
        with self._lock:
            if self._db is not None:
                self._db.close()
                self._db = None
