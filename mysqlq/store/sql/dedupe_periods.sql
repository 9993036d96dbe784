-- Dedupe keys held for a period (mysqlq.store.dedupe_periods). Same conventions as queries.sql.
-- A key of this scope is a row of mysqlq_dedupe_periods (schema 20): the job that took it and when
-- its period ends. Times are UTC_TIMESTAMP, not NOW: an application's own connection (the outbox
-- form) may be in another time zone.

-- name: take_dedupe_period
-- Take a key for a period, in the enqueue's transaction, before the job is inserted. A new key is
-- inserted; a key whose period has ended is taken over in place. Either way its job_id is 0 until
-- hold_dedupe_period names the job, and LAST_INSERT_ID() is 0 for this statement. A key still held
-- is left as it is, and LAST_INSERT_ID(job_id) makes the statement's insert id its job's. The row is
-- locked in both cases, so a second producer of the key waits here for the first one's commit and
-- then finds the key held (or, if the first rolled back, takes it). A held row whose job_id is 0 was
-- taken by an enqueue that committed without its job (autocommit, between the statements): taken over.
-- The assignments run in order: expires_at is renewed only where job_id was just set to 0.
INSERT INTO mysqlq_dedupe_periods (dedupe_key, job_id, expires_at)
VALUES (%(key)s, 0, UTC_TIMESTAMP(6) + INTERVAL %(period_us)s MICROSECOND)
ON DUPLICATE KEY UPDATE
  job_id = IF(expires_at > UTC_TIMESTAMP(6) AND job_id > 0, LAST_INSERT_ID(job_id), 0),
  expires_at = IF(job_id = 0, UTC_TIMESTAMP(6) + INTERVAL %(period_us)s MICROSECOND, expires_at);

-- name: hold_dedupe_period
-- Name the job a key was just taken for (take_dedupe_period), in the same transaction.
UPDATE mysqlq_dedupe_periods SET job_id = %(job_id)s WHERE dedupe_key = %(key)s;

-- name: dedupe_period_job
-- The job holding a key for a period that has not ended (Producer.job(dedupe_key=…) when no live
-- job holds the key in mysqlq_jobs.dedupe_key).
SELECT job_id FROM mysqlq_dedupe_periods
 WHERE dedupe_key = %(key)s AND expires_at > UTC_TIMESTAMP(6) AND job_id > 0;

-- name: delete_expired_dedupe_periods
-- Retention: forget up to a batch of keys whose period has ended, oldest first, by the expiry index.
-- A key taken over meanwhile has a new expiry and is no longer matched (the delete re-reads the rows it
-- locks); a key deleted is inserted anew by its next enqueue.
DELETE FROM mysqlq_dedupe_periods WHERE expires_at <= UTC_TIMESTAMP(6) ORDER BY expires_at LIMIT %(limit)s;
