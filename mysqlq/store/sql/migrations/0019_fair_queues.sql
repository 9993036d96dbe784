-- mysqlq schema version 19: fair queues. A job may carry a fairness key (a tenant, a customer);
-- within a queue and a priority, workers take jobs in turn across keys instead of in the order of
-- their ids. A keyed job's place is its turn, given at enqueue: its key's previous turn plus the
-- key's step (1000 divided by the key's weight), and never before the turn the queue is serving.
-- A job without a key is enqueued without a turn (the largest value, 18446744073709551615): in a
-- queue without keys, jobs are served as before, in the order of their ids; where keyed jobs wait
-- too, workers give the jobs without a key turns as they claim, as one key of their own.
-- Statements are separated by lines holding only ";".
--
-- What changes:
--   mysqlq_jobs.fairness_key   the key (NULL: none); a job keeps it, and its turn, when it is
--                              retried, snoozed, delayed or released
--   mysqlq_jobs.turn           the job's place among the keys of its queue (18446744073709551615:
--                              none yet, a job without a key)
--   mysqlq_jobs_live           (running_batch, status, queue, finished_at, priority, turn, id): the
--                              claim's order, by turn within a priority
--   mysqlq_fair_keys           per queue and key: the last turn given and the key's step
-- The history keeps neither column: the statements that move a done job name their columns, and a
-- finished job's turn means nothing. Online: producers and workers of version 18 keep working
-- (their statements name neither column); their claim, ordered without turn, sorts its rows until
-- the workers are restarted on this version. A migration stopped anywhere resumes: each ALTER is
-- atomic, and one whose columns or table exist already is not run twice.
-- mysqlq: done if it was added already
ALTER TABLE mysqlq_jobs
  ADD COLUMN fairness_key VARCHAR(100) NULL,
  ADD COLUMN turn BIGINT UNSIGNED NOT NULL DEFAULT 18446744073709551615,
  DROP KEY mysqlq_jobs_live,
  ADD KEY mysqlq_jobs_live (running_batch, status, queue, finished_at, priority, turn, id),
  ALGORITHM=INPLACE, LOCK=NONE
;
-- The turns given per queue and key. last_turn: the turn of the key's latest job (the next one goes
-- a step later, or at the queue's current turn if that is later); step: how far apart a key's jobs
-- are (1000 for a weight of 1; a key of weight 2 has 500, and so takes two turns for others' one).
-- The key '' (no key may be empty) stands for the queue's jobs without a key.
-- mysqlq_fair_keys_last: the queue's latest turn given, which is where a queue that has no keyed job
-- ready stands.
CREATE TABLE IF NOT EXISTS mysqlq_fair_keys (
  queue VARCHAR(100) NOT NULL,
  fairness_key VARCHAR(100) NOT NULL,
  last_turn BIGINT UNSIGNED NOT NULL DEFAULT 0,
  step INT UNSIGNED NOT NULL DEFAULT 1000,
  PRIMARY KEY (queue, fairness_key),
  KEY mysqlq_fair_keys_last (queue, last_turn)
) ENGINE=InnoDB DEFAULT CHARSET=utf8mb4 COLLATE=utf8mb4_bin
