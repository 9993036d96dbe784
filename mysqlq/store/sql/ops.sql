-- Statements for operating a queue: inspecting jobs, retry, cancel, pause, throughput, retention.
-- Same conventions as queries.sql. A "(%(x)s IS NULL OR col = %(x)s)" filter costs nothing: the
-- parameters are inlined by the client, so the server folds the test away before planning and
-- a given value can still use an index.
-- A statement that may read a finished job reads both mysqlq_jobs (the live table) and
-- mysqlq_jobs_history (where a job that ends done moves, in the transaction that ends it), in one
-- statement: one snapshot, so a job moving meanwhile is seen once. Retention's writers come in
-- pairs, one statement per table.

-- ---------------------------------------------------------------- inspect

-- name: live_listed
-- The columns of a listed job, read from the live table (the history's hold them as they are): the
-- columns a claim writes in place hold 0 or the epoch for "none" (schema 18), shown as NULL, and a
-- running job's worker is named by its registration.
id, queue, handler, status, priority, attempts, max_attempts, {@shown_worker}, NULLIF(batch_id, 0) AS batch_id,
enqueued_at, run_at, {@shown_start}, finished_at, LEFT(SUBSTRING_INDEX(last_error, '\n', 1), 200) AS error, tags

-- name: list_jobs
-- Jobs of any status, newest first, optionally only of one queue and handler (NULL: any): of each
-- table (live, then history) a walk of its primary key from the end, limit rows (with a filter, it
-- reads on until enough rows match). Up to twice limit rows, each table's newest first: the caller
-- keeps the newest limit of both (no temporary table, no sort on the server).
(SELECT {@live_listed}
  FROM mysqlq_jobs
 WHERE (%(queue)s IS NULL OR queue = %(queue)s)
   AND (%(handler)s IS NULL OR handler = %(handler)s)
 ORDER BY id DESC LIMIT %(limit)s)
UNION ALL
(SELECT id, queue, handler, status, priority, attempts, max_attempts, worker, batch_id,
        enqueued_at, run_at, started_at, finished_at, LEFT(SUBSTRING_INDEX(last_error, '\n', 1), 200) AS error, tags
  FROM mysqlq_jobs_history
 WHERE (%(queue)s IS NULL OR queue = %(queue)s)
   AND (%(handler)s IS NULL OR handler = %(handler)s)
 ORDER BY id DESC LIMIT %(limit)s);

-- name: list_jobs_in_state
-- Jobs of one status other than running in one queue, newest first (finished last, then id): of
-- each table a walk of its range (status, queue) from the end, limit rows (mysqlq_jobs_live in the
-- live table, mysqlq_jobs_history_ended in the history, each in this order with no sort), however
-- long the history. The caller keeps the newest limit of both.
(SELECT {@live_listed}
  FROM mysqlq_jobs FORCE INDEX (mysqlq_jobs_live)
 WHERE running_batch = 0 AND status = %(status)s AND queue = %(queue)s
   AND (%(handler)s IS NULL OR handler = %(handler)s)
 ORDER BY finished_at DESC, priority DESC, turn DESC, id DESC LIMIT %(limit)s)
UNION ALL
(SELECT id, queue, handler, status, priority, attempts, max_attempts, worker, batch_id,
        enqueued_at, run_at, started_at, finished_at, LEFT(SUBSTRING_INDEX(last_error, '\n', 1), 200) AS error, tags
  FROM mysqlq_jobs_history FORCE INDEX (mysqlq_jobs_history_ended)
 WHERE status = %(status)s AND queue = %(queue)s
   AND (%(handler)s IS NULL OR handler = %(handler)s)
 ORDER BY finished_at DESC, id DESC LIMIT %(limit)s);

-- name: list_jobs_between
-- Jobs with ids in [low, high), newest first, optionally of one queue, status and handler (NULL:
-- any): of each table a range of its primary key, limit rows (the caller keeps the newest limit of
-- both); so it reads at most high - low rows however rare a match is.
(SELECT {@live_listed}
  FROM mysqlq_jobs
 WHERE id >= %(low)s AND id < %(high)s
   AND (%(queue)s IS NULL OR queue = %(queue)s)
   AND (%(status)s IS NULL OR status = %(status)s)
   AND (%(handler)s IS NULL OR handler = %(handler)s)
 ORDER BY id DESC LIMIT %(limit)s)
UNION ALL
(SELECT id, queue, handler, status, priority, attempts, max_attempts, worker, batch_id,
        enqueued_at, run_at, started_at, finished_at, LEFT(SUBSTRING_INDEX(last_error, '\n', 1), 200) AS error, tags
  FROM mysqlq_jobs_history
 WHERE id >= %(low)s AND id < %(high)s
   AND (%(queue)s IS NULL OR queue = %(queue)s)
   AND (%(status)s IS NULL OR status = %(status)s)
   AND (%(handler)s IS NULL OR handler = %(handler)s)
 ORDER BY id DESC LIMIT %(limit)s);

-- name: tagged_job_ids
-- The ids of the next jobs with a tag, newest first, below an id (NULL: from the newest): a walk of
-- the tag's range of mysqlq_job_tags_tag from its end, limit entries.
SELECT job_id FROM mysqlq_job_tags FORCE INDEX (mysqlq_job_tags_tag)
 WHERE tag = %(tag)s AND (%(before)s IS NULL OR job_id < %(before)s)
 ORDER BY job_id DESC LIMIT %(limit)s;

-- name: list_jobs_by_id
-- Listed jobs (the ids tagged_job_ids found), optionally only of one queue, status and handler (each
-- given twice; NULL: any): by primary key in each table, the caller puts them newest first. The ids
-- and filters are given twice: once for the live table, once for the history.
(SELECT {@live_listed}
  FROM mysqlq_jobs
 WHERE id IN ({ids})
   AND (%s IS NULL OR queue = %s)
   AND (%s IS NULL OR status = %s)
   AND (%s IS NULL OR handler = %s))
UNION ALL
(SELECT id, queue, handler, status, priority, attempts, max_attempts, worker, batch_id,
        enqueued_at, run_at, started_at, finished_at, LEFT(SUBSTRING_INDEX(last_error, '\n', 1), 200) AS error, tags
  FROM mysqlq_jobs_history
 WHERE id IN ({ids})
   AND (%s IS NULL OR queue = %s)
   AND (%s IS NULL OR status = %s)
   AND (%s IS NULL OR handler = %s));

-- name: newest_job_id
-- The largest job id (0 without jobs): the end of each table's primary key.
SELECT GREATEST((SELECT COALESCE(MAX(id), 0) FROM mysqlq_jobs),
                (SELECT COALESCE(MAX(id), 0) FROM mysqlq_jobs_history));

-- name: list_running_jobs
-- Running jobs, newest first, optionally of one queue and handler: the running rows only.
SELECT {@live_listed}
  FROM mysqlq_jobs FORCE INDEX (mysqlq_jobs_live)
 WHERE running_batch > 0
   AND (%(queue)s IS NULL OR queue = %(queue)s)
   AND (%(handler)s IS NULL OR handler = %(handler)s)
 ORDER BY id DESC LIMIT %(limit)s;

-- name: get_job
-- Everything about one job, wherever it is (at most one row: a job is in one table): by primary key
-- in each table.
(SELECT id, queue, handler, status, priority, attempts, max_attempts, snoozes, progress, progress_note,
        time_limit, dedupe_key, dedupe_scope,
        concurrency_key, {@shown_worker}, NULLIF(worker_id, 0) AS worker_id, NULLIF(batch_id, 0) AS batch_id,
        enqueued_at, run_at, {@shown_start}, finished_at, IF(running_batch > 0, lease_until, NULL) AS lease_until,
        payload, last_error, result, tags, trace_context
  FROM mysqlq_jobs WHERE id = %(id)s)
UNION ALL
(SELECT id, queue, handler, status, priority, attempts, max_attempts, snoozes, progress, progress_note,
        time_limit, dedupe_key, dedupe_scope,
        concurrency_key, worker, worker_id, batch_id, enqueued_at, run_at, started_at, finished_at, lease_until,
        payload, last_error, result, tags, trace_context
  FROM mysqlq_jobs_history WHERE id = %(id)s);

-- ---------------------------------------------------------------- act

-- name: lock_jobs
-- The jobs an operator names, locked (in a short transaction) until the change is written: by
-- primary key in the live table, then in the history (the ids given twice). Each part reads the
-- newest committed rows, the live table first: a job moved meanwhile is found in the history (a done
-- job there gets the answer it got in the live table), and never twice. A history row is final and
-- only read: a shared lock holds it (against retention) and needs no more than SELECT on the table
-- (FOR UPDATE needs UPDATE there on MySQL, which the dashboard's grants do not give).
(SELECT id, status, queue FROM mysqlq_jobs WHERE id IN ({ids}) FOR UPDATE)
UNION ALL
(SELECT id, status, queue FROM mysqlq_jobs_history WHERE id IN ({ids}) LOCK IN SHARE MODE);

-- name: retry_jobs
-- Dead jobs go back to ready with a fresh set of attempts; last_error is kept for the record. Dead
-- jobs are live rows (only done jobs move into the history).
UPDATE mysqlq_jobs
   SET status = 'ready', attempts = 0, run_at = NOW(6), finished_at = NULL, started_at = '1970-01-01 00:00:00',
       batch_id = 0
 WHERE status = 'dead' AND id IN ({ids});

-- name: dead_jobs
-- The next dead jobs, optionally of one queue (a plain read: retry_jobs re-checks the status), in the
-- order of mysqlq_jobs_live: the dead rows only, and no sort. The live table only: retry_jobs
-- changes live rows, and dead jobs stay there (were they ever moved, both would read the history).
SELECT id, queue FROM mysqlq_jobs FORCE INDEX (mysqlq_jobs_live)
 WHERE running_batch = 0 AND status = 'dead' AND (%(queue)s IS NULL OR queue = %(queue)s)
 ORDER BY queue, finished_at, priority, turn, id LIMIT %(limit)s;

-- name: cancel_jobs
-- Ready, scheduled, blocked (waiting for a concurrency slot), waiting (for parents) or running jobs
-- end cancelled (and are deleted with done jobs by retention); an 'active' dedupe key is freed. The
-- caller then settles their keys and releases their dependents. A running job's row is
-- final at once: the worker holding it finds it so within a second (cancelled_in_hand), asks its
-- handler to stop, and writes nothing more (its fenced writes no longer match).
UPDATE mysqlq_jobs
   SET status = 'cancelled', scheduled_at = NULL, running_batch = 0, finished_at = NOW(6), batch_id = 0,
       dedupe_key = IF(dedupe_scope = 'active', NULL, dedupe_key)
 WHERE status IN ('ready', 'scheduled', 'blocked', 'waiting', 'running') AND id IN ({ids});

-- name: queue_paused
-- Whether a queue is paused (no row: it never was).
SELECT paused FROM mysqlq_queues WHERE name = %(name)s;

-- name: queue_has_jobs
-- Whether any job names a queue: one dive per status into mysqlq_jobs_live, the running rows, and
-- one dive per finished status into mysqlq_jobs_history_ended.
SELECT EXISTS (SELECT 1 FROM mysqlq_jobs FORCE INDEX (mysqlq_jobs_live)
                WHERE running_batch = 0 AND status IN ('ready', 'scheduled', 'blocked', 'waiting', 'done', 'dead',
                                                         'cancelled')
                  AND queue = %(name)s)
    OR EXISTS (SELECT 1 FROM mysqlq_jobs FORCE INDEX (mysqlq_jobs_live)
                WHERE running_batch > 0 AND queue = %(name)s)
    OR EXISTS (SELECT 1 FROM mysqlq_jobs_history FORCE INDEX (mysqlq_jobs_history_ended)
                WHERE status IN ('done', 'dead', 'cancelled') AND queue = %(name)s);

-- name: set_paused
-- Pause or resume a queue; workers read it at their next poll.
INSERT INTO mysqlq_queues (name, paused) VALUES (%(name)s, %(paused)s)
ON DUPLICATE KEY UPDATE paused = %(paused)s;

-- name: set_keep_done
-- Whether a queue (or, named '' which no queue can be, the installation) keeps its done jobs (NULL: as the installation
-- does); workers read it at their next poll.
INSERT INTO mysqlq_queues (name, keep_done) VALUES (%(name)s, %(keep)s)
ON DUPLICATE KEY UPDATE keep_done = %(keep)s;

-- name: keep_done_settings
-- Every queue told to keep its done jobs or not, and the installation ('').
SELECT name, keep_done FROM mysqlq_queues WHERE keep_done IS NOT NULL ORDER BY name;

-- ---------------------------------------------------------------- stats

-- name: paused_queues
-- Every paused queue.
SELECT name FROM mysqlq_queues WHERE paused ORDER BY name;

-- name: throughput
-- Per queue, the jobs that ended done or dead in the last window: for each listed queue, the end of
-- its (done, queue) and (dead, queue) ranges of mysqlq_jobs_live in the live table and of
-- mysqlq_jobs_history_ended in the history, never the older history. The queues and the window are
-- given twice: once for each table.
SELECT queue, SUM(status = 'done'), SUM(status = 'dead')
  FROM (SELECT queue, status FROM mysqlq_jobs FORCE INDEX (mysqlq_jobs_live)
         WHERE running_batch = 0 AND status IN ('done', 'dead') AND queue IN ({ids})
           AND finished_at >= NOW(6) - INTERVAL %s MICROSECOND
        UNION ALL
        SELECT queue, status FROM mysqlq_jobs_history FORCE INDEX (mysqlq_jobs_history_ended)
         WHERE status IN ('done', 'dead') AND queue IN ({ids})
           AND finished_at >= NOW(6) - INTERVAL %s MICROSECOND) AS ended
 GROUP BY queue;

-- ---------------------------------------------------------------- retention

-- name: cutoff
-- The moment a given number of microseconds ago, on the server's clock.
SELECT NOW(6) - INTERVAL %(age_us)s MICROSECOND;

-- name: expired_jobs
-- The next live jobs of one status and queue that finished before the cutoff, walking the range
-- (0, status, queue) of mysqlq_jobs_live on from the last position: each batch reads on where the
-- last one stopped, and stops at the cutoff (rows kept are never read).
-- A plain read: delete_jobs re-checks each row. Ordered by (finished_at, priority, turn, id), the index's
-- order within the one queue: ordered by (queue, finished_at, id) instead, MariaDB 10.11 sorted the whole
-- rest of the expired range for every batch once the history was large (Performance: Retention of
-- a large history). The history's are expired_history_jobs.
SELECT id, finished_at, priority, turn FROM mysqlq_jobs FORCE INDEX (mysqlq_jobs_live)
 WHERE running_batch = 0 AND status = %(status)s AND queue = %(queue)s AND finished_at < %(cutoff)s
   AND (finished_at > %(after_finished_at)s
        OR (finished_at = %(after_finished_at)s
            AND (priority > %(after_priority)s
                 OR (priority = %(after_priority)s
                     AND (turn > %(after_turn)s OR (turn = %(after_turn)s AND id > %(after_id)s))))))
 ORDER BY finished_at, priority, turn, id LIMIT %(limit)s;

-- name: expired_history_jobs
-- expired_jobs in the history: the next jobs of one status and queue there that finished before the
-- cutoff, walking the range (status, queue, finished_at, id) of mysqlq_jobs_history_ended on from
-- the last position, in the index's order (no sort), on the index alone (the third and fourth columns, the
-- live walk's priority and turn, are not read: this walk goes by finished_at and id). A plain read:
-- delete_history_jobs re-checks.
SELECT id, finished_at, 0, 0 FROM mysqlq_jobs_history FORCE INDEX (mysqlq_jobs_history_ended)
 WHERE status = %(status)s AND queue = %(queue)s AND finished_at < %(cutoff)s
   AND (finished_at > %(after_finished_at)s OR (finished_at = %(after_finished_at)s AND id > %(after_id)s))
 ORDER BY finished_at, id LIMIT %(limit)s;

-- name: count_expired
-- How many jobs of one status and queue finished before the cutoff (for purge's progress bar): its
-- range of mysqlq_jobs_live in the live table and of mysqlq_jobs_history_ended in the history.
SELECT (SELECT COUNT(*) FROM mysqlq_jobs FORCE INDEX (mysqlq_jobs_live)
         WHERE running_batch = 0 AND status = %(status)s AND queue = %(queue)s AND finished_at < %(cutoff)s)
     + (SELECT COUNT(*) FROM mysqlq_jobs_history FORCE INDEX (mysqlq_jobs_history_ended)
         WHERE status = %(status)s AND queue = %(queue)s AND finished_at < %(cutoff)s);

-- name: delete_jobs
-- Delete listed live jobs by primary key, only if they still have that status and ended before the
-- cutoff (expired_jobs found them; one moved into the history meanwhile is left to the history's walk).
DELETE FROM mysqlq_jobs WHERE id IN ({ids}) AND status = %s AND finished_at < %s;

-- name: delete_history_jobs
-- delete_jobs in the history: listed jobs (expired_history_jobs found them) by primary key, only if
-- they still have that status and ended before the cutoff.
DELETE FROM mysqlq_jobs_history WHERE id IN ({ids}) AND status = %s AND finished_at < %s;

-- name: delete_job_tags
-- Retention: the tag rows of the jobs among these ids that were deleted, in neither table (by
-- primary key).
DELETE t FROM mysqlq_job_tags t
  LEFT JOIN mysqlq_jobs j ON j.id = t.job_id
  LEFT JOIN mysqlq_jobs_history h ON h.id = t.job_id
 WHERE t.job_id IN ({ids}) AND j.id IS NULL AND h.id IS NULL;

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
