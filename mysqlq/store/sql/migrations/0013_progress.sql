-- mysqlq schema version 13: a long job's progress (ctx.progress), a fraction and a short note, written
-- by the worker's background thread at most once a second per job and kept when the job ends.
-- Statements are separated by lines holding only ";".
--
-- Appended last, NULL by default and in no index: both servers add them instantly, a job that never
-- reports progress never writes them, and a producer of the previous version keeps working.
ALTER TABLE mysqlq_jobs ADD COLUMN progress FLOAT NULL, ADD COLUMN progress_note VARCHAR(200) NULL
