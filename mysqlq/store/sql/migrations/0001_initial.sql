-- mysqlq schema version 1: jobs, workers, queue settings.
-- Statements are separated by lines holding only ";".

CREATE TABLE IF NOT EXISTS mysqlq_jobs (
  id            BIGINT UNSIGNED NOT NULL AUTO_INCREMENT,
  queue         VARCHAR(100) NOT NULL,
  handler       VARCHAR(100) NOT NULL,
  payload       MEDIUMBLOB NOT NULL,
  status        ENUM('ready', 'scheduled', 'running', 'done', 'dead', 'cancelled') NOT NULL,
  priority      SMALLINT NOT NULL DEFAULT 0,
  run_at        DATETIME(6) NOT NULL,
  attempts      SMALLINT UNSIGNED NOT NULL DEFAULT 0,
  max_attempts  SMALLINT UNSIGNED NOT NULL,
  time_limit    INT UNSIGNED NULL,
  batch_id      BIGINT UNSIGNED NULL,
  worker_id     BIGINT UNSIGNED NULL,
  worker        VARCHAR(255) NULL,
  lease_until   DATETIME(6) NULL,
  enqueued_at   DATETIME(6) NOT NULL,
  started_at    DATETIME(6) NULL,
  finished_at   DATETIME(6) NULL,
  dedupe_key    VARCHAR(191) NULL,
  last_error    MEDIUMTEXT NULL,
  PRIMARY KEY (id),
  -- The claim reads exactly the next ready rows of one queue, in (priority, id) order,
  -- however many done rows the table holds.
  KEY mysqlq_jobs_claim (queue, status, priority, id),
  -- Promotion of due scheduled jobs, the reaper's scan of running jobs, retention of old rows.
  KEY mysqlq_jobs_status_run_at (status, run_at),
  -- Reading a claimed batch back, and every fenced write.
  KEY mysqlq_jobs_batch (batch_id),
  UNIQUE KEY mysqlq_jobs_dedupe (dedupe_key)
) ENGINE=InnoDB DEFAULT CHARSET=utf8mb4 COLLATE=utf8mb4_bin
;
CREATE TABLE IF NOT EXISTS mysqlq_workers (
  id            BIGINT UNSIGNED NOT NULL AUTO_INCREMENT,
  name          VARCHAR(255) NOT NULL,
  host          VARCHAR(255) NOT NULL,
  pid           INT UNSIGNED NOT NULL,
  connection_id BIGINT UNSIGNED NOT NULL,
  queues        VARCHAR(1000) NOT NULL,
  started_at    DATETIME(6) NOT NULL,
  heartbeat_at  DATETIME(6) NOT NULL,
  PRIMARY KEY (id),
  KEY mysqlq_workers_name (name)
) ENGINE=InnoDB DEFAULT CHARSET=utf8mb4 COLLATE=utf8mb4_bin
;
CREATE TABLE IF NOT EXISTS mysqlq_queues (
  name          VARCHAR(100) NOT NULL,
  paused        BOOLEAN NOT NULL DEFAULT FALSE,
  PRIMARY KEY (name)
) ENGINE=InnoDB DEFAULT CHARSET=utf8mb4 COLLATE=utf8mb4_bin
;
CREATE TABLE IF NOT EXISTS mysqlq_maintenance (
  task          VARCHAR(50) NOT NULL,
  next_run_at   DATETIME(6) NOT NULL,
  PRIMARY KEY (task)
) ENGINE=InnoDB DEFAULT CHARSET=utf8mb4 COLLATE=utf8mb4_bin
