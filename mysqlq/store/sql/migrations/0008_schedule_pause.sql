-- mysqlq schema version 8: a schedule entry can be paused (`mysqlq schedule pause NAME`, the dashboard).
-- Statements are separated by lines holding only ";".
--
-- Appended last with a constant default, so that both MariaDB (10.3+) and MySQL (8.0.12+) add it
-- instantly, without copying the table. While an entry is paused, the leading worker moves its next
-- tick along without enqueueing anything, so a resumed entry goes on from its next tick.
ALTER TABLE mysqlq_schedules ADD COLUMN paused TINYINT(1) NOT NULL DEFAULT 0
