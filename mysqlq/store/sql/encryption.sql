-- Encryption at rest (mysqlq.store.encryption): what `mysqlq keys rotate` reads and rewrites. Nothing
-- here runs unless an operator asks.

-- name: waiting_sealable
-- Jobs after an id, in id order, that have not started (and dead ones, which `mysqlq retry` brings
-- back): their payload and last error, to be re-encrypted with the newest key. A plain read, no lock.
SELECT id, queue, handler, payload, last_error
  FROM mysqlq_jobs
 WHERE id > %(after)s AND status IN ('ready', 'scheduled', 'blocked', 'waiting', 'dead')
 ORDER BY id
 LIMIT %(limit)s;

-- name: reseal_job
-- Write a job's re-encrypted payload and last error, fenced: only while it has still not started (or
-- is still dead) and both columns still hold what was read. A job claimed, retried or changed since
-- is left alone (0 rows): its payload was read as it was, and the next rotation takes it.
UPDATE mysqlq_jobs
   SET payload = %(payload)s, last_error = %(error)s
 WHERE id = %(id)s AND status IN ('ready', 'scheduled', 'blocked', 'waiting', 'dead')
   AND payload = %(was_payload)s AND last_error <=> %(was_error)s;
