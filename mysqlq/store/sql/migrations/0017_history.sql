-- mysqlq schema version 17: the live jobs apart from their history. mysqlq_jobs keeps the jobs that
-- are ready, scheduled, blocked, waiting or running (and, for now, those that ended dead or
-- cancelled, those with a dedupe key kept "forever", and those others waited for); a job that ends
-- done is moved into mysqlq_jobs_history by the statement that ends it, in its transaction and fenced
-- by its batch as before. The live table stays small however long the history, and the history
-- carries only the index finished jobs need.
-- Statements are separated by lines holding only ";".
--
-- Online and forward-only: producers of the previous version keep inserting into mysqlq_jobs, and
-- workers of the previous version that are still running keep marking their jobs done there (every
-- reader of a finished job reads both tables, so those stay visible); the next `mysqlq migrate` of
-- a later version, or a worker of this one, leaves them where they are. The history has the same
-- columns in the same order (new columns are added to both tables), so a row moves whole.
CREATE TABLE IF NOT EXISTS mysqlq_jobs_history (
  id BIGINT UNSIGNED NOT NULL,
  queue VARCHAR(100) NOT NULL,
  handler VARCHAR(100) NOT NULL,
  payload MEDIUMBLOB NOT NULL,
  status ENUM('ready','scheduled','running','done','dead','cancelled','blocked','waiting') NOT NULL,
  priority SMALLINT NOT NULL DEFAULT 0,
  run_at DATETIME(6) NOT NULL,
  attempts SMALLINT UNSIGNED NOT NULL DEFAULT 0,
  max_attempts SMALLINT UNSIGNED NOT NULL,
  time_limit INT UNSIGNED NULL,
  batch_id BIGINT UNSIGNED NULL,
  worker_id BIGINT UNSIGNED NULL,
  worker VARCHAR(255) NULL,
  lease_until DATETIME(6) NULL,
  enqueued_at DATETIME(6) NOT NULL,
  started_at DATETIME(6) NULL,
  finished_at DATETIME(6) NULL,
  dedupe_key VARCHAR(191) NULL,
  last_error MEDIUMTEXT NULL,
  dedupe_scope ENUM('forever','active') NOT NULL DEFAULT 'forever',
  ready_queue VARCHAR(100) NULL,
  running_batch BIGINT UNSIGNED NULL,
  scheduled_at DATETIME(6) NULL,
  concurrency_key VARCHAR(191) NULL,
  result MEDIUMBLOB NULL,
  dependents TINYINT(1) NULL,
  waiting_for INT UNSIGNED NULL,
  snoozes SMALLINT UNSIGNED NOT NULL DEFAULT 0,
  progress FLOAT NULL,
  progress_note VARCHAR(200) NULL,
  tags VARCHAR(700) NULL,
  trace_context VARCHAR(600) NULL,
  run_trace_context VARCHAR(600) NULL,
  PRIMARY KEY (id),
  -- Lists of finished jobs by status and queue, their counts, throughput and retention: the
  -- history's range of mysqlq_jobs_state, without the running rows.
  KEY mysqlq_jobs_history_ended (status, queue, finished_at)
) ENGINE=InnoDB DEFAULT CHARSET=utf8mb4 COLLATE=utf8mb4_bin
;
-- mysqlq: in primary-key ranges, as one transaction
-- The jobs that ended done before this version, moved range by range: each range's copy and delete
-- commit together, so a migration stopped anywhere resumes with nothing lost or moved twice (a row
-- already copied is skipped by the INSERT IGNORE, and deleted by the DELETE, which deletes only rows
-- the history holds). Jobs with a dedupe key kept "forever" and jobs others wait for stay.
INSERT IGNORE INTO mysqlq_jobs_history
SELECT * FROM mysqlq_jobs
 WHERE id >= %(low)s AND id < %(high)s AND status = 'done'
   AND (dedupe_key IS NULL OR dedupe_scope = 'active') AND dependents IS NULL
 FOR UPDATE
-- mysqlq: then
DELETE j FROM mysqlq_jobs j JOIN mysqlq_jobs_history h ON h.id = j.id
 WHERE j.id >= %(low)s AND j.id < %(high)s AND j.status = 'done'
   AND (j.dedupe_key IS NULL OR j.dedupe_scope = 'active') AND j.dependents IS NULL
