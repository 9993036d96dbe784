-- Fair queues (mysqlq.store.fairness): the turns of jobs with a fairness key. A job without a key
-- sends none of these.

-- name: fair_position
-- Where keyed jobs of one queue, priority and key go: the turn the queue is serving at that priority
-- (its first ready keyed job's: one look into mysqlq_jobs_live; with none ready, the latest turn given in the
-- queue, which every job before has reached), and the key's step (NULL: a key not seen yet, whose
-- step is the default). Plain reads: a producer's transaction holds no lock for them.
SELECT
  COALESCE(
    (SELECT MIN(turn) FROM mysqlq_jobs FORCE INDEX (mysqlq_jobs_live)
      WHERE running_batch = 0 AND status = 'ready' AND queue = %(queue)s AND finished_at IS NULL
        AND priority = %(priority)s AND turn > 0),
    (SELECT MAX(last_turn) FROM mysqlq_fair_keys WHERE queue = %(queue)s),
    0) AS serving,
  (SELECT step FROM mysqlq_fair_keys WHERE queue = %(queue)s AND fairness_key = %(key)s) AS step;

-- name: take_turns
-- Take the turns of a key's next jobs: the first a step after the key's last turn, or the turn the
-- queue is serving if that is later (a key new or idle starts there), the rest a step apart (`rest`:
-- the count less one, times the step); LAST_INSERT_ID() becomes the last of them.
-- The key's row stays locked until the producer's transaction ends: two producers of one key take
-- turns one after the other, and producers of different keys share no row.
INSERT INTO mysqlq_fair_keys (queue, fairness_key, last_turn)
VALUES (%(queue)s, %(key)s, LAST_INSERT_ID(GREATEST(%(step)s, %(serving)s) + %(rest)s))
ON DUPLICATE KEY UPDATE last_turn = LAST_INSERT_ID(GREATEST(last_turn + %(step)s, %(serving)s) + %(rest)s);

-- name: insert_fair_jobs
-- Enqueue jobs with a fairness key ({rows}: fair_job_values rows): insert_jobs with the key and the
-- job's turn. A job whose dedupe key exists is skipped; alone, LAST_INSERT_ID() becomes the existing
-- job's id (as insert_job).
INSERT INTO mysqlq_jobs
  (queue, handler, payload, status, priority, run_at, max_attempts, time_limit, enqueued_at, dedupe_key,
   dedupe_scope, concurrency_key, tags, trace_context, fairness_key, turn)
VALUES {rows}
ON DUPLICATE KEY UPDATE id = LAST_INSERT_ID(id);

-- name: fair_job_values
-- One row of insert_fair_jobs: job_values' parameters, then the fairness key and the turn.
(%s, %s, %s, %s, %s, COALESCE(%s, UTC_TIMESTAMP(6) + INTERVAL %s MICROSECOND), %s, %s, UTC_TIMESTAMP(6), %s, %s, %s,
 %s, %s, %s, %s)

-- name: set_fair_weight
-- A key's weight in its queue, as its step (1000 / weight): a key of weight 2 takes two turns for
-- another's one. Its jobs already waiting keep their turns.
INSERT INTO mysqlq_fair_keys (queue, fairness_key, step) VALUES (%(queue)s, %(key)s, %(step)s)
ON DUPLICATE KEY UPDATE step = %(step)s;
