"""Schema and migrations: idempotent, versioned, and the claim reads only ready rows."""

from __future__ import annotations

import json
from typing import Any

from mysqlq.store.schema import applied_version, latest_version, migrate
from mysqlq.store.sql import migrations, query

from .conftest import QueueDB, numbers


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
    plan = qdb.query("EXPLAIN FORMAT=JSON " + claim, params)[0][0]
    assert "filesort" not in plan
    assert find_table(json.loads(plan))["key"] == "mysqlq_jobs_ready"
    # ANALYZE runs the claim and reports the rows it really read: the LIMIT, not the history.
    analyzed = find_table(json.loads(qdb.query("ANALYZE FORMAT=JSON " + claim, params)[0][0]))
    assert analyzed["r_rows"] == 10, analyzed
    assert qdb.scalar("SELECT COUNT(*) FROM mysqlq_jobs WHERE status = 'running'") == 10


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
