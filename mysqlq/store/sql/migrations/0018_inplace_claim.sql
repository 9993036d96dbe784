-- mysqlq schema version 18: a claim that rewrites a job's row in place. Every column a claim writes
-- is of fixed size and already holds a value, so InnoDB updates the record where it is instead of
-- deleting it and inserting it again (a NULL made a value changes the record's size); and the
-- claim, the batch's rows, the reaper and the jobs parked live (dead, cancelled, ...) share one
-- index, so that a claim moves one entry of one index. Measured in Performance ("What the lean
-- live table must change: the claim's row writes").
-- Statements are separated by lines holding only ";".
--
-- What changes in mysqlq_jobs:
--   running_batch, batch_id, worker_id   NOT NULL, 0 for none (running_batch is 0 unless running)
--   started_at, lease_until              NOT NULL, 1970-01-01 00:00:00 for none (a lease is only
--                                        read while the job runs)
--   ready_queue                          dropped (mysqlq_jobs_live finds ready jobs by status)
--   worker                               no longer written by the claim: the name of a running
--                                        job's worker is read from mysqlq_workers, and written
--                                        when the attempt ends
--   mysqlq_jobs_ready, mysqlq_jobs_state replaced by mysqlq_jobs_live
-- The history loses ready_queue first (instantly), so that both tables keep the same columns in the
-- same order. A migration stopped anywhere resumes: each ALTER is atomic, and one that dropped what it
-- drops is not run twice.
--
-- Online for producers: their INSERTs name none of these columns, and the new defaults (set first,
-- instantly) fill them in. The table is rebuilt once, with LOCK=NONE (it stays readable and
-- writable). Workers must not run during it: the previous version's claim uses an index this drops.
-- mysqlq: done if nothing is left to drop
ALTER TABLE mysqlq_jobs_history DROP COLUMN ready_queue, ALGORITHM=INSTANT
;
ALTER TABLE mysqlq_jobs
  ALTER COLUMN running_batch SET DEFAULT 0,
  ALTER COLUMN batch_id SET DEFAULT 0,
  ALTER COLUMN worker_id SET DEFAULT 0,
  ALTER COLUMN started_at SET DEFAULT '1970-01-01 00:00:00',
  ALTER COLUMN lease_until SET DEFAULT '1970-01-01 00:00:00',
  ALGORITHM=INSTANT
;
-- mysqlq: in primary-key ranges
-- Rows written before the defaults: none left NULL.
UPDATE mysqlq_jobs
   SET running_batch = COALESCE(running_batch, 0), batch_id = COALESCE(batch_id, 0),
       worker_id = COALESCE(worker_id, 0), started_at = COALESCE(started_at, '1970-01-01 00:00:00'),
       lease_until = COALESCE(lease_until, '1970-01-01 00:00:00')
 WHERE id >= %(low)s AND id < %(high)s
   AND (running_batch IS NULL OR batch_id IS NULL OR worker_id IS NULL OR started_at IS NULL
        OR lease_until IS NULL)
;
-- mysqlq: done if nothing is left to drop
-- mysqlq_jobs_live: a job not running (running_batch 0) by status and queue, in the order a claim
-- takes ready jobs (finished_at is NULL until a job ends, then the order of lists and retention);
-- a running job by its batch, whose claim moves its entry from (0, ready, ...) to after every
-- queue's ready jobs, where it meets no other claim's lock.
ALTER TABLE mysqlq_jobs
  MODIFY batch_id BIGINT UNSIGNED NOT NULL DEFAULT 0,
  MODIFY worker_id BIGINT UNSIGNED NOT NULL DEFAULT 0,
  MODIFY lease_until DATETIME(6) NOT NULL DEFAULT '1970-01-01 00:00:00',
  MODIFY started_at DATETIME(6) NOT NULL DEFAULT '1970-01-01 00:00:00',
  MODIFY running_batch BIGINT UNSIGNED NOT NULL DEFAULT 0,
  DROP KEY mysqlq_jobs_ready,
  DROP KEY mysqlq_jobs_state,
  DROP COLUMN ready_queue,
  ADD KEY mysqlq_jobs_live (running_batch, status, queue, finished_at, priority, id),
  ALGORITHM=INPLACE, LOCK=NONE
