-- mysqlq schema version 12: rate limits (mysqlq.worker.rates): at most N jobs of one bucket start
-- in any window of a period. Jobs without a limit never touch these tables.
-- Statements are separated by lines holding only ";".

-- One row per bucket in use (a handler, a handler and rate key, or a queue). Every admission to a
-- bucket first locks (and writes: Galera certifies writes) this row, so admissions to one bucket
-- happen one at a time. next_at: when the next job set aside may start at the steady rate (the
-- jobs waiting are given times in turn from it).
CREATE TABLE IF NOT EXISTS mysqlq_rate_buckets (
  bucket   VARCHAR(255) NOT NULL,
  version  BIGINT UNSIGNED NOT NULL DEFAULT 0,
  next_at  DATETIME(6) NULL,
  PRIMARY KEY (bucket)
) ENGINE=InnoDB DEFAULT CHARSET=utf8mb4 COLLATE=utf8mb4_bin
;
-- The starts of a bucket within its longest window: one row per admitted job, at the server's
-- time of admission (that job's started_at too). Rows older than the window are deleted as the
-- bucket is used, and by the leader's sweep.
CREATE TABLE IF NOT EXISTS mysqlq_rate_starts (
  bucket      VARCHAR(255) NOT NULL,
  started_at  DATETIME(6) NOT NULL,
  job_id      BIGINT UNSIGNED NOT NULL,
  PRIMARY KEY (bucket, started_at, job_id)
) ENGINE=InnoDB DEFAULT CHARSET=utf8mb4 COLLATE=utf8mb4_bin
;
-- Jobs set aside for a bucket, waiting for their turn as scheduled jobs, in order of id: a job
-- coming back at its time is admitted ahead of jobs that have not waited.
CREATE TABLE IF NOT EXISTS mysqlq_rate_waiting (
  bucket  VARCHAR(255) NOT NULL,
  job_id  BIGINT UNSIGNED NOT NULL,
  PRIMARY KEY (bucket, job_id)
) ENGINE=InnoDB DEFAULT CHARSET=utf8mb4 COLLATE=utf8mb4_bin
;
-- Limits an operator set at run time (`mysqlq limits set`): for a handler (replacing what its code
-- declares; max_starts NULL: lifted) or for a whole queue.
CREATE TABLE IF NOT EXISTS mysqlq_rate_limits (
  scope       ENUM('handler', 'queue') NOT NULL,
  name        VARCHAR(100) NOT NULL,
  max_starts  INT UNSIGNED NULL,
  period_us   BIGINT UNSIGNED NULL,
  changed_at  DATETIME(6) NOT NULL,
  PRIMARY KEY (scope, name)
) ENGINE=InnoDB DEFAULT CHARSET=utf8mb4 COLLATE=utf8mb4_bin
