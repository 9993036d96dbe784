-- mysqlq schema version 5: recurring jobs' state, and the scope of a dedupe key.
-- Statements are separated by lines holding only ";".

-- One row per schedule entry (mysqlq.leader.scheduler): the tick it enqueued last and the one due next,
-- both UTC, and the timing it was computed from (a changed cron or interval recomputes next_tick).
CREATE TABLE IF NOT EXISTS mysqlq_schedules (
  name          VARCHAR(100) NOT NULL,
  timing        VARCHAR(255) NOT NULL,
  last_tick     DATETIME(6) NULL,
  next_tick     DATETIME(6) NOT NULL,
  enqueued_at   DATETIME(6) NULL,
  last_job_id   BIGINT UNSIGNED NULL,
  PRIMARY KEY (name)
) ENGINE=InnoDB DEFAULT CHARSET=utf8mb4 COLLATE=utf8mb4_bin
;
-- How long a job holds its dedupe key: until it is purged ('forever', as before) or until it ends
-- ('active': the statements that end a job clear the key). Appended last with a constant default,
-- so both MariaDB (10.3+) and MySQL (8.0.12+) add it instantly, without copying the table.
ALTER TABLE mysqlq_jobs ADD COLUMN dedupe_scope ENUM('forever', 'active') NOT NULL DEFAULT 'forever'
