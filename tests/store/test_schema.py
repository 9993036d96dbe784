"""Schema and migrations: idempotent, versioned, and the claim reads only ready rows."""

from __future__ import annotations

import json
from typing import Any

from mysqlq.store.schema import applied_version, latest_version, migrate
from mysqlq.store.sql import migrations, query

from ..conftest import QueueDB, numbers
from ..plans import explain_json, reads_per_updated_row, sorts_rows, tables


def test_migrate_is_idempotent(qdb: QueueDB) -> None:
    conn = qdb.connect()
    with conn.cursor() as cur:
        assert applied_version(cur) == latest_version()
        assert migrate(cur, qdb.name) == []
        assert applied_version(cur) == latest_version()
    conn.close()
    assert qdb.scalar("SELECT COUNT(*) FROM mysqlq_schema_version") == len(migrations())


def test_tables_are_prefixed(qdb: QueueDB) -> None:
    tables = [row[0] for row in qdb.query("SHOW TABLES")]
    assert tables and all(name.startswith("mysqlq_") for name in tables)


def test_claim_reads_only_the_ready_rows_of_its_queue(qdb: QueueDB) -> None:
    # 20,000 done rows and 50 ready ones: the claim must walk the claim index from the
    # first ready row of the queue and stop after LIMIT rows, whatever history there is.
    qdb.query(f"""INSERT INTO mysqlq_jobs (queue, handler, payload, status, run_at, max_attempts, enqueued_at)
                  SELECT 'default', 'test.record', '{{}}', 'done', NOW(6), 5, NOW(6)
                    FROM {numbers(20000)}""")
    qdb.query(f"""INSERT INTO mysqlq_jobs (queue, handler, payload, status, run_at, max_attempts, enqueued_at)
                  SELECT 'default', 'test.record', '{{}}', 'ready', NOW(6), 5, NOW(6) FROM {numbers(50)}""")
    qdb.query("ANALYZE TABLE mysqlq_jobs")
    claim = query("claim_batch")
    params = {"queue": "default", "batch_id": 1, "worker_id": 1, "worker": "w", "lease_us": 1, "limit": 10}
    conn = qdb.connect()
    try:
        with conn.cursor() as cur:
            plan = explain_json(cur, claim, params)
            assert not sorts_rows(plan)
            assert [access["key"] for access in tables(json.loads(plan))] == ["mysqlq_jobs_live"]
            # The rows the server really read running the claim (its session's Handler_read_*
            # counters, on MariaDB and MySQL alike): the LIMIT's rows, each a few times, not the history.
            before = handler_reads(cur)
            cur.execute(claim, params)
            assert handler_reads(cur) - before <= reads_per_updated_row(conn) * 10 + 2
    finally:
        conn.close()
    assert qdb.scalar("SELECT COUNT(*) FROM mysqlq_jobs WHERE status = 'running'") == 10


def handler_reads(cur: Any) -> int:
    cur.execute("SHOW SESSION STATUS LIKE 'Handler_read%'")
    return sum(int(value) for _, value in cur.fetchall())


def find_table(node: Any) -> dict[str, Any]:
    """The first "table" object of an EXPLAIN/ANALYZE FORMAT=JSON plan."""
    if isinstance(node, dict):
        if "table" in node and isinstance(node["table"], dict):
            return node["table"]
        for value in node.values():
            found = find_table(value)
            if found:
                return found
    return {}
