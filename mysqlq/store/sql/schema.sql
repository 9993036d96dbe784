-- The schema the migrations in migrations/ make, on MariaDB: every mysqlq table as SHOW CREATE TABLE
-- prints it after `mysqlq migrate --create-database` (MariaDB 10.11), without AUTO_INCREMENT
-- counters. For reading only: a database is made and upgraded by `mysqlq migrate`, never from this
-- file. MySQL prints the same schema in other words: schema.mysql.sql. In a database created
-- without utf8mb4_bin, mysqlq_schema_version and mysqlq_migration_lock (which name no character
-- set) take the database's own. tests/store/test_schema_file.py checks that the migrations make exactly
-- this; after adding a migration, regenerate the tables below (this note is kept) with
--   MYSQLQ_WRITE_SCHEMA=1 .venv/bin/pytest tests/store/test_schema_file.py

CREATE TABLE `mysqlq_blocked_jobs` (
  `concurrency_key` varchar(191) NOT NULL,
  `job_id` bigint(20) unsigned NOT NULL,
  `concurrency_limit` smallint(5) unsigned NOT NULL,
  PRIMARY KEY (`concurrency_key`,`job_id`)
) ENGINE=InnoDB DEFAULT CHARSET=utf8mb4 COLLATE=utf8mb4_bin;

CREATE TABLE `mysqlq_dedupe_periods` (
  `dedupe_key` varchar(191) NOT NULL,
  `job_id` bigint(20) unsigned NOT NULL DEFAULT 0,
  `expires_at` datetime(6) NOT NULL,
  PRIMARY KEY (`dedupe_key`),
  KEY `mysqlq_dedupe_periods_expiry` (`expires_at`)
) ENGINE=InnoDB DEFAULT CHARSET=utf8mb4 COLLATE=utf8mb4_bin;

CREATE TABLE `mysqlq_dependencies` (
  `parent_id` bigint(20) unsigned NOT NULL,
  `child_id` bigint(20) unsigned NOT NULL,
  `run_anyway` tinyint(1) NOT NULL,
  PRIMARY KEY (`parent_id`,`child_id`),
  KEY `mysqlq_dependencies_child` (`child_id`,`parent_id`)
) ENGINE=InnoDB DEFAULT CHARSET=utf8mb4 COLLATE=utf8mb4_bin;

CREATE TABLE `mysqlq_fair_keys` (
  `queue` varchar(100) NOT NULL,
  `fairness_key` varchar(100) NOT NULL,
  `last_turn` bigint(20) unsigned NOT NULL DEFAULT 0,
  `step` int(10) unsigned NOT NULL DEFAULT 1000,
  PRIMARY KEY (`queue`,`fairness_key`),
  KEY `mysqlq_fair_keys_last` (`queue`,`last_turn`)
) ENGINE=InnoDB DEFAULT CHARSET=utf8mb4 COLLATE=utf8mb4_bin;

CREATE TABLE `mysqlq_job_tags` (
  `job_id` bigint(20) unsigned NOT NULL,
  `tag` varchar(64) NOT NULL,
  PRIMARY KEY (`job_id`,`tag`),
  KEY `mysqlq_job_tags_tag` (`tag`,`job_id`)
) ENGINE=InnoDB DEFAULT CHARSET=utf8mb4 COLLATE=utf8mb4_bin;

CREATE TABLE `mysqlq_jobs` (
  `id` bigint(20) unsigned NOT NULL AUTO_INCREMENT,
  `queue` varchar(100) NOT NULL,
  `handler` varchar(100) NOT NULL,
  `payload` mediumblob NOT NULL,
  `status` enum('ready','scheduled','running','done','dead','cancelled','blocked','waiting') NOT NULL,
  `priority` smallint(6) NOT NULL DEFAULT 0,
  `run_at` datetime(6) NOT NULL,
  `attempts` smallint(5) unsigned NOT NULL DEFAULT 0,
  `max_attempts` smallint(5) unsigned NOT NULL,
  `time_limit` int(10) unsigned DEFAULT NULL,
  `batch_id` bigint(20) unsigned NOT NULL DEFAULT 0,
  `worker_id` bigint(20) unsigned NOT NULL DEFAULT 0,
  `worker` varchar(255) DEFAULT NULL,
  `lease_until` datetime(6) NOT NULL DEFAULT '1970-01-01 00:00:00.000000',
  `enqueued_at` datetime(6) NOT NULL,
  `started_at` datetime(6) NOT NULL DEFAULT '1970-01-01 00:00:00.000000',
  `finished_at` datetime(6) DEFAULT NULL,
  `dedupe_key` varchar(191) DEFAULT NULL,
  `last_error` mediumtext DEFAULT NULL,
  `dedupe_scope` enum('forever','active') NOT NULL DEFAULT 'forever',
  `running_batch` bigint(20) unsigned NOT NULL DEFAULT 0,
  `scheduled_at` datetime(6) DEFAULT if(`status` = 'scheduled',`run_at`,NULL),
  `concurrency_key` varchar(191) DEFAULT NULL,
  `result` mediumblob DEFAULT NULL,
  `dependents` tinyint(1) DEFAULT NULL,
  `waiting_for` int(10) unsigned DEFAULT NULL,
  `snoozes` smallint(5) unsigned NOT NULL DEFAULT 0,
  `progress` float DEFAULT NULL,
  `progress_note` varchar(200) DEFAULT NULL,
  `tags` varchar(700) DEFAULT NULL,
  `trace_context` varchar(600) DEFAULT NULL,
  `run_trace_context` varchar(600) DEFAULT NULL,
  `fairness_key` varchar(100) DEFAULT NULL,
  `turn` bigint(20) unsigned NOT NULL DEFAULT 18446744073709551615,
  PRIMARY KEY (`id`),
  UNIQUE KEY `mysqlq_jobs_dedupe` (`dedupe_key`),
  KEY `mysqlq_jobs_scheduled` (`scheduled_at`),
  KEY `mysqlq_jobs_live` (`running_batch`,`status`,`queue`,`finished_at`,`priority`,`turn`,`id`)
) ENGINE=InnoDB DEFAULT CHARSET=utf8mb4 COLLATE=utf8mb4_bin;

CREATE TABLE `mysqlq_jobs_history` (
  `id` bigint(20) unsigned NOT NULL,
  `queue` varchar(100) NOT NULL,
  `handler` varchar(100) NOT NULL,
  `payload` mediumblob NOT NULL,
  `status` enum('ready','scheduled','running','done','dead','cancelled','blocked','waiting') NOT NULL,
  `priority` smallint(6) NOT NULL DEFAULT 0,
  `run_at` datetime(6) NOT NULL,
  `attempts` smallint(5) unsigned NOT NULL DEFAULT 0,
  `max_attempts` smallint(5) unsigned NOT NULL,
  `time_limit` int(10) unsigned DEFAULT NULL,
  `batch_id` bigint(20) unsigned DEFAULT NULL,
  `worker_id` bigint(20) unsigned DEFAULT NULL,
  `worker` varchar(255) DEFAULT NULL,
  `lease_until` datetime(6) DEFAULT NULL,
  `enqueued_at` datetime(6) NOT NULL,
  `started_at` datetime(6) DEFAULT NULL,
  `finished_at` datetime(6) DEFAULT NULL,
  `dedupe_key` varchar(191) DEFAULT NULL,
  `last_error` mediumtext DEFAULT NULL,
  `dedupe_scope` enum('forever','active') NOT NULL DEFAULT 'forever',
  `running_batch` bigint(20) unsigned DEFAULT NULL,
  `scheduled_at` datetime(6) DEFAULT NULL,
  `concurrency_key` varchar(191) DEFAULT NULL,
  `result` mediumblob DEFAULT NULL,
  `dependents` tinyint(1) DEFAULT NULL,
  `waiting_for` int(10) unsigned DEFAULT NULL,
  `snoozes` smallint(5) unsigned NOT NULL DEFAULT 0,
  `progress` float DEFAULT NULL,
  `progress_note` varchar(200) DEFAULT NULL,
  `tags` varchar(700) DEFAULT NULL,
  `trace_context` varchar(600) DEFAULT NULL,
  `run_trace_context` varchar(600) DEFAULT NULL,
  PRIMARY KEY (`id`),
  KEY `mysqlq_jobs_history_ended` (`status`,`queue`,`finished_at`)
) ENGINE=InnoDB DEFAULT CHARSET=utf8mb4 COLLATE=utf8mb4_bin;

CREATE TABLE `mysqlq_leaders` (
  `role` varchar(50) NOT NULL,
  `worker_id` bigint(20) unsigned DEFAULT NULL,
  `connection_id` bigint(20) unsigned DEFAULT NULL,
  `node` varchar(255) NOT NULL DEFAULT '',
  `epoch` bigint(20) unsigned NOT NULL DEFAULT 0,
  `lease_until` datetime(6) NOT NULL,
  PRIMARY KEY (`role`)
) ENGINE=InnoDB DEFAULT CHARSET=utf8mb4 COLLATE=utf8mb4_bin;

CREATE TABLE `mysqlq_maintenance` (
  `task` varchar(50) NOT NULL,
  `next_run_at` datetime(6) NOT NULL,
  PRIMARY KEY (`task`)
) ENGINE=InnoDB DEFAULT CHARSET=utf8mb4 COLLATE=utf8mb4_bin;

CREATE TABLE `mysqlq_migration_lock` (
  `name` varchar(50) NOT NULL,
  `holder` varchar(64) DEFAULT NULL,
  `lease_until` datetime(6) NOT NULL,
  PRIMARY KEY (`name`)
) ENGINE=InnoDB DEFAULT CHARSET=utf8mb4 COLLATE=utf8mb4_bin;

CREATE TABLE `mysqlq_queues` (
  `name` varchar(100) NOT NULL,
  `paused` tinyint(1) NOT NULL DEFAULT 0,
  `keep_done` tinyint(1) DEFAULT NULL,
  PRIMARY KEY (`name`)
) ENGINE=InnoDB DEFAULT CHARSET=utf8mb4 COLLATE=utf8mb4_bin;

CREATE TABLE `mysqlq_rate_buckets` (
  `bucket` varchar(255) NOT NULL,
  `version` bigint(20) unsigned NOT NULL DEFAULT 0,
  `next_at` datetime(6) DEFAULT NULL,
  PRIMARY KEY (`bucket`)
) ENGINE=InnoDB DEFAULT CHARSET=utf8mb4 COLLATE=utf8mb4_bin;

CREATE TABLE `mysqlq_rate_limits` (
  `scope` enum('handler','queue') NOT NULL,
  `name` varchar(100) NOT NULL,
  `max_starts` int(10) unsigned DEFAULT NULL,
  `period_us` bigint(20) unsigned DEFAULT NULL,
  `changed_at` datetime(6) NOT NULL,
  PRIMARY KEY (`scope`,`name`)
) ENGINE=InnoDB DEFAULT CHARSET=utf8mb4 COLLATE=utf8mb4_bin;

CREATE TABLE `mysqlq_rate_starts` (
  `bucket` varchar(255) NOT NULL,
  `started_at` datetime(6) NOT NULL,
  `job_id` bigint(20) unsigned NOT NULL,
  PRIMARY KEY (`bucket`,`started_at`,`job_id`)
) ENGINE=InnoDB DEFAULT CHARSET=utf8mb4 COLLATE=utf8mb4_bin;

CREATE TABLE `mysqlq_rate_waiting` (
  `bucket` varchar(255) NOT NULL,
  `job_id` bigint(20) unsigned NOT NULL,
  PRIMARY KEY (`bucket`,`job_id`)
) ENGINE=InnoDB DEFAULT CHARSET=utf8mb4 COLLATE=utf8mb4_bin;

CREATE TABLE `mysqlq_schedules` (
  `name` varchar(100) NOT NULL,
  `timing` varchar(255) NOT NULL,
  `last_tick` datetime(6) DEFAULT NULL,
  `next_tick` datetime(6) NOT NULL,
  `enqueued_at` datetime(6) DEFAULT NULL,
  `last_job_id` bigint(20) unsigned DEFAULT NULL,
  `paused` tinyint(1) NOT NULL DEFAULT 0,
  PRIMARY KEY (`name`)
) ENGINE=InnoDB DEFAULT CHARSET=utf8mb4 COLLATE=utf8mb4_bin;

CREATE TABLE `mysqlq_schema_version` (
  `version` int(11) NOT NULL,
  `applied_at` datetime(6) NOT NULL,
  PRIMARY KEY (`version`)
) ENGINE=InnoDB DEFAULT CHARSET=utf8mb4 COLLATE=utf8mb4_bin;

CREATE TABLE `mysqlq_semaphore_holders` (
  `concurrency_key` varchar(191) NOT NULL,
  `job_id` bigint(20) unsigned NOT NULL,
  PRIMARY KEY (`concurrency_key`,`job_id`)
) ENGINE=InnoDB DEFAULT CHARSET=utf8mb4 COLLATE=utf8mb4_bin;

CREATE TABLE `mysqlq_semaphores` (
  `concurrency_key` varchar(191) NOT NULL,
  `version` bigint(20) unsigned NOT NULL DEFAULT 0,
  PRIMARY KEY (`concurrency_key`)
) ENGINE=InnoDB DEFAULT CHARSET=utf8mb4 COLLATE=utf8mb4_bin;

CREATE TABLE `mysqlq_workers` (
  `id` bigint(20) unsigned NOT NULL AUTO_INCREMENT,
  `name` varchar(255) NOT NULL,
  `host` varchar(255) NOT NULL,
  `pid` int(10) unsigned NOT NULL,
  `connection_id` bigint(20) unsigned NOT NULL,
  `queues` varchar(1000) NOT NULL,
  `started_at` datetime(6) NOT NULL,
  `heartbeat_at` datetime(6) NOT NULL,
  `heartbeat_interval_us` bigint(20) unsigned NOT NULL DEFAULT 10000000,
  `lease_us` bigint(20) unsigned NOT NULL DEFAULT 60000000,
  `node` varchar(255) NOT NULL DEFAULT '',
  `hint_addr` varchar(64) DEFAULT NULL,
  `hint_key` varbinary(32) DEFAULT NULL,
  PRIMARY KEY (`id`),
  KEY `mysqlq_workers_name` (`name`)
) ENGINE=InnoDB DEFAULT CHARSET=utf8mb4 COLLATE=utf8mb4_bin;
