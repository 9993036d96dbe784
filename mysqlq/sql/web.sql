-- Statements of `mysqlq web`: what the dashboard and /metrics read that `mysqlq stats` and the
-- operations commands do not. Same conventions as queries.sql. Each one reads live work (ready,
-- scheduled, running, dead jobs) or a window of recent history on an index, never the whole history.

-- name: web_queue_names
-- Every queue that has jobs: one index dive per queue on the claim index (a loose index scan).
SELECT DISTINCT queue FROM mysqlq_jobs FORCE INDEX (mysqlq_jobs_claim);

-- name: web_known_queues
-- Queues that were ever paused or resumed (they may have no jobs).
SELECT name FROM mysqlq_queues;

-- name: web_live_counts
-- Per queue, the jobs that are not history yet: ranges of the claim index for each (queue, status).
SELECT queue, status, COUNT(*) FROM mysqlq_jobs FORCE INDEX (mysqlq_jobs_claim)
 WHERE queue IN ({ids}) AND status IN ('ready', 'scheduled', 'running', 'dead')
 GROUP BY queue, status;

-- name: web_finished_between
-- Per queue and status, the jobs that ended in (after, upto]: a range of mysqlq_jobs_finished.
SELECT queue, status, COUNT(*) FROM mysqlq_jobs FORCE INDEX (mysqlq_jobs_finished)
 WHERE finished_at > %(after)s AND finished_at <= %(upto)s
 GROUP BY queue, status;

-- name: web_finished_per_minute
-- Jobs that ended in the last hour, per queue, status and minute (0: the current minute).
SELECT queue, status, TIMESTAMPDIFF(MINUTE, finished_at, NOW(6)) AS minutes_ago, COUNT(*)
  FROM mysqlq_jobs FORCE INDEX (mysqlq_jobs_finished)
 WHERE finished_at > NOW(6) - INTERVAL %(minutes)s MINUTE
 GROUP BY queue, status, minutes_ago;

-- name: web_list_jobs
-- One page of jobs, newest first, below an id (NULL: from the newest), optionally filtered.
SELECT id, queue, handler, status, attempts, max_attempts, worker, enqueued_at, finished_at,
       LEFT(SUBSTRING_INDEX(last_error, '\n', 1), 200) AS error
  FROM mysqlq_jobs
 WHERE (%(queue)s IS NULL OR queue = %(queue)s)
   AND (%(status)s IS NULL OR status = %(status)s)
   AND (%(handler)s IS NULL OR handler = %(handler)s)
   AND (%(before)s IS NULL OR id < %(before)s)
 ORDER BY id DESC LIMIT %(limit)s;

-- name: web_running_jobs
-- The jobs workers hold now, for the workers page (a range of (status, run_at)).
SELECT worker_id, id, queue, handler FROM mysqlq_jobs FORCE INDEX (mysqlq_jobs_status_run_at)
 WHERE status = 'running' ORDER BY worker_id, id LIMIT %(limit)s;
