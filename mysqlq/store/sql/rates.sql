-- Statements of rate limits (mysqlq.worker.rates, mysqlq.store.rates). Only jobs whose handler or
-- queue has a rate limit reach them. Admissions run in a transaction that first locks the bucket's
-- row (lock_bucket), so the starts and waiting jobs of one bucket change one transaction at a time.

-- name: lock_bucket
-- Lock a bucket's row, creating it when it is not in use yet (the version is bumped so that the row
-- is written: on Galera two nodes admitting to one bucket conflict here).
INSERT INTO mysqlq_rate_buckets (bucket, version) VALUES (%(bucket)s, 1)
ON DUPLICATE KEY UPDATE version = version + 1;

-- name: bucket_state
-- The server's time (every start is stamped with it), when the next job set aside may start, and
-- the starts in the window ending now: how many, and the oldest.
SELECT NOW(6),
       (SELECT next_at FROM mysqlq_rate_buckets WHERE bucket = %(bucket)s),
       COUNT(*), MIN(started_at)
  FROM mysqlq_rate_starts
 WHERE bucket = %(bucket)s AND started_at > NOW(6) - INTERVAL %(period_us)s MICROSECOND;

-- name: oldest_starts
-- The first starts to leave the window (when jobs over the limit may take their places).
SELECT started_at FROM mysqlq_rate_starts
 WHERE bucket = %(bucket)s AND started_at > %(now)s - INTERVAL %(period_us)s MICROSECOND
 ORDER BY started_at LIMIT %(limit)s;

-- name: forget_starts
-- Starts that no window of this bucket counts any more, kept a minute at least (the starts of the
-- last minute are listed and exported).
DELETE FROM mysqlq_rate_starts
 WHERE bucket = %(bucket)s AND started_at <= %(now)s - INTERVAL %(keep_us)s MICROSECOND;

-- name: returning_jobs
-- Which of the listed jobs were set aside for this bucket before (they come back in their turn).
SELECT job_id FROM mysqlq_rate_waiting WHERE bucket = %s AND job_id IN ({ids});

-- name: first_waiting
-- Does a job other than the listed ones wait for this bucket? Then the listed ones set aside for
-- the first time queue behind it.
SELECT w.job_id FROM mysqlq_rate_waiting w JOIN mysqlq_jobs j ON j.id = w.job_id
 WHERE w.bucket = %s AND w.job_id NOT IN ({ids}) AND j.status IN ('scheduled', 'ready', 'running')
 LIMIT 1;

-- name: lock_batch_limited
-- At admission: which rate-limited jobs of a just-claimed batch are still ours, locked so that the
-- reaper cannot hand them to another worker before the admission commits (the fence).
SELECT id FROM mysqlq_jobs WHERE running_batch = %s AND id IN ({ids}) FOR UPDATE;

-- name: record_starts
-- Admitted jobs start now: their starts count in the bucket's window.
INSERT INTO mysqlq_rate_starts (bucket, started_at, job_id) VALUES {rows};

-- name: restamp_started
-- An admitted job's started_at is its admission's time, the one its start is counted at.
UPDATE mysqlq_jobs SET started_at = %s WHERE running_batch = %s AND id IN ({ids});

-- name: stop_waiting
-- Listed jobs of a bucket wait no more (admitted).
DELETE FROM mysqlq_rate_waiting WHERE bucket = %s AND job_id IN ({ids});

-- name: add_waiting
-- Jobs set aside for a bucket, waiting for their turn.
INSERT IGNORE INTO mysqlq_rate_waiting (bucket, job_id) VALUES {rows};

-- name: set_next_at
-- When the next job set aside for a bucket may start.
UPDATE mysqlq_rate_buckets SET next_at = %(next_at)s WHERE bucket = %(bucket)s;

-- name: set_aside_jobs
-- Claimed jobs of one bucket over its limit wait for their turns as scheduled jobs (each its own
-- time, {turns}: WHEN id THEN time, twice): not started, no lease, and the attempt their claim took
-- refunded. Fenced by the claim token.
UPDATE mysqlq_jobs
   SET status = 'scheduled', run_at = CASE id {turns} END, scheduled_at = CASE id {turns} END,
       running_batch = NULL, batch_id = NULL, lease_until = NULL, started_at = NULL,
       worker_id = NULL, worker = NULL, attempts = GREATEST(attempts, 1) - 1
 WHERE running_batch = %s AND id IN ({ids});

-- name: rate_overrides
-- The limits operators set (every worker keeps them; a change moves the newest changed_at).
SELECT scope, name, max_starts, period_us FROM mysqlq_rate_limits;

-- name: set_rate_limit
-- An operator sets (or, with NULLs, lifts) the limit of a handler or a queue.
INSERT INTO mysqlq_rate_limits (scope, name, max_starts, period_us, changed_at)
VALUES (%(scope)s, %(name)s, %(max_starts)s, %(period_us)s, NOW(6))
ON DUPLICATE KEY UPDATE max_starts = %(max_starts)s, period_us = %(period_us)s, changed_at = NOW(6);

-- name: reset_rate_limit
-- An operator removes what they set: a handler's own declaration applies again.
DELETE FROM mysqlq_rate_limits WHERE scope = %(scope)s AND name = %(name)s;

-- name: bucket_listing
-- Every bucket in use: starts in the last PERIOD seconds and jobs waiting (for `mysqlq limits`).
SELECT b.bucket, b.next_at,
       (SELECT COUNT(*) FROM mysqlq_rate_starts s WHERE s.bucket = b.bucket
          AND s.started_at > NOW(6) - INTERVAL %(window_us)s MICROSECOND) AS recent,
       (SELECT COUNT(*) FROM mysqlq_rate_waiting w WHERE w.bucket = b.bucket) AS waiting
  FROM mysqlq_rate_buckets b ORDER BY b.bucket LIMIT %(limit)s;

-- name: recent_starts
-- How many jobs of a bucket started in the last period (for `mysqlq limits`).
SELECT COUNT(*) FROM mysqlq_rate_starts
 WHERE bucket = %(bucket)s AND started_at > NOW(6) - INTERVAL %(period_us)s MICROSECOND;

-- name: sweep_rate_starts
-- The leader's sweep: starts older than the longest period any limit may have.
DELETE FROM mysqlq_rate_starts WHERE started_at < NOW(6) - INTERVAL 8 DAY LIMIT %(limit)s;

-- name: sweep_rate_waiting
-- The leader's sweep: jobs no longer waiting for a bucket (ended: cancelled, run by an operator; or
-- purged). One made ready at its time, or claimed and being admitted, still waits.
DELETE w FROM mysqlq_rate_waiting w LEFT JOIN mysqlq_jobs j ON j.id = w.job_id
 WHERE j.id IS NULL OR j.status NOT IN ('scheduled', 'ready', 'running');

-- name: sweep_rate_buckets
-- The leader's sweep: buckets with no recent start and nothing waiting, so the table stays as small
-- as the set of buckets in use (a row is made again at the next admission).
DELETE FROM mysqlq_rate_buckets
 WHERE (next_at IS NULL OR next_at < NOW(6))
   AND NOT EXISTS (SELECT 1 FROM mysqlq_rate_starts s WHERE s.bucket = mysqlq_rate_buckets.bucket)
   AND NOT EXISTS (SELECT 1 FROM mysqlq_rate_waiting w WHERE w.bucket = mysqlq_rate_buckets.bucket)
 LIMIT %(limit)s;
