-- mysqlq schema version 10: jobs that wait for other jobs (mysqlq.store.dependencies).
-- Statements are separated by lines holding only ";".
--
-- Jobs without parents or dependents never touch what is added here: both new columns are NULL for
-- them and in no index, so their claim and outcome writes change nothing they did not before.

-- 'waiting': a job some of whose parents have not ended yet. Appended at the end of the ENUM,
-- which both servers do instantly (the stored values do not change).
ALTER TABLE mysqlq_jobs
  MODIFY status ENUM('ready', 'scheduled', 'running', 'done', 'dead', 'cancelled', 'blocked', 'waiting') NOT NULL
;
-- dependents: 1 on a job that some waiting job waits for (NULL otherwise). The statements that end
-- a job in bulk skip such rows, and the worker ends them in a transaction that also releases
-- their dependents.
-- waiting_for: on a job enqueued with parents, how many have not ended yet (NULL: no parents).
-- Appended last without defaults, so that both servers add them instantly.
ALTER TABLE mysqlq_jobs ADD COLUMN dependents BOOLEAN NULL, ADD COLUMN waiting_for INT UNSIGNED NULL
;
-- One row per (parent, dependent) pair, kept until retention deletes the dependent: what
-- `mysqlq jobs show` lists, what a group's callback reads its members' results from. run_anyway: the
-- dependent runs even if this parent ends dead or cancelled (else it is cancelled with it).
CREATE TABLE IF NOT EXISTS mysqlq_dependencies (
  parent_id   BIGINT UNSIGNED NOT NULL,
  child_id    BIGINT UNSIGNED NOT NULL,
  run_anyway  BOOLEAN NOT NULL,
  PRIMARY KEY (parent_id, child_id),
  KEY mysqlq_dependencies_child (child_id, parent_id)
) ENGINE=InnoDB DEFAULT CHARSET=utf8mb4 COLLATE=utf8mb4_bin
