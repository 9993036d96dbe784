-- mysqlq schema version 6: narrow indexes, so that each change of a job's status touches as few
-- index entries as possible (README: "The layout of mysqlq_jobs").
-- Statements are separated by lines holding only ";". Every step is online: columns are added
-- instantly, indexes are built with LOCK=NONE, and the backfill runs in short primary-key ranges.
--
-- Three columns hold a value only while a job is in one state, and NULL otherwise:
--   ready_queue   = queue    while ready      (the claim's index; a claim sets it NULL)
--   running_batch = batch_id while running   (read-back, fences, leases, the reaper)
--   scheduled_at  = run_at   while scheduled  (promotion and the poll's next due time)
-- Every statement that changes a job's status writes them. Inserts need not name them: their
-- defaults compute them from status, queue, batch_id and run_at, so any INSERT (a producer of the previous
-- version still running during the upgrade, too) gives a correct row.

ALTER TABLE mysqlq_jobs
  ADD COLUMN ready_queue VARCHAR(100) NULL,
  ADD COLUMN running_batch BIGINT UNSIGNED NULL,
  ADD COLUMN scheduled_at DATETIME(6) NULL,
  ALGORITHM=INSTANT
;
ALTER TABLE mysqlq_jobs
  ALTER COLUMN ready_queue SET DEFAULT (IF(status = 'ready', queue, NULL)),
  ALTER COLUMN running_batch SET DEFAULT (IF(status = 'running', batch_id, NULL)),
  ALTER COLUMN scheduled_at SET DEFAULT (IF(status = 'scheduled', run_at, NULL)),
  ALGORITHM=INSTANT
;
-- mysqlq: in primary-key ranges
-- Rows that existed before the defaults did (only ready, scheduled and running rows change).
UPDATE mysqlq_jobs
   SET ready_queue = IF(status = 'ready', queue, NULL),
       running_batch = IF(status = 'running', batch_id, NULL),
       scheduled_at = IF(status = 'scheduled', run_at, NULL)
 WHERE id >= %(low)s AND id < %(high)s AND status IN ('ready', 'scheduled', 'running')
;
-- The claim walks ready rows of one queue in (priority, id) order. ready_queue is descending so
-- that the rows a claim takes (now NULL) land after every queue's ready rows, not just before the
-- first one, where they would meet the next claim's lock on its first row (a deadlock).
-- mysqlq_jobs_state: running rows by batch; every other row by status, queue and finish time
-- (live counts, history counts, throughput, retention). A change of status moves the entry once.
ALTER TABLE mysqlq_jobs
  ADD KEY mysqlq_jobs_ready (ready_queue DESC, priority, id),
  ADD KEY mysqlq_jobs_state (running_batch, status, queue, finished_at),
  ADD KEY mysqlq_jobs_scheduled (scheduled_at),
  ALGORITHM=INPLACE, LOCK=NONE
;
ALTER TABLE mysqlq_jobs
  DROP KEY mysqlq_jobs_claim,
  DROP KEY mysqlq_jobs_status_run_at,
  DROP KEY mysqlq_jobs_batch,
  DROP KEY mysqlq_jobs_finished,
  ALGORITHM=INPLACE, LOCK=NONE
