-- mysqlq schema version 9: a job's result, the JSON its handler returned (NULL when it returned
-- nothing). Statements are separated by lines holding only ";".
--
-- Appended last without a default, so that both MariaDB (10.3+) and MySQL (8.0.12+) add it
-- instantly, without copying the table. A result lives in its job's row, so it is purged with it.
ALTER TABLE mysqlq_jobs ADD COLUMN result MEDIUMBLOB NULL, ALGORITHM=INSTANT
