-- Statements of the has-task hint across hosts (mysqlq.store.hints runs them).

-- name: record_hint_address
-- A worker records where producers send its network hints and the key of its life that signs them.
UPDATE mysqlq_workers SET hint_addr = %(addr)s, hint_key = %(key)s WHERE id = %(id)s;

-- name: hint_targets
-- Producers' cheap read, every few seconds while they enqueue: every registered worker, its host,
-- pid and queues (to skip those hinted through a local socket), and where it takes network hints.
SELECT host, pid, queues, hint_addr, hint_key FROM mysqlq_workers;
