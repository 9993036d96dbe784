-- Statements of concurrency limits (mysqlq.worker.intake.concurrency_admission, mysqlq.store.limits). Same conventions as
-- queries.sql. Only jobs that carry a concurrency key ever reach them. Each runs inside a
-- transaction that first locks the key's row in mysqlq_semaphores (lock_semaphore), so the
-- holders and waiters of one key change one transaction at a time.

-- name: lock_semaphore
-- Lock a key's row, creating it when the key is not in use yet; the version is bumped so that
-- the row is written (Galera certifies writes: two nodes admitting to one key conflict here).
INSERT INTO mysqlq_semaphores (concurrency_key, version) VALUES (%(key)s, 1)
ON DUPLICATE KEY UPDATE version = version + 1;

-- name: semaphore_holders
-- The jobs holding a slot of a key, locked until the transaction ends.
SELECT job_id FROM mysqlq_semaphore_holders WHERE concurrency_key = %(key)s ORDER BY job_id FOR UPDATE;

-- name: live_holders
-- Which of the listed holders still need their slot: jobs that are ready or running. Any other
-- (done, dead, cancelled, waiting to retry, deleted) gave it up, even if its worker died before
-- saying so.
SELECT id FROM mysqlq_jobs WHERE id IN ({ids}) AND status IN ('ready', 'running');

-- name: drop_holders
-- Give back the slots of listed jobs of a key.
DELETE FROM mysqlq_semaphore_holders WHERE concurrency_key = %s AND job_id IN ({ids});

-- name: add_holder
-- A job takes a slot of a key.
INSERT INTO mysqlq_semaphore_holders (concurrency_key, job_id) VALUES (%(key)s, %(job_id)s);

-- name: lock_batch_keyed
-- At admission: which keyed jobs of a just-claimed batch are still ours, locked so that the
-- reaper cannot hand them to another worker before the admission commits (the fence).
SELECT id FROM mysqlq_jobs WHERE running_batch = %s AND id IN ({ids}) FOR UPDATE;

-- name: block_job
-- Set a claimed job aside until a slot of its key frees: not claimable, no lease, and the
-- attempt its claim took refunded (it did not run). Fenced by the claim token.
UPDATE mysqlq_jobs
   SET status = 'blocked', batch_id = 0, running_batch = 0, started_at = '1970-01-01 00:00:00',
       worker_id = 0, attempts = GREATEST(attempts, 1) - 1
 WHERE id = %(id)s AND running_batch = %(batch_id)s;

-- name: add_blocked
-- Remember a blocked job as waiting for a slot of its key, with its handler's limit.
INSERT INTO mysqlq_blocked_jobs (concurrency_key, job_id, concurrency_limit)
VALUES (%(key)s, %(job_id)s, %(limit)s);

-- name: first_blocked
-- The oldest jobs waiting for a slot of a key, locked.
SELECT job_id, concurrency_limit FROM mysqlq_blocked_jobs
 WHERE concurrency_key = %(key)s ORDER BY job_id LIMIT %(limit)s FOR UPDATE;

-- name: still_blocked
-- Which of the listed jobs are still blocked (one cancelled meanwhile waits no more), locked.
SELECT id FROM mysqlq_jobs WHERE id IN ({ids}) AND status = 'blocked' FOR UPDATE;

-- name: drop_blocked
-- Listed jobs of a key wait no more (given a slot, or no longer blocked).
DELETE FROM mysqlq_blocked_jobs WHERE concurrency_key = %s AND job_id IN ({ids});

-- name: unblock_jobs
-- Blocked jobs given a slot become ready: the claim sees them again (in the ready index).
UPDATE mysqlq_jobs SET status = 'ready' WHERE status = 'blocked' AND id IN ({ids});

-- name: ready_queues
-- The queues of listed jobs (to wake the workers of the queues that gained ready jobs).
SELECT DISTINCT queue FROM mysqlq_jobs WHERE id IN ({ids});

-- name: tidy_semaphore
-- A key that no job holds or waits for anymore leaves mysqlq_semaphores (the row is made again
-- when the key is next used), so the table stays as small as the set of keys in use.
DELETE FROM mysqlq_semaphores
 WHERE concurrency_key = %(key)s
   AND NOT EXISTS (SELECT 1 FROM mysqlq_semaphore_holders h WHERE h.concurrency_key = %(key)s)
   AND NOT EXISTS (SELECT 1 FROM mysqlq_blocked_jobs b WHERE b.concurrency_key = %(key)s);

-- name: keys_of_jobs
-- The concurrency keys of listed jobs (an operator's cancel frees what they held or waited for).
SELECT DISTINCT concurrency_key FROM mysqlq_jobs WHERE id IN ({ids}) AND concurrency_key IS NOT NULL;

-- name: stale_holder_keys
-- Keys with a slot held by a job that no longer needs it (the reaper found it out of attempts, or
-- its worker died between recording the outcome and giving the slot back): read by the leader,
-- over the holders only (at most the sum of the limits of the keys in use). A row with a NULL key
-- says that no slot is held and no job waits for one (concurrency limits are not in use: the leader
-- looks again rarely).
(SELECT DISTINCT h.concurrency_key FROM mysqlq_semaphore_holders h LEFT JOIN mysqlq_jobs j ON j.id = h.job_id
  WHERE j.id IS NULL OR j.status NOT IN ('ready', 'running')
  LIMIT %(limit)s)
UNION ALL
(SELECT NULL FROM DUAL
  WHERE NOT EXISTS (SELECT 1 FROM mysqlq_semaphore_holders) AND NOT EXISTS (SELECT 1 FROM mysqlq_blocked_jobs));

-- name: stale_or_starved_keys
-- The leader's slower check, in the same query: the keys of stale_holder_keys, and the keys whose
-- oldest waiting job could take a slot now (a safety net: every release already makes the next
-- job ready), at most one row per key in use; and the NULL row of stale_holder_keys.
(SELECT DISTINCT h.concurrency_key FROM mysqlq_semaphore_holders h LEFT JOIN mysqlq_jobs j ON j.id = h.job_id
  WHERE j.id IS NULL OR j.status NOT IN ('ready', 'running')
  LIMIT %(limit)s)
UNION
(SELECT s.concurrency_key FROM mysqlq_semaphores s
  WHERE (SELECT b.concurrency_limit FROM mysqlq_blocked_jobs b WHERE b.concurrency_key = s.concurrency_key
          ORDER BY b.job_id LIMIT 1)
        > (SELECT COUNT(*) FROM mysqlq_semaphore_holders h WHERE h.concurrency_key = s.concurrency_key)
  LIMIT %(limit)s)
UNION
(SELECT NULL FROM DUAL
  WHERE NOT EXISTS (SELECT 1 FROM mysqlq_semaphore_holders) AND NOT EXISTS (SELECT 1 FROM mysqlq_blocked_jobs));
