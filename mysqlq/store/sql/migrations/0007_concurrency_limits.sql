-- mysqlq schema version 7: concurrency limits (mysqlq.worker.limits).
-- Statements are separated by lines holding only ";".
--
-- A job may name a concurrency key; the handler of the job says how many jobs of one key may run
-- at once. Jobs without a key never touch the tables below, and the new column is NULL for them
-- and in no index, so their claim and their outcome writes change nothing they did not before.

-- The key a job carries (NULL: none). Appended last with no default, so that both MariaDB
-- (10.3+) and MySQL (8.0.12+) add it instantly, without copying the table.
ALTER TABLE mysqlq_jobs ADD COLUMN concurrency_key VARCHAR(191) NULL
;
-- 'blocked': a job with a key that may not run yet, because its key's slots are taken. Appended
-- at the end of the ENUM, which both servers do instantly (the stored values do not change).
ALTER TABLE mysqlq_jobs
  MODIFY status ENUM('ready', 'scheduled', 'running', 'done', 'dead', 'cancelled', 'blocked') NOT NULL
;
-- One row per key in use (some job holds a slot of it or waits for one), deleted once none does.
-- Every change to a key's holders and waiters first locks (and writes: on a Galera cluster a
-- write is what two nodes' transactions conflict on) this row, so they happen one at a time.
CREATE TABLE IF NOT EXISTS mysqlq_semaphores (
  concurrency_key VARCHAR(191) NOT NULL,
  version         BIGINT UNSIGNED NOT NULL DEFAULT 0,
  PRIMARY KEY (concurrency_key)
) ENGINE=InnoDB DEFAULT CHARSET=utf8mb4 COLLATE=utf8mb4_bin
;
-- The jobs holding a slot of a key: admitted, and ready (given a slot while waiting, or returned
-- by the reaper) or running. A row per job, so giving a slot back twice is impossible.
CREATE TABLE IF NOT EXISTS mysqlq_semaphore_holders (
  concurrency_key VARCHAR(191) NOT NULL,
  job_id          BIGINT UNSIGNED NOT NULL,
  PRIMARY KEY (concurrency_key, job_id)
) ENGINE=InnoDB DEFAULT CHARSET=utf8mb4 COLLATE=utf8mb4_bin
;
-- The jobs waiting for a slot of a key (status 'blocked'), oldest first, each with the limit of
-- its handler as the worker that set it aside knew it.
CREATE TABLE IF NOT EXISTS mysqlq_blocked_jobs (
  concurrency_key   VARCHAR(191) NOT NULL,
  job_id            BIGINT UNSIGNED NOT NULL,
  concurrency_limit SMALLINT UNSIGNED NOT NULL,
  PRIMARY KEY (concurrency_key, job_id)
) ENGINE=InnoDB DEFAULT CHARSET=utf8mb4 COLLATE=utf8mb4_bin
