-- mysqlq schema version 2: an index on finished_at, for the throughput figures of `mysqlq stats`
-- (jobs finished in the last minutes, without reading the rest of the history).
-- It changes only when finished_at does, i.e. once per job when it ends: claims, retries and
-- releases leave finished_at NULL and so never touch it.

ALTER TABLE mysqlq_jobs ADD KEY mysqlq_jobs_finished (finished_at)
