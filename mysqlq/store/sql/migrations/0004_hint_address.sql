-- mysqlq schema version 4: where each worker listens for has-task hints from other hosts.
-- hint_addr is the "host:port" producers send datagrams to (NULL: this worker takes no network
-- hints); hint_key is the random key of this worker's life that signs them (a new one each start).
-- The registry already holds what producers read to find workers, so no new privilege is needed.

ALTER TABLE mysqlq_workers
  ADD COLUMN hint_addr VARCHAR(64) NULL,
  ADD COLUMN hint_key VARBINARY(32) NULL
