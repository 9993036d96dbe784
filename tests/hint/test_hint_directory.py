"""A producer's list of where workers take network hints: read off the enqueue path, once per TTL."""

from __future__ import annotations

import socket
import time

import pytest

from mysqlq.hint import directory, wire
from mysqlq.store import hints as store

from ..conftest import QueueDB


def test_the_registry_is_read_once_per_ttl_not_on_every_enqueue(qdb: QueueDB, monkeypatch: pytest.MonkeyPatch) -> None:
    reads = []
    real = store.registered
    monkeypatch.setattr(directory.store, "registered", lambda cur: reads.append(1) or real(cur))
    started = time.monotonic()
    with qdb.producer() as producer:
        for _ in range(300):
            producer.enqueue("test.record")
    elapsed = time.monotonic() - started
    assert 1 <= len(reads) <= 2 + elapsed // directory.TTL


def test_an_enqueue_never_waits_for_the_registry_and_its_hint_follows(qdb: QueueDB) -> None:
    receiver = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    receiver.bind(("127.0.0.1", 0))
    receiver.settimeout(30)
    key = wire.new_key()
    qdb.query("INSERT INTO mysqlq_workers (name, host, pid, connection_id, queues, started_at, heartbeat_at, "
              "hint_addr, hint_key) VALUES ('elsewhere', 'other-host', 1, 0, 'default', NOW(6), NOW(6), %s, %s)",
              (f"127.0.0.1:{receiver.getsockname()[1]}", key))
    blocker = qdb.connect()
    try:
        with blocker.cursor() as cur:
            cur.execute("LOCK TABLES mysqlq_workers WRITE")  # the producer's read of the registry waits
        with qdb.producer() as producer:
            producer.enqueue("test.record")
            producer.enqueue("test.record", queue="default")
            book = directory.Directory.of(producer.settings.dsn)
            assert book.targets is None  # both enqueues returned while the read was still blocked
            with blocker.cursor() as cur:
                cur.execute("UNLOCK TABLES")
            hint = wire.Verifier(key).decode(receiver.recv(512))  # the kept hint goes out after the read
            assert (hint.queue, hint.delay) == ("default", 0.0)
    finally:
        blocker.close()
        receiver.close()
    assert qdb.statuses() == {"ready": 2}
