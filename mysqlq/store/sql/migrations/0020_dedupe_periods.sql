-- mysqlq schema version 20: dedupe keys held for a period. A job enqueued with a period as its
-- dedupe scope (`dedupe_scope="10m"`) takes its key for that long from the enqueue, whatever becomes
-- of the job: an enqueue within the period returns the job that took the key, one after it makes a
-- new job. Statements are separated by lines holding only ";".
--
-- Such a key lives in a table of its own, not in mysqlq_jobs.dedupe_key: a job that ends done moves
-- into the history (or is deleted where its queue keeps no history), and the key must outlive that,
-- while a job still live when its period ends must not keep the next enqueue from taking the key.
-- One row per key: the job that took it, and when the period ends. The producer takes a key with
-- one INSERT … ON DUPLICATE KEY UPDATE on the primary key, in the enqueue's transaction: the row
-- lock (and, on Galera, the certification of the key's row) is what makes two producers of one key
-- make one job. An expired row is taken over by the next enqueue of its key, in the same statement;
-- retention deletes the expired rows it finds by mysqlq_dedupe_periods_expiry.
--
-- Online: nothing of version 19 reads or writes this table, and mysqlq_jobs is unchanged.
CREATE TABLE IF NOT EXISTS mysqlq_dedupe_periods (
  dedupe_key VARCHAR(191) NOT NULL,
  job_id BIGINT UNSIGNED NOT NULL DEFAULT 0,
  expires_at DATETIME(6) NOT NULL,
  PRIMARY KEY (dedupe_key),
  KEY mysqlq_dedupe_periods_expiry (expires_at)
) ENGINE=InnoDB DEFAULT CHARSET=utf8mb4 COLLATE=utf8mb4_bin
