-- The schema the migrations in migrations/ make, on MySQL: every mysqlq table as SHOW CREATE TABLE
-- prints it after `mysqlq migrate --create-database` (MySQL 9.7), without AUTO_INCREMENT counters.
-- For reading only: a database is made and upgraded by `mysqlq migrate`, never from this file.
-- MariaDB prints the same schema in other words: schema.sql. In a database created without
-- utf8mb4_bin, mysqlq_schema_version and mysqlq_migration_lock (which name no character set) take
-- the database's own. tests/store/test_schema_file.py checks that the migrations make exactly this;
-- after adding a migration, regenerate the tables below (this note is kept) with
--   MYSQLQ_WRITE_SCHEMA=1 MYSQLQ_TEST_SERVER=mysql .venv/bin/pytest tests/store/test_schema_file.py

CREATE TABLE `mysqlq_blocked_jobs` (
  `concurrency_key` varchar(191) COLLATE utf8mb4_bin NOT NULL,
  `job_id` bigint unsigned NOT NULL,
  `concurrency_limit` smallint unsigned NOT NULL,
  PRIMARY KEY (`concurrency_key`,`job_id`)
) ENGINE=InnoDB DEFAULT CHARSET=utf8mb4 COLLATE=utf8mb4_bin;

CREATE TABLE `mysqlq_dedupe_periods` (
  `dedupe_key` varchar(191) COLLATE utf8mb4_bin NOT NULL,
  `job_id` bigint unsigned NOT NULL DEFAULT '0',
  `expires_at` datetime(6) NOT NULL,
  PRIMARY KEY (`dedupe_key`),
  KEY `mysqlq_dedupe_periods_expiry` (`expires_at`)
) ENGINE=InnoDB DEFAULT CHARSET=utf8mb4 COLLATE=utf8mb4_bin;

CREATE TABLE `mysqlq_dependencies` (
  `parent_id` bigint unsigned NOT NULL,
  `child_id` bigint unsigned NOT NULL,
  `run_anyway` tinyint(1) NOT NULL,
  PRIMARY KEY (`parent_id`,`child_id`),
  KEY `mysqlq_dependencies_child` (`child_id`,`parent_id`)
) ENGINE=InnoDB DEFAULT CHARSET=utf8mb4 COLLATE=utf8mb4_bin;

CREATE TABLE `mysqlq_fair_keys` (
  `queue` varchar(100) COLLATE utf8mb4_bin NOT NULL,
  `fairness_key` varchar(100) COLLATE utf8mb4_bin NOT NULL,
  `last_turn` bigint unsigned NOT NULL DEFAULT '0',
  `step` int unsigned NOT NULL DEFAULT '1000',
  PRIMARY KEY (`queue`,`fairness_key`),
  KEY `mysqlq_fair_keys_last` (`queue`,`last_turn`)
) ENGINE=InnoDB DEFAULT CHARSET=utf8mb4 COLLATE=utf8mb4_bin;

CREATE TABLE `mysqlq_job_tags` (
  `job_id` bigint unsigned NOT NULL,
  `tag` varchar(64) COLLATE utf8mb4_bin NOT NULL,
  PRIMARY KEY (`job_id`,`tag`),
  KEY `mysqlq_job_tags_tag` (`tag`,`job_id`)
) ENGINE=InnoDB DEFAULT CHARSET=utf8mb4 COLLATE=utf8mb4_bin;

CREATE TABLE `mysqlq_jobs` (
  `id` bigint unsigned NOT NULL AUTO_INCREMENT,
  `queue` varchar(100) COLLATE utf8mb4_bin NOT NULL,
  `handler` varchar(100) COLLATE utf8mb4_bin NOT NULL,
  `payload` mediumblob NOT NULL,
  `status` enum('ready','scheduled','running','done','dead','cancelled','blocked','waiting') COLLATE utf8mb4_bin NOT NULL,
  `priority` smallint NOT NULL DEFAULT '0',
  `run_at` datetime(6) NOT NULL,
  `attempts` smallint unsigned NOT NULL DEFAULT '0',
  `max_attempts` smallint unsigned NOT NULL,
  `time_limit` int unsigned DEFAULT NULL,
  `batch_id` bigint unsigned NOT NULL DEFAULT '0',
  `worker_id` bigint unsigned NOT NULL DEFAULT '0',
  `worker` varchar(255) COLLATE utf8mb4_bin DEFAULT NULL,
  `lease_until` datetime(6) NOT NULL DEFAULT '1970-01-01 00:00:00.000000',
  `enqueued_at` datetime(6) NOT NULL,
  `started_at` datetime(6) NOT NULL DEFAULT '1970-01-01 00:00:00.000000',
  `finished_at` datetime(6) DEFAULT NULL,
  `dedupe_key` varchar(191) COLLATE utf8mb4_bin DEFAULT NULL,
  `last_error` mediumtext COLLATE utf8mb4_bin,
  `dedupe_scope` enum('forever','active') COLLATE utf8mb4_bin NOT NULL DEFAULT 'forever',
  `running_batch` bigint unsigned NOT NULL DEFAULT '0',
  `scheduled_at` datetime(6) DEFAULT (if((`status` = _utf8mb4'scheduled'),`run_at`,NULL)),
  `concurrency_key` varchar(191) COLLATE utf8mb4_bin DEFAULT NULL,
  `result` mediumblob,
  `dependents` tinyint(1) DEFAULT NULL,
  `waiting_for` int unsigned DEFAULT NULL,
  `snoozes` smallint unsigned NOT NULL DEFAULT '0',
  `progress` float DEFAULT NULL,
  `progress_note` varchar(200) COLLATE utf8mb4_bin DEFAULT NULL,
  `tags` varchar(700) COLLATE utf8mb4_bin DEFAULT NULL,
  `trace_context` varchar(600) COLLATE utf8mb4_bin DEFAULT NULL,
  `run_trace_context` varchar(600) COLLATE utf8mb4_bin DEFAULT NULL,
  `fairness_key` varchar(100) COLLATE utf8mb4_bin DEFAULT NULL,
  `turn` bigint unsigned NOT NULL DEFAULT '18446744073709551615',
  PRIMARY KEY (`id`),
  UNIQUE KEY `mysqlq_jobs_dedupe` (`dedupe_key`),
  KEY `mysqlq_jobs_scheduled` (`scheduled_at`),
  KEY `mysqlq_jobs_live` (`running_batch`,`status`,`queue`,`finished_at`,`priority`,`turn`,`id`)
) ENGINE=InnoDB DEFAULT CHARSET=utf8mb4 COLLATE=utf8mb4_bin;

CREATE TABLE `mysqlq_jobs_history` (
  `id` bigint unsigned NOT NULL,
  `queue` varchar(100) COLLATE utf8mb4_bin NOT NULL,
  `handler` varchar(100) COLLATE utf8mb4_bin NOT NULL,
  `payload` mediumblob NOT NULL,
  `status` enum('ready','scheduled','running','done','dead','cancelled','blocked','waiting') COLLATE utf8mb4_bin NOT NULL,
  `priority` smallint NOT NULL DEFAULT '0',
  `run_at` datetime(6) NOT NULL,
  `attempts` smallint unsigned NOT NULL DEFAULT '0',
  `max_attempts` smallint unsigned NOT NULL,
  `time_limit` int unsigned DEFAULT NULL,
  `batch_id` bigint unsigned DEFAULT NULL,
  `worker_id` bigint unsigned DEFAULT NULL,
  `worker` varchar(255) COLLATE utf8mb4_bin DEFAULT NULL,
  `lease_until` datetime(6) DEFAULT NULL,
  `enqueued_at` datetime(6) NOT NULL,
  `started_at` datetime(6) DEFAULT NULL,
  `finished_at` datetime(6) DEFAULT NULL,
  `dedupe_key` varchar(191) COLLATE utf8mb4_bin DEFAULT NULL,
  `last_error` mediumtext COLLATE utf8mb4_bin,
  `dedupe_scope` enum('forever','active') COLLATE utf8mb4_bin NOT NULL DEFAULT 'forever',
  `running_batch` bigint unsigned DEFAULT NULL,
  `scheduled_at` datetime(6) DEFAULT NULL,
  `concurrency_key` varchar(191) COLLATE utf8mb4_bin DEFAULT NULL,
  `result` mediumblob,
  `dependents` tinyint(1) DEFAULT NULL,
  `waiting_for` int unsigned DEFAULT NULL,
  `snoozes` smallint unsigned NOT NULL DEFAULT '0',
  `progress` float DEFAULT NULL,
  `progress_note` varchar(200) COLLATE utf8mb4_bin DEFAULT NULL,
  `tags` varchar(700) COLLATE utf8mb4_bin DEFAULT NULL,
  `trace_context` varchar(600) COLLATE utf8mb4_bin DEFAULT NULL,
  `run_trace_context` varchar(600) COLLATE utf8mb4_bin DEFAULT NULL,
  PRIMARY KEY (`id`),
  KEY `mysqlq_jobs_history_ended` (`status`,`queue`,`finished_at`)
) ENGINE=InnoDB DEFAULT CHARSET=utf8mb4 COLLATE=utf8mb4_bin;

CREATE TABLE `mysqlq_leaders` (
  `role` varchar(50) COLLATE utf8mb4_bin NOT NULL,
  `worker_id` bigint unsigned DEFAULT NULL,
  `connection_id` bigint unsigned DEFAULT NULL,
  `node` varchar(255) COLLATE utf8mb4_bin NOT NULL DEFAULT '',
  `epoch` bigint unsigned NOT NULL DEFAULT '0',
  `lease_until` datetime(6) NOT NULL,
  PRIMARY KEY (`role`)
) ENGINE=InnoDB DEFAULT CHARSET=utf8mb4 COLLATE=utf8mb4_bin;

CREATE TABLE `mysqlq_maintenance` (
  `task` varchar(50) COLLATE utf8mb4_bin NOT NULL,
  `next_run_at` datetime(6) NOT NULL,
  PRIMARY KEY (`task`)
) ENGINE=InnoDB DEFAULT CHARSET=utf8mb4 COLLATE=utf8mb4_bin;

CREATE TABLE `mysqlq_migration_lock` (
  `name` varchar(50) COLLATE utf8mb4_bin NOT NULL,
  `holder` varchar(64) COLLATE utf8mb4_bin DEFAULT NULL,
  `lease_until` datetime(6) NOT NULL,
  PRIMARY KEY (`name`)
) ENGINE=InnoDB DEFAULT CHARSET=utf8mb4 COLLATE=utf8mb4_bin;

CREATE TABLE `mysqlq_queues` (
  `name` varchar(100) COLLATE utf8mb4_bin NOT NULL,
  `paused` tinyint(1) NOT NULL DEFAULT '0',
  `keep_done` tinyint(1) DEFAULT NULL,
  PRIMARY KEY (`name`)
) ENGINE=InnoDB DEFAULT CHARSET=utf8mb4 COLLATE=utf8mb4_bin;

CREATE TABLE `mysqlq_rate_buckets` (
  `bucket` varchar(255) COLLATE utf8mb4_bin NOT NULL,
  `version` bigint unsigned NOT NULL DEFAULT '0',
  `next_at` datetime(6) DEFAULT NULL,
  PRIMARY KEY (`bucket`)
) ENGINE=InnoDB DEFAULT CHARSET=utf8mb4 COLLATE=utf8mb4_bin;

CREATE TABLE `mysqlq_rate_limits` (
  `scope` enum('handler','queue') COLLATE utf8mb4_bin NOT NULL,
  `name` varchar(100) COLLATE utf8mb4_bin NOT NULL,
  `max_starts` int unsigned DEFAULT NULL,
  `period_us` bigint unsigned DEFAULT NULL,
  `changed_at` datetime(6) NOT NULL,
  PRIMARY KEY (`scope`,`name`)
) ENGINE=InnoDB DEFAULT CHARSET=utf8mb4 COLLATE=utf8mb4_bin;

CREATE TABLE `mysqlq_rate_starts` (
  `bucket` varchar(255) COLLATE utf8mb4_bin NOT NULL,
  `started_at` datetime(6) NOT NULL,
  `job_id` bigint unsigned NOT NULL,
  PRIMARY KEY (`bucket`,`started_at`,`job_id`)
) ENGINE=InnoDB DEFAULT CHARSET=utf8mb4 COLLATE=utf8mb4_bin;

CREATE TABLE `mysqlq_rate_waiting` (
  `bucket` varchar(255) COLLATE utf8mb4_bin NOT NULL,
  `job_id` bigint unsigned NOT NULL,
  PRIMARY KEY (`bucket`,`job_id`)
) ENGINE=InnoDB DEFAULT CHARSET=utf8mb4 COLLATE=utf8mb4_bin;

CREATE TABLE `mysqlq_schedules` (
  `name` varchar(100) COLLATE utf8mb4_bin NOT NULL,
  `timing` varchar(255) COLLATE utf8mb4_bin NOT NULL,
  `last_tick` datetime(6) DEFAULT NULL,
  `next_tick` datetime(6) NOT NULL,
  `enqueued_at` datetime(6) DEFAULT NULL,
  `last_job_id` bigint unsigned DEFAULT NULL,
  `paused` tinyint(1) NOT NULL DEFAULT '0',
  PRIMARY KEY (`name`)
) ENGINE=InnoDB DEFAULT CHARSET=utf8mb4 COLLATE=utf8mb4_bin;

CREATE TABLE `mysqlq_schema_version` (
  `version` int NOT NULL,
  `applied_at` datetime(6) NOT NULL,
  PRIMARY KEY (`version`)
) ENGINE=InnoDB DEFAULT CHARSET=utf8mb4 COLLATE=utf8mb4_bin;

CREATE TABLE `mysqlq_semaphore_holders` (
  `concurrency_key` varchar(191) COLLATE utf8mb4_bin NOT NULL,
  `job_id` bigint unsigned NOT NULL,
  PRIMARY KEY (`concurrency_key`,`job_id`)
) ENGINE=InnoDB DEFAULT CHARSET=utf8mb4 COLLATE=utf8mb4_bin;

CREATE TABLE `mysqlq_semaphores` (
  `concurrency_key` varchar(191) COLLATE utf8mb4_bin NOT NULL,
  `version` bigint unsigned NOT NULL DEFAULT '0',
  PRIMARY KEY (`concurrency_key`)
) ENGINE=InnoDB DEFAULT CHARSET=utf8mb4 COLLATE=utf8mb4_bin;

CREATE TABLE `mysqlq_workers` (
  `id` bigint unsigned NOT NULL AUTO_INCREMENT,
  `name` varchar(255) COLLATE utf8mb4_bin NOT NULL,
  `host` varchar(255) COLLATE utf8mb4_bin NOT NULL,
  `pid` int unsigned NOT NULL,
  `connection_id` bigint unsigned NOT NULL,
  `queues` varchar(1000) COLLATE utf8mb4_bin NOT NULL,
  `started_at` datetime(6) NOT NULL,
  `heartbeat_at` datetime(6) NOT NULL,
  `heartbeat_interval_us` bigint unsigned NOT NULL DEFAULT '10000000',
  `lease_us` bigint unsigned NOT NULL DEFAULT '60000000',
  `node` varchar(255) COLLATE utf8mb4_bin NOT NULL DEFAULT '',
  `hint_addr` varchar(64) COLLATE utf8mb4_bin DEFAULT NULL,
  `hint_key` varbinary(32) DEFAULT NULL,
  PRIMARY KEY (`id`),
  KEY `mysqlq_workers_name` (`name`)
) ENGINE=InnoDB DEFAULT CHARSET=utf8mb4 COLLATE=utf8mb4_bin;
