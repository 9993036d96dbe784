-- Jobs that wait for other jobs (mysqlq.store.dependencies). Same conventions as queries.sql.
-- A dependent job is enqueued after locking its parents, and a parent that has dependents ends in a
-- transaction that locks it (and then its waiting dependents): the two meet on the parent's row, so
-- a dependent is either counted as waiting before the parent ends (and released by its end) or
-- enqueued after it (and sees how it ended). Jobs are always locked parents first, in id order.
-- Since schema 17 a job that ends done without dependents moves from mysqlq_jobs into
-- mysqlq_jobs_history (a job id is in exactly one of the two): the statements that look at jobs that
-- may have ended read both (in one statement, one snapshot), those about jobs that have not ended
-- (parents still to end, waiting dependents, running jobs) the live table only.

-- ---------------------------------------------------------------- enqueue

-- name: lock_parents
-- The parents a job is enqueued after that are in the live table, locked until the enqueueing
-- transaction ends (one that ends meanwhile, and moves, is waited for and then no longer here).
SELECT id, status FROM mysqlq_jobs WHERE id IN ({ids}) ORDER BY id FOR UPDATE;

-- name: lock_ended_parents
-- The parents lock_parents did not find that ended done and moved into the history (before it, or
-- while it waited for their rows): a locking read, which sees the newest committed rows (a plain
-- read sees the transaction's snapshot, which may be older than the move), shared, so that retention
-- leaves them until the transaction ends. Only ids missing from the live table are asked for: the
-- history's gaps are locked only for an id in neither table (refused), not for every live parent.
SELECT id, status FROM mysqlq_jobs_history WHERE id IN ({ids}) ORDER BY id LOCK IN SHARE MODE;

-- name: lock_dedupe_key
-- The job holding a dedupe key, locked (with the key's place in the index, when none holds it):
-- a job enqueued after others is inserted only if its key is free.
SELECT id FROM mysqlq_jobs WHERE dedupe_key = %(key)s FOR UPDATE;

-- name: add_dependencies
-- Remember which jobs a new job waits for (one row per parent), and whether it runs if one fails:
-- its parents in the live table (locked by lock_parents).
INSERT INTO mysqlq_dependencies (parent_id, child_id, run_anyway)
SELECT id, %s, %s FROM mysqlq_jobs WHERE id IN ({ids});

-- name: add_ended_dependencies
-- add_dependencies for its parents in the history (locked by lock_ended_parents).
INSERT INTO mysqlq_dependencies (parent_id, child_id, run_anyway)
SELECT id, %s, %s FROM mysqlq_jobs_history WHERE id IN ({ids});

-- name: flag_parents
-- Parents that have not ended yet now have a dependent: their ends take the releasing path (and
-- they stay in the live table).
UPDATE mysqlq_jobs SET dependents = TRUE WHERE id IN ({ids}) AND dependents IS NULL;

-- name: set_waiting
-- A new job with parents still to end waits for them (it leaves the ready and scheduled indexes);
-- with none (all ended before it was enqueued) it keeps the status it was inserted with.
UPDATE mysqlq_jobs
   SET waiting_for = %(pending)s,
       status = IF(%(pending)s > 0, 'waiting', status),
       scheduled_at = IF(%(pending)s > 0, NULL, scheduled_at)
 WHERE id = %(id)s;

-- ---------------------------------------------------------------- a parent ends

-- name: lock_own_parents
-- The releasing path of a worker's outcome: which of these jobs are still running under its batch
-- (the others were taken over), locked until the outcome and its releases commit.
SELECT id FROM mysqlq_jobs WHERE running_batch = %s AND id IN ({ids}) ORDER BY id FOR UPDATE;

-- name: dependents_of
-- The waiting-for counts to take off: per dependent of these parents, how many of them it waits
-- for, and whether it runs anyway when they fail (the same for all of a dependent's parents).
SELECT child_id, MAX(run_anyway), COUNT(*) FROM mysqlq_dependencies
 WHERE parent_id IN ({ids}) GROUP BY child_id ORDER BY child_id;

-- name: lock_waiting
-- Which of these dependents still wait (not cancelled meanwhile), locked in id order.
SELECT id FROM mysqlq_jobs WHERE id IN ({ids}) AND status = 'waiting' ORDER BY id FOR UPDATE;

-- name: count_down
-- Dependents of parents that ended: that many fewer parents to wait for.
UPDATE mysqlq_jobs SET waiting_for = waiting_for - %s WHERE status = 'waiting' AND id IN ({ids});

-- name: wake_dependents
-- Dependents whose last parent ended: ready, or scheduled when enqueued with a later run_at.
UPDATE mysqlq_jobs
   SET status = IF(run_at <= UTC_TIMESTAMP(6), 'ready', 'scheduled'),
       scheduled_at = IF(run_at <= UTC_TIMESTAMP(6), NULL, run_at)
 WHERE status = 'waiting' AND waiting_for = 0 AND id IN ({ids});

-- name: ready_queues_of
-- The queues of the dependents just made ready (their workers are hinted).
SELECT DISTINCT queue FROM mysqlq_jobs WHERE id IN ({ids}) AND status = 'ready';

-- name: cancel_dependents
-- Dependents of a parent that ended dead or cancelled (and that do not run anyway) end cancelled.
UPDATE mysqlq_jobs
   SET status = 'cancelled', finished_at = NOW(6), last_error = %s,
       dedupe_key = IF(dedupe_scope = 'active', NULL, dedupe_key)
 WHERE status = 'waiting' AND id IN ({ids});

-- name: end_parents_done
-- The releasing path's outcome for jobs of the batch that are done and returned nothing: like
-- complete_jobs, for jobs that have dependents (locked above).
UPDATE mysqlq_jobs SET status = 'done', running_batch = 0, finished_at = NOW(6), worker = {@worker_name},
       dedupe_key = IF(dedupe_scope = 'active', NULL, dedupe_key)
 WHERE running_batch = %s AND id IN ({ids});

-- name: end_parent
-- The releasing path's outcome for one job of the batch: done (with its result) or dead (with its
-- error), like complete_job_with_result and bury_job but for a job that has dependents.
UPDATE mysqlq_jobs
   SET status = %(status)s, running_batch = 0, finished_at = NOW(6), worker = {@worker_name},
       dedupe_key = IF(dedupe_scope = 'active', NULL, dedupe_key),
       result = IF(%(status)s = 'done', %(result)s, result),
       last_error = IF(%(status)s = 'dead', %(error)s, last_error)
 WHERE id = %(id)s AND running_batch = %(batch_id)s;

-- name: record_run
-- A worker that traces: the span a job with dependents ran in (mysqlq.core.tracing), for the spans
-- of its dependents to link to; in the transaction that ends it (locked above).
UPDATE mysqlq_jobs SET run_trace_context = %(context)s WHERE id = %(id)s;

-- name: reaped_parents
-- The reaper's releasing path: running jobs with dependents that reap_jobs left alone because
-- they used up their attempts (fenced and filtered like reap_jobs), locked.
SELECT j.id FROM mysqlq_jobs j FORCE INDEX (mysqlq_jobs_live) LEFT JOIN mysqlq_workers w ON w.id = j.worker_id
 WHERE j.running_batch > 0 AND j.dependents IS NOT NULL AND j.attempts >= j.max_attempts
   AND (j.worker_id IN ({ids}) OR (%s AND (j.lease_until < NOW(6) OR w.id IS NULL)))
   AND (%s IS NULL OR EXISTS (SELECT 1 FROM mysqlq_leaders l
                               WHERE l.role = 'reaper' AND l.worker_id = %s AND l.epoch = %s))
 ORDER BY j.id FOR UPDATE;

-- name: bury_reaped
-- Those jobs end dead, as reap_jobs ends the others.
UPDATE mysqlq_jobs
   SET status = 'dead', finished_at = NOW(6),
       last_error = CONCAT('worker ', COALESCE((SELECT w.name FROM mysqlq_workers w WHERE w.id = mysqlq_jobs.worker_id),
                                               worker, '?'),
                           ' was lost while running attempt ', attempts, ' of ', max_attempts),
       worker = COALESCE((SELECT w.name FROM mysqlq_workers w WHERE w.id = mysqlq_jobs.worker_id), worker),
       dedupe_key = IF(dedupe_scope = 'active', NULL, dedupe_key),
       running_batch = 0, batch_id = 0
 WHERE running_batch > 0 AND id IN ({ids});

-- ---------------------------------------------------------------- inspect

-- name: parents_of
-- A job's parents, in id order, with how they stand and what they returned (purged ones are absent),
-- at most a given number: live, or ended done and moved into the history.
(SELECT p.id, p.status, IF(%(results)s, p.result, NULL)
   FROM mysqlq_dependencies d JOIN mysqlq_jobs p ON p.id = d.parent_id
  WHERE d.child_id = %(id)s ORDER BY p.id LIMIT %(limit)s)
UNION ALL
(SELECT p.id, p.status, IF(%(results)s, p.result, NULL)
   FROM mysqlq_dependencies d JOIN mysqlq_jobs_history p ON p.id = d.parent_id
  WHERE d.child_id = %(id)s ORDER BY p.id LIMIT %(limit)s)
ORDER BY id LIMIT %(limit)s;

-- name: parents_trace_contexts
-- The spans a job's parents ran in (mysqlq.core.tracing), or, for a parent that a worker which does
-- not trace ran (or none did), the span it was enqueued in; each once, with whether it is a run's,
-- at most a given number: the links of its span when the worker traces.
-- Parents live or in the history (UNION: each context once across both).
SELECT COALESCE(p.run_trace_context, p.trace_context), p.run_trace_context IS NOT NULL
  FROM mysqlq_dependencies d JOIN mysqlq_jobs p ON p.id = d.parent_id
 WHERE d.child_id = %(id)s AND (p.run_trace_context IS NOT NULL OR p.trace_context IS NOT NULL)
UNION
SELECT COALESCE(p.run_trace_context, p.trace_context), p.run_trace_context IS NOT NULL
  FROM mysqlq_dependencies d JOIN mysqlq_jobs_history p ON p.id = d.parent_id
 WHERE d.child_id = %(id)s AND (p.run_trace_context IS NOT NULL OR p.trace_context IS NOT NULL)
 LIMIT %(limit)s;

-- name: dependents_list
-- A job's dependents, in id order, and how they stand (at most a page of them): live, or ended done
-- and moved into the history.
(SELECT c.id, c.status FROM mysqlq_dependencies d JOIN mysqlq_jobs c ON c.id = d.child_id
  WHERE d.parent_id = %(id)s ORDER BY c.id LIMIT %(limit)s)
UNION ALL
(SELECT c.id, c.status FROM mysqlq_dependencies d JOIN mysqlq_jobs_history c ON c.id = d.child_id
  WHERE d.parent_id = %(id)s ORDER BY c.id LIMIT %(limit)s)
ORDER BY id LIMIT %(limit)s;

-- name: parents_of_many
-- The parents of these jobs (a walk of a workflow, by the child's index).
SELECT DISTINCT parent_id FROM mysqlq_dependencies WHERE child_id IN ({ids});

-- name: children_of_many
-- The dependents of these jobs (a walk of a workflow, by the primary key).
SELECT DISTINCT child_id FROM mysqlq_dependencies WHERE parent_id IN ({ids});

-- name: pairs_of_children
-- (dependent, parent) for these dependents, by the child's index (a workflow's page).
SELECT child_id, parent_id FROM mysqlq_dependencies WHERE child_id IN ({ids}) ORDER BY child_id, parent_id;

-- name: delete_dependencies
-- Retention: the pairs of dependents among these ids that were deleted (by the child's index): in
-- neither the live table nor the history.
DELETE d FROM mysqlq_dependencies d
  LEFT JOIN mysqlq_jobs j ON j.id = d.child_id
  LEFT JOIN mysqlq_jobs_history h ON h.id = d.child_id
 WHERE d.child_id IN ({ids}) AND j.id IS NULL AND h.id IS NULL;
