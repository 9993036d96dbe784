-- mysqlq schema version 16: a queue may keep no history of its done jobs (`mysqlq history off QUEUE`):
-- its worker deletes a job that ends done in the statement that would have marked it done. NULL:
-- the queue follows the installation's setting, the row with the empty name (no row, or NULL
-- there: kept).
-- Statements are separated by lines holding only ";".
--
-- Appended last and NULL by default: both MariaDB (10.3+) and MySQL (8.0.12+) add it instantly,
-- without copying the table, and mysqlq of the previous version (which does not name it) keeps
-- working beside it.
ALTER TABLE mysqlq_queues ADD COLUMN keep_done TINYINT(1) NULL DEFAULT NULL
