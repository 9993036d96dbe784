-- mysqlq schema version 3: leadership in a row, and each worker judged by its own settings.
--
-- mysqlq_leaders holds one lease per role (the reaper, which also runs retention and schedules):
-- the worker named in it leads until lease_until, renewing it as it works. Taking it over bumps
-- the epoch, and every write a leader makes names its epoch, so a leader that froze and woke up
-- after losing the lease changes nothing. A row, unlike GET_LOCK, lapses when its holder stops
-- making progress even though its connection stays open, and means the same on every node of a
-- cluster.
--
-- The registry records each worker's heartbeat interval and lease, so that the reaper judges a
-- worker by its own settings rather than by the reaper's, and the server node its heartbeat
-- connection is on (host:port), since a node's process list shows only its own connections.

CREATE TABLE IF NOT EXISTS mysqlq_leaders (
  role          VARCHAR(50) NOT NULL,
  worker_id     BIGINT UNSIGNED NULL,
  connection_id BIGINT UNSIGNED NULL,
  node          VARCHAR(255) NOT NULL DEFAULT '',
  epoch         BIGINT UNSIGNED NOT NULL DEFAULT 0,
  lease_until   DATETIME(6) NOT NULL,
  PRIMARY KEY (role)
) ENGINE=InnoDB DEFAULT CHARSET=utf8mb4 COLLATE=utf8mb4_bin
;
INSERT IGNORE INTO mysqlq_leaders (role, epoch, lease_until) VALUES ('reaper', 0, '2000-01-01 00:00:00')
;
ALTER TABLE mysqlq_workers
  ADD COLUMN heartbeat_interval_us BIGINT UNSIGNED NOT NULL DEFAULT 10000000,
  ADD COLUMN lease_us BIGINT UNSIGNED NOT NULL DEFAULT 60000000,
  ADD COLUMN node VARCHAR(255) NOT NULL DEFAULT ''
