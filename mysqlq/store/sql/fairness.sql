-- Fair queues (mysqlq.store.fairness): the turns of jobs. A job without a key is enqueued without a
-- turn (turn = 18446744073709551615, the column's default) and its producer sends none of these;
-- workers give such jobs turns (keyless_*) only in a queue where keyed jobs wait too.

-- name: fair_position
-- Where keyed jobs of one queue, priority and key go: the turn the queue is serving at that priority
-- (its first ready job with a turn: one look into mysqlq_jobs_live; with none ready, the latest turn
-- given in the queue, which every job before has reached), and the key's step (NULL: a key not seen yet, whose
-- step is the default). Plain reads: a producer's transaction holds no lock for them.
SELECT
  COALESCE(
    (SELECT MIN(turn) FROM mysqlq_jobs FORCE INDEX (mysqlq_jobs_live)
      WHERE running_batch = 0 AND status = 'ready' AND queue = %(queue)s AND finished_at IS NULL
        AND priority = %(priority)s AND turn < 18446744073709551615),
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

-- ---------------------------------------------------------------- jobs without a key
-- A worker that claimed keyed jobs from a queue lately gives the queue's jobs without a key turns
-- before it claims there (mysqlq.worker.intake.fair_turns): as one key of their own, the key ''
-- (no key may be empty), a step apart, from the turn the queue is serving. Until then they wait
-- behind the keyed jobs of their priority; in a queue without keys, nothing here is sent.

-- name: keyless_position
-- Whether the queue's next claim needs jobs without a key given turns: the first priority with ready
-- jobs; at it, the turn being served (the first ready job with a turn; NULL: none, and no turns are
-- needed) and whether a ready job has no turn; and the last turn given to the queue's jobs without a
-- key, with their step (NULL: never given one). The first priority is a subquery of its own in each
-- place (not correlated, so the server reads it once, as a constant, and each part stays an index
-- dive: "Select tables optimized away"); then one primary-key read of mysqlq_fair_keys. Plain reads.
SELECT (SELECT MIN(priority) FROM mysqlq_jobs FORCE INDEX (mysqlq_jobs_live)
         WHERE running_batch = 0 AND status = 'ready' AND queue = %(queue)s AND finished_at IS NULL) AS priority,
       (SELECT MIN(turn) FROM mysqlq_jobs FORCE INDEX (mysqlq_jobs_live)
         WHERE running_batch = 0 AND status = 'ready' AND queue = %(queue)s AND finished_at IS NULL
           AND priority = (SELECT MIN(priority) FROM mysqlq_jobs FORCE INDEX (mysqlq_jobs_live)
                            WHERE running_batch = 0 AND status = 'ready' AND queue = %(queue)s
                              AND finished_at IS NULL)
           AND turn < 18446744073709551615) AS serving,
       (SELECT MAX(turn) FROM mysqlq_jobs FORCE INDEX (mysqlq_jobs_live)
         WHERE running_batch = 0 AND status = 'ready' AND queue = %(queue)s AND finished_at IS NULL
           AND priority = (SELECT MIN(priority) FROM mysqlq_jobs FORCE INDEX (mysqlq_jobs_live)
                            WHERE running_batch = 0 AND status = 'ready' AND queue = %(queue)s
                              AND finished_at IS NULL)) = 18446744073709551615 AS unturned,
       (SELECT last_turn FROM mysqlq_fair_keys WHERE queue = %(queue)s AND fairness_key = '') AS last_turn,
       (SELECT step FROM mysqlq_fair_keys WHERE queue = %(queue)s AND fairness_key = '') AS step;

-- name: keyless_take
-- Step 1 of giving turns (in a transaction): lock the row of the queue's jobs without a key, and
-- make LAST_INSERT_ID() the turn before the first to give: a step after its last turn, or the turn
-- being served if that is later, less a step. Two workers that give turns at once take them one
-- after the other.
INSERT INTO mysqlq_fair_keys (queue, fairness_key, last_turn)
VALUES (%(queue)s, '', LAST_INSERT_ID(GREATEST(1000, %(serving)s) - 1000))
ON DUPLICATE KEY UPDATE last_turn = LAST_INSERT_ID(GREATEST(last_turn + step, %(serving)s) - step);

-- name: keyless_give
-- Step 2: the oldest ready jobs without a turn at the priority, in id order, each a step after the
-- one before (LAST_INSERT_ID(expr) is the session's, read and set row by row).
UPDATE mysqlq_jobs FORCE INDEX (mysqlq_jobs_live)
   SET turn = LAST_INSERT_ID(LAST_INSERT_ID() + %(step)s)
 WHERE running_batch = 0 AND status = 'ready' AND queue = %(queue)s AND finished_at IS NULL
   AND priority = %(priority)s AND turn = 18446744073709551615
 ORDER BY running_batch, status, queue, finished_at, priority, turn, id LIMIT %(limit)s;

-- name: keyless_given
-- Step 3: the last turn given, kept on the row.
UPDATE mysqlq_fair_keys SET last_turn = LAST_INSERT_ID() WHERE queue = %(queue)s AND fairness_key = '';

-- name: set_fair_weight
-- A key's weight in its queue, as its step (1000 / weight): a key of weight 2 takes two turns for
-- another's one. Its jobs already waiting keep their turns.
INSERT INTO mysqlq_fair_keys (queue, fairness_key, step) VALUES (%(queue)s, %(key)s, %(step)s)
ON DUPLICATE KEY UPDATE step = %(step)s;

-- ---------------------------------------------------------------- seeing it
-- What `mysqlq stats`, `mysqlq fairness list`, the dashboard and /metrics read: keyed ready jobs
-- only, and only of a queue that has ready jobs with a turn (count_waiting counts them on the index).

-- name: fair_backlog
-- One queue's keys with the most ready jobs, the first `limit`, largest first, each with its ready
-- jobs, and how many keys have ready jobs at all (key_count, the same on every row; no row: none).
-- Reads the queue's ready range of mysqlq_jobs_live (jobs without a turn are passed over on the
-- index) and each ready job with a turn by primary key for its key, which the index does not hold;
-- grouped in a temporary table, then sorted: as many rows as the queue has ready jobs with a turn.
SELECT fairness_key, COUNT(*) AS ready, COUNT(*) OVER () AS key_count
  FROM mysqlq_jobs FORCE INDEX (mysqlq_jobs_live)
 WHERE running_batch = 0 AND status = 'ready' AND queue = %(queue)s AND turn < 18446744073709551615
   AND fairness_key IS NOT NULL
 GROUP BY fairness_key
 ORDER BY ready DESC, fairness_key LIMIT %(limit)s;

-- name: fair_keys_waiting
-- Every key with ready jobs in one queue (NULL: in every queue), largest backlog first, the first
-- `limit`, with its step (NULL: never weighted, a step of 1000): fair_backlog's rows (of every
-- queue: the whole ready range of mysqlq_jobs_live), then one primary-key lookup in
-- mysqlq_fair_keys per key listed.
SELECT waiting.queue, waiting.fairness_key, waiting.ready, fair.step
  FROM (SELECT queue, fairness_key, COUNT(*) AS ready
          FROM mysqlq_jobs FORCE INDEX (mysqlq_jobs_live)
         WHERE running_batch = 0 AND status = 'ready' AND (%(queue)s IS NULL OR queue = %(queue)s)
           AND turn < 18446744073709551615 AND fairness_key IS NOT NULL
         GROUP BY queue, fairness_key
         ORDER BY ready DESC, queue, fairness_key LIMIT %(limit)s) AS waiting
  LEFT JOIN mysqlq_fair_keys AS fair ON fair.queue = waiting.queue AND fair.fairness_key = waiting.fairness_key
 ORDER BY waiting.ready DESC, waiting.queue, waiting.fairness_key;

-- name: weighted_fair_keys
-- Keys whose step is not the default (`step`: 1000, a weight of 1) in one queue (NULL: in every
-- queue), by queue and key, the first `limit`: a walk of mysqlq_fair_keys' primary key (a row per
-- queue and key ever used or weighted), or of the queue's range of it.
SELECT queue, fairness_key, step FROM mysqlq_fair_keys
 WHERE step <> %(step)s AND (%(queue)s IS NULL OR queue = %(queue)s)
 ORDER BY queue, fairness_key LIMIT %(limit)s;
