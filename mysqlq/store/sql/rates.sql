-- Statements of rate limits (mysqlq.worker.intake.rate_admission, mysqlq.store.rates). Only jobs whose handler or
-- queue has a rate limit reach them. Admissions run in a transaction that first locks the bucket's
-- row (lock_buckets), so the starts and waiting jobs of one bucket change one transaction at a time.

-- name: lock_buckets
-- Lock the rows of a batch's buckets, in order of name, creating those not in use yet (the version
-- is bumped so that each row is written: on Galera two nodes admitting to one bucket conflict here).
INSERT INTO mysqlq_rate_buckets (bucket) VALUES {rows}
ON DUPLICATE KEY UPDATE version = version + 1;

-- name: bucket_states
-- Each locked bucket of a batch: the server's time (every start is stamped with it), when the next
-- job set aside may start, the starts in the window ending now (how many, the oldest; {periods}:
-- WHEN bucket THEN period in microseconds, twice), and whether a job other than the batch's ({ids})
-- waits for it (then the batch's jobs set aside for the first time queue behind it).
SELECT b.bucket, NOW(6), b.next_at,
       (SELECT COUNT(*) FROM mysqlq_rate_starts s
         WHERE s.bucket = b.bucket AND s.started_at > NOW(6) - INTERVAL (CASE b.bucket {periods} END) MICROSECOND),
       (SELECT MIN(s.started_at) FROM mysqlq_rate_starts s
         WHERE s.bucket = b.bucket AND s.started_at > NOW(6) - INTERVAL (CASE b.bucket {periods} END) MICROSECOND),
       EXISTS (SELECT 1 FROM mysqlq_rate_waiting w JOIN mysqlq_jobs j ON j.id = w.job_id
                WHERE w.bucket = b.bucket AND w.job_id NOT IN ({ids})
                  AND j.status IN ('scheduled', 'ready', 'running'))
  FROM mysqlq_rate_buckets b
 WHERE b.bucket IN ({buckets});

-- name: oldest_starts
-- The first starts to leave the window (when jobs over the limit may take their places).
SELECT started_at FROM mysqlq_rate_starts
 WHERE bucket = %(bucket)s AND started_at > %(now)s - INTERVAL %(period_us)s MICROSECOND
 ORDER BY started_at LIMIT %(limit)s;

-- name: forget_starts
-- Starts that no window of these buckets counts any more, kept a minute at least (the starts of the
-- last minute are listed and exported).
DELETE FROM mysqlq_rate_starts
 WHERE bucket IN ({buckets}) AND started_at <= %s - INTERVAL %s MICROSECOND;

-- name: returning_jobs
-- Which of the listed (bucket, job) pairs were set aside before (they come back in their turn). The
-- buckets and ids listed apart give the primary key's ranges (MariaDB scans the table for a DELETE
-- by one pair alone).
SELECT bucket, job_id FROM mysqlq_rate_waiting
 WHERE bucket IN ({buckets}) AND job_id IN ({ids}) AND (bucket, job_id) IN ({rows});

-- name: lock_batch_limited
-- At admission: which rate-limited jobs of a just-claimed batch are still ours, locked so that the
-- reaper cannot hand them to another worker before the admission commits (the fence).
SELECT id FROM mysqlq_jobs WHERE running_batch = %s AND id IN ({ids}) FOR UPDATE;

-- name: start_stamp
-- The time admitted jobs start at, read last in the admission, under the buckets' locks (so no start
-- came since their state was read): their handlers are entered within the grace from it.
SELECT NOW(6);

-- name: record_starts
-- Admitted jobs start now: their starts count in the bucket's window.
INSERT INTO mysqlq_rate_starts (bucket, started_at, job_id) VALUES {rows};

-- name: restamp_started
-- An admitted job's started_at is its admission's time, the one its start is counted at.
UPDATE mysqlq_jobs SET started_at = %s WHERE running_batch = %s AND id IN ({ids});

-- name: stop_waiting
-- Listed (bucket, job) pairs wait no more (admitted); searched as returning_jobs.
DELETE FROM mysqlq_rate_waiting
 WHERE bucket IN ({buckets}) AND job_id IN ({ids}) AND (bucket, job_id) IN ({rows});

-- name: add_waiting
-- Jobs set aside for a bucket, waiting for their turn (and admitted jobs given back unrun, late: they
-- wait again, to come back ahead of the bucket's jobs that have not waited).
INSERT IGNORE INTO mysqlq_rate_waiting (bucket, job_id) VALUES {rows};

-- name: uncount_starts
-- Admitted jobs given back unrun (late: their handlers were never entered) no longer count in their
-- buckets' windows: each start's row, by its bucket, stamp (as the admission read it) and job. The
-- buckets and stamps listed apart give the primary key's ranges, as in returning_jobs.
DELETE FROM mysqlq_rate_starts
 WHERE bucket IN ({buckets}) AND started_at IN ({stamps}) AND (bucket, started_at, job_id) IN ({rows});

-- name: set_next_at
-- When the next job set aside for each listed bucket may start ({turns}: WHEN bucket THEN time).
UPDATE mysqlq_rate_buckets SET next_at = CASE bucket {turns} END WHERE bucket IN ({buckets});

-- name: set_aside_jobs
-- Claimed jobs of one bucket over its limit wait for their turns as scheduled jobs (each its own
-- time, {turns}: WHEN id THEN time, twice): not started, no lease, and the attempt their claim took
-- refunded. Fenced by the claim token.
UPDATE mysqlq_jobs
   SET status = 'scheduled', run_at = CASE id {turns} END, scheduled_at = CASE id {turns} END,
       running_batch = 0, batch_id = 0, started_at = '1970-01-01 00:00:00',
       worker_id = 0, attempts = GREATEST(attempts, 1) - 1
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
