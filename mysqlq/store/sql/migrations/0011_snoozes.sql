-- mysqlq schema version 11: snoozed jobs (mysqlq.Snooze) are counted, so that one snoozed forever
-- ends dead at the worker's --max-snoozes.
-- Statements are separated by lines holding only ";".
--
-- Appended last, NOT NULL with a constant default: both MariaDB (10.3+) and MySQL (8.0.12+) add it
-- instantly, without copying the table, and a producer of the previous version (whose INSERTs do
-- not name it) keeps working.
ALTER TABLE mysqlq_jobs ADD COLUMN snoozes SMALLINT UNSIGNED NOT NULL DEFAULT 0
