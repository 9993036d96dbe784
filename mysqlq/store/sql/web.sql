-- Statements of `mysqlq web`: what the dashboard and /metrics read that `mysqlq stats` and the
-- operations commands do not. Same conventions as queries.sql. Each one reads live work (ready,
-- scheduled, running jobs) or a window of recent history on an index, never the whole history; one
-- that may read a finished job reads the live table and mysqlq_jobs_history in the one statement
-- (a done job moves from one to the other when it ends).

-- name: web_known_queues
-- Queues that were ever paused, resumed or told whether to keep their done jobs (they may have no
-- jobs); not the installation's own row (named '').
SELECT name FROM mysqlq_queues WHERE name <> '';

-- name: web_finished_between
-- Per listed queue and finished status, the jobs that ended in (after, upto]: for each (status,
-- queue), a range of mysqlq_jobs_live in the live table and of mysqlq_jobs_history_ended in the
-- history. The queues and the bounds are given twice: once for each table.
SELECT queue, status, COUNT(*)
  FROM (SELECT queue, status FROM mysqlq_jobs FORCE INDEX (mysqlq_jobs_live)
         WHERE running_batch = 0 AND status IN ('done', 'dead', 'cancelled') AND queue IN ({ids})
           AND finished_at > %s AND finished_at <= %s
        UNION ALL
        SELECT queue, status FROM mysqlq_jobs_history FORCE INDEX (mysqlq_jobs_history_ended)
         WHERE status IN ('done', 'dead', 'cancelled') AND queue IN ({ids})
           AND finished_at > %s AND finished_at <= %s) AS ended
 GROUP BY queue, status;

-- name: web_finished_per_minute
-- Jobs of the listed queues that ended in the last hour, per queue, status and minute (0: the
-- current minute): for each (status, queue), a range of mysqlq_jobs_live in the live table and of
-- mysqlq_jobs_history_ended in the history. The queues and the minutes are given twice: once for
-- each table.
SELECT queue, status, TIMESTAMPDIFF(MINUTE, finished_at, NOW(6)) AS minutes_ago, COUNT(*)
  FROM (SELECT queue, status, finished_at FROM mysqlq_jobs FORCE INDEX (mysqlq_jobs_live)
         WHERE running_batch = 0 AND status IN ('done', 'dead', 'cancelled') AND queue IN ({ids})
           AND finished_at > NOW(6) - INTERVAL %s MINUTE
        UNION ALL
        SELECT queue, status, finished_at FROM mysqlq_jobs_history FORCE INDEX (mysqlq_jobs_history_ended)
         WHERE status IN ('done', 'dead', 'cancelled') AND queue IN ({ids})
           AND finished_at > NOW(6) - INTERVAL %s MINUTE) AS ended
 GROUP BY queue, status, minutes_ago;

-- name: web_list_jobs
-- One page of jobs, newest first, below an id (NULL: from the newest), of any status or done ones
-- (the dense part of history): of each table a walk of its primary key from the end, limit rows.
-- The caller keeps the newest limit of both (no temporary table, no sort on the server).
(SELECT id, queue, handler, status, attempts, max_attempts, {@shown_worker}, enqueued_at, finished_at,
        LEFT(SUBSTRING_INDEX(last_error, '\n', 1), 200) AS error
  FROM mysqlq_jobs
 WHERE (%(status)s IS NULL OR status = %(status)s)
   AND (%(before)s IS NULL OR id < %(before)s)
 ORDER BY id DESC LIMIT %(limit)s)
UNION ALL
(SELECT id, queue, handler, status, attempts, max_attempts, worker, enqueued_at, finished_at,
        LEFT(SUBSTRING_INDEX(last_error, '\n', 1), 200) AS error
  FROM mysqlq_jobs_history
 WHERE (%(status)s IS NULL OR status = %(status)s)
   AND (%(before)s IS NULL OR id < %(before)s)
 ORDER BY id DESC LIMIT %(limit)s);

-- name: web_jobs_by_id
-- The jobs of a workflow's page, by primary key in each table (the ids given twice; the caller
-- puts them in id order).
(SELECT id, queue, handler, status, attempts, max_attempts, {@shown_worker}, enqueued_at, finished_at,
        LEFT(SUBSTRING_INDEX(last_error, '\n', 1), 200) AS error
  FROM mysqlq_jobs WHERE id IN ({ids}))
UNION ALL
(SELECT id, queue, handler, status, attempts, max_attempts, worker, enqueued_at, finished_at,
        LEFT(SUBSTRING_INDEX(last_error, '\n', 1), 200) AS error
  FROM mysqlq_jobs_history WHERE id IN ({ids}));

-- name: web_list_jobs_in_state
-- The same page for ready, scheduled or blocked jobs: that status's range of mysqlq_jobs_live,
-- sorted (live jobs only: ended ones are listed a window of history at a time).
SELECT id, queue, handler, status, attempts, max_attempts, {@shown_worker}, enqueued_at, finished_at,
       LEFT(SUBSTRING_INDEX(last_error, '\n', 1), 200) AS error
  FROM mysqlq_jobs FORCE INDEX (mysqlq_jobs_live)
 WHERE running_batch = 0 AND status = %(status)s
   AND (%(queue)s IS NULL OR queue = %(queue)s)
   AND (%(handler)s IS NULL OR handler = %(handler)s)
   AND (%(before)s IS NULL OR id < %(before)s)
 ORDER BY id DESC LIMIT %(limit)s;

-- name: web_list_running_jobs
-- The same page for running jobs: the running rows of mysqlq_jobs_live, sorted.
SELECT id, queue, handler, status, attempts, max_attempts, {@shown_worker}, enqueued_at, finished_at,
       LEFT(SUBSTRING_INDEX(last_error, '\n', 1), 200) AS error
  FROM mysqlq_jobs FORCE INDEX (mysqlq_jobs_live)
 WHERE running_batch > 0
   AND (%(queue)s IS NULL OR queue = %(queue)s)
   AND (%(handler)s IS NULL OR handler = %(handler)s)
   AND (%(before)s IS NULL OR id < %(before)s)
 ORDER BY id DESC LIMIT %(limit)s;

-- name: web_running_jobs
-- The jobs workers hold now, for the workers page (the running rows of mysqlq_jobs_live).
SELECT worker_id, id, queue, handler, progress FROM mysqlq_jobs FORCE INDEX (mysqlq_jobs_live)
 WHERE running_batch > 0 ORDER BY worker_id, id LIMIT %(limit)s;
