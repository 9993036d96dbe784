-- Statements for operating a queue: inspecting jobs, retry, cancel, pause, throughput, retention.
-- Same conventions as queries.sql. A "(%(x)s IS NULL OR col = %(x)s)" filter costs nothing: the
-- parameters are inlined by the client, so the server folds the test away before planning and
-- a given value can still use an index.

-- ---------------------------------------------------------------- inspect

-- name: list_jobs
-- Jobs, newest first, optionally only of one queue, status and handler (NULL: any).
SELECT id, queue, handler, status, priority, attempts, max_attempts, worker, batch_id,
       enqueued_at, run_at, started_at, finished_at, LEFT(SUBSTRING_INDEX(last_error, '\n', 1), 200) AS error
  FROM mysqlq_jobs
 WHERE (%(queue)s IS NULL OR queue = %(queue)s)
   AND (%(status)s IS NULL OR status = %(status)s)
   AND (%(handler)s IS NULL OR handler = %(handler)s)
 ORDER BY id DESC LIMIT %(limit)s;

-- name: get_job
-- Everything about one job.
SELECT id, queue, handler, status, priority, attempts, max_attempts, time_limit, dedupe_key, dedupe_scope,
       worker, worker_id, batch_id, enqueued_at, run_at, started_at, finished_at, lease_until,
       payload, last_error
  FROM mysqlq_jobs WHERE id = %(id)s;

-- ---------------------------------------------------------------- act

-- name: lock_jobs
-- The jobs an operator names, locked (in a short transaction) until the change is written.
SELECT id, status, queue FROM mysqlq_jobs WHERE id IN ({ids}) FOR UPDATE;

-- name: retry_jobs
-- Dead jobs go back to ready with a fresh set of attempts; last_error is kept for the record.
UPDATE mysqlq_jobs
   SET status = 'ready', attempts = 0, run_at = NOW(6), finished_at = NULL, started_at = NULL,
       batch_id = NULL, lease_until = NULL
 WHERE status = 'dead' AND id IN ({ids});

-- name: dead_jobs
-- The next dead jobs, optionally of one queue (a plain read: retry_jobs re-checks the status).
SELECT id, queue FROM mysqlq_jobs
 WHERE status = 'dead' AND (%(queue)s IS NULL OR queue = %(queue)s)
 ORDER BY id LIMIT %(limit)s;

-- name: cancel_jobs
-- Ready, scheduled or blocked (waiting for a concurrency slot) jobs end cancelled (and are deleted
-- with done jobs by retention); an 'active' dedupe key is freed.
UPDATE mysqlq_jobs
   SET status = 'cancelled', finished_at = NOW(6), batch_id = NULL, lease_until = NULL,
       dedupe_key = IF(dedupe_scope = 'active', NULL, dedupe_key)
 WHERE status IN ('ready', 'scheduled', 'blocked') AND id IN ({ids});

-- name: queue_paused
-- Whether a queue is paused (no row: it never was).
SELECT paused FROM mysqlq_queues WHERE name = %(name)s;

-- name: queue_has_jobs
-- Whether any job names a queue (the claim index's first column).
SELECT EXISTS (SELECT 1 FROM mysqlq_jobs WHERE queue = %(name)s);

-- name: set_paused
-- Pause or resume a queue; workers read it at their next poll.
INSERT INTO mysqlq_queues (name, paused) VALUES (%(name)s, %(paused)s)
ON DUPLICATE KEY UPDATE paused = %(paused)s;

-- ---------------------------------------------------------------- stats

-- name: paused_queues
-- Every paused queue.
SELECT name FROM mysqlq_queues WHERE paused ORDER BY name;

-- name: throughput
-- Per queue, the jobs that ended done or dead in the last window: a range of mysqlq_jobs_finished,
-- so it reads the jobs of the window, never the older history.
SELECT queue, SUM(status = 'done'), SUM(status = 'dead')
  FROM mysqlq_jobs FORCE INDEX (mysqlq_jobs_finished)
 WHERE finished_at >= NOW(6) - INTERVAL %(window_us)s MICROSECOND
 GROUP BY queue;

-- ---------------------------------------------------------------- retention

-- name: cutoff
-- The moment a given number of microseconds ago, on the server's clock.
SELECT NOW(6) - INTERVAL %(age_us)s MICROSECOND;

-- name: expired_jobs
-- The next jobs of one status that finished before the cutoff, walking (status, run_at, id) on from
-- the last position: run_at <= finished_at for every ended job, so the range holds them all, and
-- each batch reads on where the last one stopped (rows it kept are never read twice).
-- A plain read: delete_jobs re-checks each row.
SELECT id, run_at FROM mysqlq_jobs FORCE INDEX (mysqlq_jobs_status_run_at)
 WHERE status = %(status)s AND run_at < %(cutoff)s
   AND (run_at > %(after_run_at)s OR (run_at = %(after_run_at)s AND id > %(after_id)s))
   AND finished_at < %(cutoff)s AND (%(queue)s IS NULL OR queue = %(queue)s)
 ORDER BY run_at, id LIMIT %(limit)s;

-- name: count_expired
-- How many jobs of one status finished before the cutoff (for purge's progress bar).
SELECT COUNT(*) FROM mysqlq_jobs FORCE INDEX (mysqlq_jobs_status_run_at)
 WHERE status = %(status)s AND run_at < %(cutoff)s
   AND finished_at < %(cutoff)s AND (%(queue)s IS NULL OR queue = %(queue)s);

-- name: delete_jobs
-- Delete listed jobs by primary key, only if they still have that status and ended before the cutoff.
DELETE FROM mysqlq_jobs WHERE id IN ({ids}) AND status = %s AND finished_at < %s;

-- name: claim_maintenance
-- Take this turn of a periodic task shared by all workers: 1 (new row) or 2 (updated) when it
-- was due and is now ours until the interval has passed, 0 when it is not due yet.
INSERT INTO mysqlq_maintenance (task, next_run_at)
VALUES (%(task)s, NOW(6) + INTERVAL %(interval_us)s MICROSECOND)
ON DUPLICATE KEY UPDATE
  next_run_at = IF(next_run_at <= NOW(6), NOW(6) + INTERVAL %(interval_us)s MICROSECOND, next_run_at);

-- name: maintenance_due
-- Make a periodic task due again at once (its last turn ran out of time with work left).
UPDATE mysqlq_maintenance SET next_run_at = NOW(6) WHERE task = %(task)s;
