"""A queue that keeps no history (`mysqlq history off`): its done jobs are deleted by the statement
that completes them, on every path that completes a job (the batch's completion, with or without the
next claim, a job with a result, a transactional handler's commit), fenced like the completion it
replaces; dead and cancelled jobs, and jobs that others wait for, are kept; other queues keep theirs."""

from __future__ import annotations

import collections

from mysqlq_harness.jobs import EVERY_JOB

from mysqlq import Job
from mysqlq.store import claims
from mysqlq.store.db import connect

from ..conftest import QueueDB


def drain(qdb: QueueDB, *args: str, workers: int = 1) -> None:
    procs = [qdb.worker("--burst", *args) for _ in range(workers)]
    for proc in procs:
        assert proc.wait(timeout=120) == 0, qdb.logs()


def by_queue(qdb: QueueDB) -> dict[tuple[str, str], int]:
    return {(queue, status): int(count) for queue, status, count in qdb.query(
        f"SELECT queue, status, COUNT(*) FROM {EVERY_JOB} GROUP BY queue, status")}


def test_done_jobs_of_a_queue_without_history_are_deleted_and_other_queues_keep_theirs(qdb: QueueDB) -> None:
    qdb.cli("history", "off", "light", check=True)
    qdb.query("CREATE TABLE test_effects (job_id BIGINT NOT NULL, attempt INT NOT NULL, KEY (job_id))")
    with qdb.producer() as producer:
        producer.enqueue_many([Job("test.record", {"tag": str(i)}, queue="light") for i in range(3000)])
        producer.enqueue_many([Job("test.record", {"tag": str(i)}, queue="kept") for i in range(200)])
        with_result = producer.enqueue("test.echo", {"value": 7}, queue="light")
        transactional = producer.enqueue("test.techo", {"value": 8}, queue="light")
        dead = producer.enqueue("test.fail", queue="light", max_attempts=1)
        chain = producer.chain(Job("test.step", {"tag": "a"}, queue="light"), Job("test.step", {"tag": "b"},
                                                                                   queue="light"))
    drain(qdb, "--queue", "light,kept", "--batch-size", "50", workers=3)
    # Every job ran exactly once; of the light queue only the dead one and the chain's parent (which
    # another job waited for) remain.
    runs = collections.Counter(record[0] for record in qdb.records())
    assert len(runs) == 3000 + 200 + 1 + 2 and set(runs.values()) == {1}
    assert by_queue(qdb) == {("light", "dead"): 1, ("light", "done"): 1, ("kept", "done"): 200}
    remaining = {int(row[0]) for row in qdb.query(f"SELECT id FROM {EVERY_JOB} WHERE queue = 'light'")}
    assert remaining == {dead, chain[0]}
    assert qdb.query("SELECT job_id FROM test_effects") == [(transactional,)]  # its effect committed
    assert with_result not in remaining
    lines = {line.split()[0]: line for line in qdb.cli("stats", check=True).stdout.splitlines()[1:]}
    assert lines["light"].endswith("active, no history") and lines["kept"].endswith("active")


def test_the_installation_default_and_a_queue_set_apart_from_it(qdb: QueueDB) -> None:
    qdb.cli("history", "off", "--all", check=True)
    qdb.cli("history", "on", "audit", check=True)
    shown = qdb.cli("history", check=True).stdout
    assert "every queue: deleted when they complete" in shown and "audit: kept" in shown
    with qdb.producer() as producer:
        producer.enqueue_many([Job("test.record", queue=queue) for queue in ("default", "audit") for _ in range(50)])
    drain(qdb, "--queue", "default,audit")
    assert by_queue(qdb) == {("audit", "done"): 50}
    qdb.cli("history", "default", "audit", check=True)
    qdb.cli("history", "on", "--all", check=True)
    assert "every queue: kept" in qdb.cli("history", check=True).stdout


def test_history_refuses_an_unclear_target(qdb: QueueDB) -> None:
    for args in (("history", "off"), ("history", "off", "q", "--all")):
        result = qdb.cli(*args)
        assert result.returncode != 0 and "give the QUEUE" in result.stderr


def test_a_deleting_completion_is_fenced_by_the_batch(qdb: QueueDB) -> None:
    """A batch taken over (its jobs released to another claim) deletes nothing of them; the worker then
    finds which of its jobs it completed: those gone, not those another batch holds."""
    with qdb.producer() as producer:
        ids = [producer.enqueue("test.record", queue="light") for _ in range(4)]
    conn = connect(qdb.settings().dsn)
    try:
        with conn.cursor() as cur:
            assert claims.claim_update(cur, "light", 501, 1, 60.0, 4) == 4
            assert claims.release(cur, 501, ids[2:]) == 2  # as the reaper would: back to ready
            assert claims.claim_update(cur, "light", 502, 2, 60.0, 4) == 2
            assert claims.complete(cur, 501, ids, discard=True) == 2
            assert claims.completed_ids(cur, 501, ids) == set(ids[:2])
            assert claims.complete_batch(cur, 502, discard=True) == 2
            assert claims.complete_batch(cur, 502, discard=True) == 0  # repeated: changes nothing
        conn.commit()
    finally:
        conn.close()
    assert qdb.scalar(f"SELECT COUNT(*) FROM {EVERY_JOB}") == 0
