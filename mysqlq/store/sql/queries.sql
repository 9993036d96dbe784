-- The core statements: the schema's bookkeeping, enqueueing, claiming, outcomes, workers and
-- leases, leadership and stats. The others live in the other *.sql files of this folder, one per
-- concern (hints, limits, schedules, dependencies, operations, the dashboard), the migrations in
-- migrations/. mysqlq.store.sql.queries() reads every *.sql file here, and a name may be defined
-- only once across them. Conventions, for every file here: each statement stands under a
-- "-- name: x" header with a line saying what it is for; mysqlq.store is the only code that runs
-- them. A "{@name}" stands for the fragment called name (mysqlq.store.sql.queries fills it in).
-- Parameters are %(name)s or %s; a statement with "{ids}" gets one %s placeholder per
-- element of a list (see mysqlq.store.expand and mysqlq.store.execute_in), and a "{rows}",
-- "{database}" or "{isolation}" is filled in by the one function that runs it (mysqlq.store.jobs,
-- mysqlq.store.schema, mysqlq.store.db).
-- Dialect notes (MariaDB 10.6+ and MySQL 8.0+ both run every statement here):
--   * no RETURNING (MariaDB only); bulk inserts return a count, single inserts use LAST_INSERT_ID;
--   * SKIP LOCKED exists in both; information_schema.PROCESSLIST exists in both (deprecated in MySQL 8).

-- ---------------------------------------------------------------- schema

-- name: database_exists
-- 1 when the DSN's database exists (`migrate --create-database` leaves it alone then: creating
-- needs a privilege that a user of an existing database may lack).
SELECT COUNT(*) FROM information_schema.SCHEMATA WHERE SCHEMA_NAME = %(name)s;

-- name: create_database
-- Create the DSN's database (`mysqlq migrate --create-database`) with the tables' character set.
-- An identifier cannot be a parameter: {database} is replaced by a validated, backquoted name.
CREATE DATABASE IF NOT EXISTS {database} CHARACTER SET utf8mb4 COLLATE utf8mb4_bin;

-- name: create_version_table
-- The table holding the schema version every command checks.
CREATE TABLE IF NOT EXISTS mysqlq_schema_version (
  version INT NOT NULL PRIMARY KEY,
  applied_at DATETIME(6) NOT NULL
) ENGINE=InnoDB;

-- name: schema_version
-- The newest applied migration (fails with 1146 when the table does not exist yet).
SELECT COALESCE(MAX(version), 0) FROM mysqlq_schema_version;

-- name: create_migration_lock_table
-- A lease row that lets one `mysqlq migrate` at a time change the schema, on a cluster as on one
-- server (GET_LOCK is node-local on Galera).
CREATE TABLE IF NOT EXISTS mysqlq_migration_lock (
  name VARCHAR(50) NOT NULL PRIMARY KEY,
  holder VARCHAR(64) NULL,
  lease_until DATETIME(6) NOT NULL
) ENGINE=InnoDB;

-- name: add_migration_lock
-- The lock's one row (once).
INSERT IGNORE INTO mysqlq_migration_lock (name, holder, lease_until) VALUES ('migrate', NULL, NOW(6));

-- name: take_migration_lock
-- Take the migration lock for a while if it is free or its holder's lease lapsed (1 row: taken),
-- or extend it when we hold it.
UPDATE mysqlq_migration_lock SET holder = %(holder)s, lease_until = NOW(6) + INTERVAL %(lease_us)s MICROSECOND
 WHERE name = 'migrate' AND (holder IS NULL OR holder = %(holder)s OR lease_until < NOW(6));

-- name: migration_running
-- Whether a `mysqlq migrate` holds the migration lock now (1 row: its lease has not lapsed).
SELECT COUNT(*) FROM mysqlq_migration_lock WHERE name = 'migrate' AND holder IS NOT NULL AND lease_until > NOW(6);

-- name: release_migration_lock
-- Give the migration lock back.
UPDATE mysqlq_migration_lock SET holder = NULL, lease_until = NOW(6) WHERE name = 'migrate' AND holder = %(holder)s;

-- name: job_id_range
-- The smallest and largest job id (a migration's backfill walks this range in short steps).
SELECT COALESCE(MIN(id), 0), COALESCE(MAX(id), 0) FROM mysqlq_jobs;

-- name: record_version
-- Remember that a migration was applied.
INSERT INTO mysqlq_schema_version (version, applied_at) VALUES (%(version)s, NOW(6));

-- name: wsrep_on
-- Whether the server is a Galera cluster node (no row on MySQL; OFF on a plain MariaDB).
SHOW GLOBAL VARIABLES LIKE 'wsrep_on';

-- name: wsrep_ready
-- On a Galera node: whether it accepts queries (it is in the primary component and synced enough).
SHOW GLOBAL STATUS LIKE 'wsrep_ready';

-- name: server_role
-- Whether a server takes writes and is a Galera node: read_only, super_read_only (MySQL only;
-- Group Replication sets it on secondaries and on members not ONLINE) and wsrep_on (MariaDB).
SHOW GLOBAL VARIABLES WHERE Variable_name IN ('read_only', 'super_read_only', 'wsrep_on');

-- name: tls_cipher
-- The cipher of this connection's TLS, empty when it is not encrypted (checked after connecting
-- when the DSN's ssl_mode requires TLS: the client library may fall back to plain text silently).
SHOW SESSION STATUS LIKE 'Ssl_cipher';

-- name: session_time_zone
-- Every connection's first statement (the driver's init_command): the session in UTC, whatever the
-- server's time zone, so that NOW(6) and the times mysqlq writes and reads agree.
SET time_zone = '+00:00';

-- name: session_worker
-- A worker's connections, once connected: the worker's name, which the statements that end an attempt
-- write into the job's row ({@worker_name}). A claim writes only the worker's id (a name would change
-- the row's size, and the row would not be rewritten in place); a subquery of mysqlq_workers
-- would take a shared lock on the worker's row until the ending transaction commits (an
-- INSERT … SELECT or UPDATE reads other tables so), and the worker's heartbeat would wait for it.
SET @mysqlq_worker = %(name)s;

-- name: session_isolation
-- The transaction isolation level of a worker's connections (`mysqlq worker --isolation`). A keyword
-- cannot be a parameter: {isolation} is replaced by a member of mysqlq.core.config.Isolation.
SET SESSION TRANSACTION ISOLATION LEVEL {isolation};

-- name: get_lock
-- A named server lock (migrations, reaper leadership); 1 when taken.
SELECT GET_LOCK(%(name)s, %(timeout)s);

-- name: release_lock
-- Give a named server lock back.
SELECT RELEASE_LOCK(%(name)s);

-- ---------------------------------------------------------------- producer

-- name: insert_job
-- Enqueue one job ({rows}: one job_values or job_values_due row); when its dedupe key exists,
-- LAST_INSERT_ID() becomes the existing job's id.
INSERT INTO mysqlq_jobs
  (queue, handler, payload, status, priority, run_at, max_attempts, time_limit, enqueued_at, dedupe_key,
   dedupe_scope, concurrency_key, tags, trace_context)
VALUES {rows}
ON DUPLICATE KEY UPDATE id = LAST_INSERT_ID(id);

-- name: insert_jobs
-- Enqueue many jobs in one multi-row INSERT ({rows}: a job_values or job_values_due row per job); rows whose
-- dedupe key exists are skipped.
INSERT INTO mysqlq_jobs
  (queue, handler, payload, status, priority, run_at, max_attempts, time_limit, enqueued_at, dedupe_key,
   dedupe_scope, concurrency_key, tags, trace_context)
VALUES {rows}
ON DUPLICATE KEY UPDATE id = id;

-- name: job_values
-- One row of insert_job or insert_jobs: queue, handler, payload, status, priority, run_at (NULL: now
-- plus the delay in microseconds), delay, max_attempts, time_limit, dedupe_key, dedupe_scope,
-- concurrency_key, tags (a JSON array), trace_context. Times are UTC_TIMESTAMP, not NOW: on an application's own connection (the outbox
-- form, the Django backend) the session may be in another time zone; mysqlq's sessions are UTC.
(%s, %s, %s, %s, %s, COALESCE(%s, UTC_TIMESTAMP(6) + INTERVAL %s MICROSECOND), %s, %s, UTC_TIMESTAMP(6), %s, %s, %s,
 %s, %s)

-- name: insert_job_tags
-- The tag rows of a job just inserted, in the job's transaction ({rows}: one job_tag_values row per tag):
-- the access path of `jobs list --tag`. Only a job with tags pays this statement.
INSERT INTO mysqlq_job_tags (job_id, tag) VALUES {rows};

-- name: job_tag_values
-- One row of insert_job_tags: the job's id and one of its tags.
(%s, %s)

-- name: jobs_inserted
-- The jobs a multi-row insert_jobs of tagged jobs just added, in its transaction: their ids run from
-- the statement's LAST_INSERT_ID(), one auto_increment_increment apart, over as many places as it
-- sent rows (InnoDB takes a block of ids for a statement of known rows; a job whose dedupe key is
-- taken leaves its place empty). Read without locks: a row another transaction committed in that
-- range would show, and the caller then finds more rows than its insert added.
SELECT id, tags FROM mysqlq_jobs
 WHERE id BETWEEN %(first)s AND %(first)s + %(places)s * @@auto_increment_increment
 ORDER BY id;

-- name: grouped_ids
-- Where a group commit's ids begin, read in its transaction after its insert_jobs (mysqlq.store.grouped):
-- its rows without a dedupe key went first, and the server reserves a multi-row INSERT's ids as one
-- block (the SQL layer asks the engine for as many values as the statement has rows, taken at once
-- in every InnoDB lock mode), so theirs are LAST_INSERT_ID() onwards, one auto_increment_increment
-- apart (Galera sets the increment to the cluster's size).
SELECT LAST_INSERT_ID(), @@auto_increment_increment;

-- name: grouped_keys
-- The jobs holding the dedupe keys of a group commit's rows ({ids}: the keys), read in its transaction
-- after its insert_jobs: a key that was free is its new job's, a taken one its holder's (whose row the
-- insert's duplicate check locked, so that the holder cannot let go of the key meanwhile).
SELECT dedupe_key, id FROM mysqlq_jobs WHERE dedupe_key IN ({ids});

-- name: job_values_due
-- One row of insert_job or insert_jobs for a job due at once (no run_at, no delay): job_values
-- without run_at and delay, whose expression costs the server about an eighth of a bulk insert.
(%s, %s, %s, %s, %s, UTC_TIMESTAMP(6), %s, %s, UTC_TIMESTAMP(6), %s, %s, %s, %s, %s)

-- ---------------------------------------------------------------- claim

-- name: poll
-- The idle worker's one question: is anything ready in my queues, when is the next scheduled job
-- due (microseconds from now, negative when overdue), which of my queues are paused; and, so that
-- followers watch the leader at no extra cost, the microseconds left on the reaper's lease and
-- whether the leader's wake-up lock is free (its holder's connection died); and how many rate limits
-- operators set and when they last changed one (the worker reads them again when that moved: a
-- removed one moves the count); and which of my queues, and the installation, were told to keep
-- their done jobs or not (`mysqlq history`; the installation's row has the empty name, never a queue's): each
-- as 0 or 1 followed by the name.
SELECT
  (SELECT 1 FROM mysqlq_jobs FORCE INDEX (mysqlq_jobs_live)
    WHERE running_batch = 0 AND status = 'ready' AND queue IN ({ids}) LIMIT 1) AS has_ready,
  (SELECT TIMESTAMPDIFF(MICROSECOND, NOW(6), MIN(scheduled_at)) FROM mysqlq_jobs) AS next_due_us,
  (SELECT GROUP_CONCAT(name SEPARATOR '\n') FROM mysqlq_queues WHERE paused AND name IN ({ids})) AS paused,
  (SELECT TIMESTAMPDIFF(MICROSECOND, NOW(6), lease_until) FROM mysqlq_leaders WHERE role = 'reaper')
    AS leader_remaining_us,
  IS_USED_LOCK(%s) IS NULL AS beacon_free,
  (SELECT CONCAT(COUNT(*), ' ', COALESCE(MAX(changed_at), '')) FROM mysqlq_rate_limits) AS limits_changed,
  (SELECT GROUP_CONCAT(CONCAT(keep_done, name) SEPARATOR '\n') FROM mysqlq_queues
    WHERE keep_done IS NOT NULL AND name IN ({ids}, '')) AS keep_done;

-- name: claimed_lately
-- A burst worker's last look before it exits, when it has found nothing yet: did a worker claim jobs of
-- these queues lately (the parameter, in microseconds)? A claim made before its queue's durations were known
-- holds a whole batch and gives back, soon after, what its slots cannot start (another may run them).
-- Only running rows are read (their entries follow every other row's in mysqlq_jobs_live).
SELECT 1 FROM mysqlq_jobs FORCE INDEX (mysqlq_jobs_live)
 WHERE running_batch > 0 AND queue IN ({ids})
   AND started_at > NOW(6) - INTERVAL %s MICROSECOND
 LIMIT 1;

-- name: promote_due
-- Make scheduled jobs (delayed or waiting to retry) whose time has come ready: the first rows of
-- mysqlq_jobs_scheduled (only scheduled jobs have a scheduled_at).
UPDATE mysqlq_jobs FORCE INDEX (mysqlq_jobs_scheduled)
   SET status = 'ready', scheduled_at = NULL
 WHERE scheduled_at <= NOW(6)
 ORDER BY scheduled_at LIMIT %(limit)s;

-- name: claim_batch
-- Claim: mark up to N ready jobs of a queue as ours under a fresh batch_id.
-- It walks the ready rows of the queue in mysqlq_jobs_live and moves each row it takes to its
-- batch's place there: one index entry per job. Every column it writes is of fixed size and
-- already holds a value (schema 18), so the row is rewritten in place; the worker's name is not
-- written (readers take it from mysqlq_workers while the job runs). The index is forced (with few
-- rows the optimizer may prefer another plan and a filesort), and ORDER BY names the equality
-- columns too, which keeps the plan an ordered index walk even on a session whose collation
-- differs from the table's. A ready job's finished_at is NULL (a job that ended and was made ready
-- again has it cleared), so the order is by priority, then turn, then id: a job without a fairness
-- key is enqueued without a turn (the largest), so a queue without keys is served in the order of
-- its ids; keyed jobs take turns, and where they wait, workers give the others turns too
-- (mysqlq.store.fairness).
UPDATE mysqlq_jobs FORCE INDEX (mysqlq_jobs_live)
   SET status = 'running', running_batch = %(batch_id)s, batch_id = %(batch_id)s, worker_id = %(worker_id)s,
       attempts = attempts + 1, started_at = NOW(6), lease_until = NOW(6) + INTERVAL %(lease_us)s MICROSECOND
 WHERE running_batch = 0 AND status = 'ready' AND queue = %(queue)s
 ORDER BY running_batch, status, queue, finished_at, priority, turn, id LIMIT %(limit)s;

-- name: lock_ready_skip_locked
-- Claim, SKIP LOCKED variant, step 1 (in a transaction): lock the next ready jobs nobody else holds.
SELECT id FROM mysqlq_jobs FORCE INDEX (mysqlq_jobs_live)
 WHERE running_batch = 0 AND status = 'ready' AND queue = %(queue)s
 ORDER BY running_batch, status, queue, finished_at, priority, turn, id LIMIT %(limit)s
 FOR UPDATE SKIP LOCKED;

-- name: claim_ids
-- Claim, SKIP LOCKED variant, step 2: mark the locked jobs as ours under a fresh batch_id.
UPDATE mysqlq_jobs
   SET status = 'running', running_batch = %s, batch_id = %s, worker_id = %s,
       attempts = attempts + 1, started_at = NOW(6), lease_until = NOW(6) + INTERVAL %s MICROSECOND
 WHERE running_batch = 0 AND status = 'ready' AND id IN ({ids});

-- name: fetch_batch
-- Read a claimed batch back by its claim token (the jobs of the batch still running), in the
-- claim's order.
-- The columns in the order of mysqlq.core.jobs.ClaimedJob's fields.
SELECT id, queue, handler, payload, attempts, max_attempts, time_limit, concurrency_key, snoozes, tags,
       trace_context, waiting_for IS NOT NULL, dedupe_key IS NOT NULL AND dedupe_scope = 'forever',
       fairness_key IS NOT NULL
  FROM mysqlq_jobs FORCE INDEX (mysqlq_jobs_live) WHERE running_batch = %(batch_id)s
 ORDER BY priority, turn, id;

-- name: batch_done_ids
-- Of these jobs, those still in either table, each with whether this batch completed it (by primary
-- key): after a completion that changed fewer rows than it named, the others were taken over. A job
-- in neither table was deleted by its completion (its queue keeps no history).
SELECT id, batch_id = %s AND status = 'done' FROM mysqlq_jobs WHERE id IN ({ids})
UNION ALL
SELECT id, batch_id = %s FROM mysqlq_jobs_history WHERE id IN ({ids});

-- ---------------------------------------------------------------- outcomes (all fenced by running_batch)

-- name: done_row
-- The history row of a job that ends done, read from its live row (the select list of the move_
-- statements, which include it as {@done_row}): every column of mysqlq_jobs, in its order, with the
-- values a done job has. Moved jobs hold no dedupe key of scope 'forever' (those stay live), so the
-- key is freed as every statement that ends a job frees an 'active' one. The worker's name is read
-- from its registration ({@worker_name}).
id, queue, handler, payload, 'done', priority, run_at, attempts, max_attempts, time_limit, batch_id, worker_id,
{@worker_name}, NULL, enqueued_at, started_at, NOW(6), NULL, last_error, dedupe_scope, NULL, NULL, concurrency_key,
result, dependents, waiting_for, snoozes, progress, progress_note, tags, trace_context, run_trace_context

-- name: worker_name
-- The name of the worker that ends an attempt (session_worker; NULL on a connection that is not a
-- worker's), which the statements that end it keep in the job's worker column.
@mysqlq_worker

-- name: move_done_jobs
-- Jobs of a batch finished, step 1 of 3 (in one transaction; see move_done_batch): copy them into
-- the history as done. Jobs whose claim was taken over are not touched (running_batch is the claim
-- token while a job runs, 0 once it is anything else); the locking read holds the rows it copies
-- until the transaction ends, so the delete that follows deletes exactly them.
-- Jobs that others wait for (dependents set) are left running: the worker ends them in a
-- transaction that also releases their dependents (mysqlq.store.dependencies.end_parents). Jobs
-- with a dedupe key kept "forever" stay in the live table, whose unique index keeps the key taken
-- (complete_jobs marks them done there).
INSERT INTO mysqlq_jobs_history
SELECT {@done_row} FROM mysqlq_jobs
 WHERE running_batch = %s AND id IN ({ids}) AND dependents IS NULL
   AND (dedupe_key IS NULL OR dedupe_scope = 'active')
   FOR UPDATE;

-- name: delete_done_jobs
-- Step 2: delete from the live table the jobs move_done_jobs copied (the same condition, on the rows
-- it holds locked).
DELETE FROM mysqlq_jobs
 WHERE running_batch = %s AND id IN ({ids}) AND dependents IS NULL
   AND (dedupe_key IS NULL OR dedupe_scope = 'active');

-- name: complete_jobs
-- Step 3: the jobs of the list left running without dependents (their dedupe key is kept
-- "forever") are marked done where they are; their entry in mysqlq_jobs_live moves from their
-- batch to (0, done, queue, finished_at). Usually none is left, and the statement changes nothing.
UPDATE mysqlq_jobs SET status = 'done', running_batch = 0, finished_at = NOW(6), worker = {@worker_name}
 WHERE running_batch = %s AND id IN ({ids}) AND dependents IS NULL;

-- name: move_done_batch
-- The rest of a batch finished (its failures and releases were written before), in one
-- transaction of three statements: this copy into the history, delete_done_batch, complete_batch.
-- Each reads the batch's rows by its entries in mysqlq_jobs_live.
INSERT INTO mysqlq_jobs_history
SELECT {@done_row} FROM mysqlq_jobs FORCE INDEX (mysqlq_jobs_live)
 WHERE running_batch = %(batch_id)s AND dependents IS NULL AND (dedupe_key IS NULL OR dedupe_scope = 'active')
   FOR UPDATE;

-- name: delete_done_batch
-- Step 2 of move_done_batch (in the multi-table form, the one that takes an index hint).
DELETE j FROM mysqlq_jobs j FORCE INDEX (mysqlq_jobs_live)
 WHERE j.running_batch = %(batch_id)s AND j.dependents IS NULL
   AND (j.dedupe_key IS NULL OR j.dedupe_scope = 'active');

-- name: complete_batch
-- Step 3: what is left of the batch without dependents (jobs whose dedupe key is kept "forever")
-- marked done in the live table: after the delete, its range of mysqlq_jobs_live holds only them.
UPDATE mysqlq_jobs FORCE INDEX (mysqlq_jobs_live)
   SET status = 'done', running_batch = 0, finished_at = NOW(6), worker = {@worker_name}
 WHERE running_batch = %(batch_id)s AND dependents IS NULL;

-- name: move_done_job
-- One finished job (transactional handlers: in the handler's transaction), as move_done_jobs.
INSERT INTO mysqlq_jobs_history
SELECT {@done_row} FROM mysqlq_jobs
 WHERE id = %(id)s AND running_batch = %(batch_id)s AND dependents IS NULL
   AND (dedupe_key IS NULL OR dedupe_scope = 'active')
   FOR UPDATE;

-- name: delete_done_job
-- Step 2 of move_done_job.
DELETE FROM mysqlq_jobs
 WHERE id = %(id)s AND running_batch = %(batch_id)s AND dependents IS NULL
   AND (dedupe_key IS NULL OR dedupe_scope = 'active');

-- name: complete_job
-- Step 3 of move_done_job: the job marked done where it is, if it is still running (its dedupe key
-- is kept "forever").
UPDATE mysqlq_jobs SET status = 'done', running_batch = 0, finished_at = NOW(6), worker = {@worker_name}
 WHERE id = %(id)s AND running_batch = %(batch_id)s AND dependents IS NULL;

-- name: discard_jobs
-- complete_jobs for jobs whose queue keeps no history (`mysqlq history off`): they are deleted,
-- fenced the same way. Jobs that others wait for are left running, for the worker to end (and keep).
DELETE FROM mysqlq_jobs WHERE running_batch = %s AND id IN ({ids}) AND dependents IS NULL;

-- name: discard_batch
-- complete_batch for a batch whose every job's queue keeps no history: the rest of it deleted
-- (in the multi-table form, the one that takes an index hint).
DELETE j FROM mysqlq_jobs j FORCE INDEX (mysqlq_jobs_live)
 WHERE j.running_batch = %(batch_id)s AND j.dependents IS NULL;

-- name: discard_job
-- complete_job (and complete_job_with_result: the result is not kept) for a job whose queue keeps
-- no history.
DELETE FROM mysqlq_jobs WHERE id = %(id)s AND running_batch = %(batch_id)s AND dependents IS NULL;

-- name: job_state
-- Where one job stands, for the producer's job() (its result included): live, or in the history
-- (one statement, one snapshot: a job moving between the two is found once).
SELECT id, queue, handler, status, priority, attempts, max_attempts, {@shown_worker}, enqueued_at, run_at,
       {@shown_start}, finished_at, last_error, result, payload, dedupe_key
  FROM mysqlq_jobs WHERE id = %(id)s
UNION ALL
SELECT id, queue, handler, status, priority, attempts, max_attempts, worker, enqueued_at, run_at, started_at,
       finished_at, last_error, result, payload, dedupe_key
  FROM mysqlq_jobs_history WHERE id = %(id)s;

-- name: job_state_by_key
-- The same for the job holding a dedupe key (one row of the unique index): always a live job (a job
-- that ends frees an 'active' key, and one kept "forever" stays live).
SELECT id, queue, handler, status, priority, attempts, max_attempts, {@shown_worker}, enqueued_at, run_at,
       {@shown_start}, finished_at, last_error, result, payload, dedupe_key
  FROM mysqlq_jobs WHERE dedupe_key = %(key)s;

-- name: shown_worker
-- A live job's worker as readers show it: while it runs, the name its worker registered under (a
-- claim writes only the worker's id; a plain read, which locks nothing); after, the name its last
-- attempt's end wrote.
COALESCE(IF(running_batch > 0, (SELECT w.name FROM mysqlq_workers w WHERE w.id = mysqlq_jobs.worker_id), NULL),
         worker) AS worker

-- name: shown_start
-- A live job's start as readers show it: NULL for a job that never started (the column holds the
-- epoch then: it is NOT NULL, so that a claim writes it in place).
NULLIF(started_at, '1970-01-01 00:00:00') AS started_at

-- name: holds_queue
-- Whether the connection's current database holds mysqlq's jobs table (an application's connection,
-- before mysqlq enqueues on it).
SELECT COUNT(*) FROM information_schema.tables WHERE table_schema = DATABASE() AND table_name = 'mysqlq_jobs';

-- name: store_result
-- The JSON a job's handler returned, written into its running row before the job ends (and moves
-- with it): fenced like the statements that end it, and only on a job nobody waits for (the
-- worker ends those with their result, releasing their dependents).
UPDATE mysqlq_jobs SET result = %(result)s
 WHERE id = %(id)s AND running_batch = %(batch_id)s AND dependents IS NULL;

-- name: retry_job
-- A failed job with attempts left waits for its backoff as a scheduled job.
UPDATE mysqlq_jobs
   SET status = 'scheduled', run_at = NOW(6) + INTERVAL %(delay_us)s MICROSECOND,
       scheduled_at = NOW(6) + INTERVAL %(delay_us)s MICROSECOND,
       running_batch = 0, batch_id = 0, worker = {@worker_name}, last_error = %(error)s
 WHERE id = %(id)s AND running_batch = %(batch_id)s;

-- name: record_progress
-- A job's progress, as its handler last reported it (written at most once a second), by the worker
-- that runs or ran it: a report that arrives after the job ended is still its last one
-- (record_progress_ended, when this changed no row).
UPDATE mysqlq_jobs SET progress = %(fraction)s, progress_note = %(note)s
 WHERE id = %(id)s AND worker_id = %(worker_id)s;

-- name: record_progress_ended
-- record_progress for a job that ended done and moved into the history.
UPDATE mysqlq_jobs_history SET progress = %(fraction)s, progress_note = %(note)s
 WHERE id = %(id)s AND worker_id = %(worker_id)s;

-- name: snooze_job
-- A job whose handler snoozed it (mysqlq.Snooze) waits as a scheduled job, not failed: the attempt
-- its claim took is refunded, its error left as it was, and the snooze counted.
UPDATE mysqlq_jobs
   SET status = 'scheduled', run_at = NOW(6) + INTERVAL %(delay_us)s MICROSECOND,
       scheduled_at = NOW(6) + INTERVAL %(delay_us)s MICROSECOND,
       running_batch = 0, batch_id = 0, worker = {@worker_name},
       attempts = GREATEST(attempts, 1) - 1, snoozes = snoozes + 1
 WHERE id = %(id)s AND running_batch = %(batch_id)s;

-- name: bury_job
-- A job out of attempts (or that can never succeed) ends dead, its error kept.
UPDATE mysqlq_jobs
   SET status = 'dead', running_batch = 0, finished_at = NOW(6), worker = {@worker_name}, last_error = %(error)s,
       dedupe_key = IF(dedupe_scope = 'active', NULL, dedupe_key)
 WHERE id = %(id)s AND running_batch = %(batch_id)s AND dependents IS NULL;

-- name: release_jobs
-- Give claimed jobs that never started back to the queue, refunding the attempt the claim took.
UPDATE mysqlq_jobs
   SET status = 'ready', running_batch = 0, batch_id = 0, worker_id = 0, started_at = '1970-01-01 00:00:00',
       attempts = GREATEST(attempts, 1) - 1
 WHERE running_batch = %s AND id IN ({ids});

-- ---------------------------------------------------------------- workers, leases, reaper

-- name: register_worker
-- A worker announces itself with the id of its heartbeat connection and the settings it is judged by.
INSERT INTO mysqlq_workers
  (name, host, pid, connection_id, node, queues, started_at, heartbeat_at, heartbeat_interval_us, lease_us)
VALUES (%(name)s, %(host)s, %(pid)s, CONNECTION_ID(), CONCAT(@@hostname, ':', @@port), %(queues)s, NOW(6), NOW(6),
        %(heartbeat_us)s, %(lease_us)s);

-- name: heartbeat
-- A live worker says so, with its connection's id and node (0 rows: the reaper gave it up for dead
-- and it must register again).
UPDATE mysqlq_workers SET heartbeat_at = NOW(6), connection_id = CONNECTION_ID(), node = CONCAT(@@hostname, ':', @@port)
 WHERE id = %(id)s;

-- name: extend_lease
-- A live worker keeps the claim on the batch it is working through.
UPDATE mysqlq_jobs FORCE INDEX (mysqlq_jobs_live) SET lease_until = NOW(6) + INTERVAL %(lease_us)s MICROSECOND
 WHERE running_batch = %(batch_id)s;

-- name: unregister_worker
-- A worker that stops cleanly leaves the registry.
DELETE FROM mysqlq_workers WHERE id = %(id)s;

-- name: same_name_workers
-- Other registrations of a worker name on a host: earlier lives, or a second live worker of that name.
SELECT id, pid, TIMESTAMPDIFF(MICROSECOND, heartbeat_at, NOW(6)) AS heartbeat_age_us, lease_us
  FROM mysqlq_workers WHERE name = %(name)s AND host = %(host)s AND id <> %(id)s ORDER BY id;

-- name: server_uptime
-- Seconds since the server started (after a restart, workers need a moment to re-register).
SHOW GLOBAL STATUS LIKE 'Uptime';

-- name: dead_workers
-- Workers whose heartbeat is older than their own lease (stale = 1), or, when checked, whose
-- connection no longer exists (stale = 0; the caller confirms those on a second look). A beat writes
-- heartbeat_at, connection_id and node together, so an id is only trusted if it was written since
-- the server started (after a restart, a worker still reconnecting is judged by its lease) and only
-- judged by the process list of its own node (on a cluster, other nodes' connections are not listed).
SELECT id, heartbeat_at, heartbeat_at < NOW(6) - INTERVAL lease_us MICROSECOND AS stale
  FROM mysqlq_workers
 WHERE heartbeat_at < NOW(6) - INTERVAL lease_us MICROSECOND
    OR (%(check_processlist)s
        AND node = CONCAT(@@hostname, ':', @@port)
        AND heartbeat_at > NOW(6) - INTERVAL %(uptime_us)s MICROSECOND
        AND connection_id NOT IN (SELECT ID FROM information_schema.PROCESSLIST));

-- name: worker_names
-- Names of registered workers, by id.
SELECT id, name FROM mysqlq_workers WHERE id IN ({ids});

-- name: reap_jobs
-- Running jobs of dead workers (and, with the flag, with an expired lease or no worker row) go back
-- to ready; those that used up their attempts this way (poison jobs) end dead. It reads the running
-- rows only (running_batch is not 0 on them alone), however long the history. Fenced by leadership:
-- only the reaper leader of the given epoch changes anything (a NULL epoch: a worker releasing its
-- own previous lives, which needs no leadership). Jobs with dependents that would end dead are
-- left to reaped_parents, which releases their dependents too.
UPDATE mysqlq_jobs j FORCE INDEX (mysqlq_jobs_live) LEFT JOIN mysqlq_workers w ON w.id = j.worker_id
   SET j.status = IF(j.attempts >= j.max_attempts, 'dead', 'ready'),
       j.finished_at = IF(j.attempts >= j.max_attempts, NOW(6), NULL),
       j.last_error = CONCAT('worker ', COALESCE(w.name, j.worker, '?'), ' was lost while running attempt ',
                             j.attempts, ' of ', j.max_attempts),
       j.worker = COALESCE(w.name, j.worker),
       j.dedupe_key = IF(j.attempts >= j.max_attempts AND j.dedupe_scope = 'active', NULL, j.dedupe_key),
       j.running_batch = 0, j.batch_id = 0
 WHERE j.running_batch > 0
   AND (j.dependents IS NULL OR j.attempts < j.max_attempts)
   AND (j.worker_id IN ({ids}) OR (%s AND (j.lease_until < NOW(6) OR w.id IS NULL)))
   AND (%s IS NULL OR EXISTS (SELECT 1 FROM mysqlq_leaders l
                               WHERE l.role = 'reaper' AND l.worker_id = %s AND l.epoch = %s));

-- name: delete_workers
-- Forget registry rows of workers found dead (fenced like reap_jobs).
DELETE FROM mysqlq_workers
 WHERE id IN ({ids})
   AND (%s IS NULL OR EXISTS (SELECT 1 FROM mysqlq_leaders l
                               WHERE l.role = 'reaper' AND l.worker_id = %s AND l.epoch = %s));

-- name: list_workers
-- The registry with what each worker holds, its settings, and whether it leads the reaper.
SELECT w.id, w.name, w.host, w.pid, w.connection_id, w.node, w.queues,
       TIMESTAMPDIFF(MICROSECOND, w.started_at, NOW(6)) AS age_us,
       TIMESTAMPDIFF(MICROSECOND, w.heartbeat_at, NOW(6)) AS heartbeat_age_us,
       w.heartbeat_interval_us, w.lease_us,
       (SELECT COUNT(*) FROM mysqlq_jobs j FORCE INDEX (mysqlq_jobs_live)
         WHERE j.running_batch > 0 AND j.worker_id = w.id) AS running,
       EXISTS (SELECT 1 FROM mysqlq_leaders l
                WHERE l.role = 'reaper' AND l.worker_id = w.id AND l.lease_until > NOW(6)) AS leader
  FROM mysqlq_workers w ORDER BY w.name, w.id;

-- ---------------------------------------------------------------- leadership

-- name: leader_state
-- Who holds a role's lease, its epoch, and the microseconds left on it (negative: lapsed).
SELECT worker_id, epoch, TIMESTAMPDIFF(MICROSECOND, NOW(6), lease_until) AS remaining_us
  FROM mysqlq_leaders WHERE role = %(role)s;

-- name: acquire_leadership
-- Take a role's lease under a new epoch (read back with LAST_INSERT_ID()) if it lapsed, or, when
-- stealing, if the connection of its holder, on this node, no longer exists (killed, not frozen).
UPDATE mysqlq_leaders
   SET worker_id = %(worker_id)s, connection_id = CONNECTION_ID(), node = CONCAT(@@hostname, ':', @@port),
       epoch = LAST_INSERT_ID(epoch + 1), lease_until = NOW(6) + INTERVAL %(lease_us)s MICROSECOND
 WHERE role = %(role)s
   AND (lease_until < NOW(6)
        OR (%(steal)s AND node = CONCAT(@@hostname, ':', @@port)
            AND (connection_id IS NULL
                 OR connection_id NOT IN (SELECT ID FROM information_schema.PROCESSLIST))));

-- name: renew_leadership
-- The leader extends its lease; 0 rows: another worker took the role over (a newer epoch).
UPDATE mysqlq_leaders
   SET lease_until = NOW(6) + INTERVAL %(lease_us)s MICROSECOND, connection_id = CONNECTION_ID(),
       node = CONCAT(@@hostname, ':', @@port)
 WHERE role = %(role)s AND worker_id = %(worker_id)s AND epoch = %(epoch)s;

-- name: release_leadership
-- A leader that stops lets the role lapse at once, so that another worker takes it over.
UPDATE mysqlq_leaders SET lease_until = NOW(6) - INTERVAL 1 SECOND, worker_id = NULL, connection_id = NULL
 WHERE role = %(role)s AND worker_id = %(worker_id)s AND epoch = %(epoch)s;

-- name: last_insert_id
-- The value LAST_INSERT_ID(expr) set in this session's last statement.
SELECT LAST_INSERT_ID();

-- ---------------------------------------------------------------- stats
-- Live jobs are counted exactly (they are few: what workers have not finished yet); history is
-- counted up to a cap, so that no count reads more than a bounded part of it. A statement of
-- finished jobs reads the live table and mysqlq_jobs_history alike, in the one statement.

-- name: count_waiting
-- Ready, scheduled, blocked and waiting jobs per queue, and how many of them have a turn (a keyed
-- job, or one without a key given a turn among keyed ones): their ranges of mysqlq_jobs_live, read
-- on the index alone (the index holds the turn), so that only a queue with such ready jobs is asked
-- for its backlog by key (fair_backlog).
SELECT queue, status, COUNT(*), SUM(turn < 18446744073709551615) FROM mysqlq_jobs FORCE INDEX (mysqlq_jobs_live)
 WHERE running_batch = 0 AND status IN ('ready', 'scheduled', 'blocked', 'waiting')
 GROUP BY queue, status;

-- name: count_running
-- Running jobs per queue: the running rows of mysqlq_jobs_live (running_batch is not 0 on them alone).
SELECT queue, COUNT(*) FROM mysqlq_jobs FORCE INDEX (mysqlq_jobs_live)
 WHERE running_batch > 0
 GROUP BY queue;

-- name: count_capped
-- Jobs of one finished status in one queue, counting no further than the cap in each table (a
-- result that reaches the cap means "at least the cap"; the sum may reach twice it): one range of
-- mysqlq_jobs_live in the live table and one of mysqlq_jobs_history_ended in the history, each
-- cut short.
SELECT COUNT(*) FROM (
  (SELECT 1 FROM mysqlq_jobs FORCE INDEX (mysqlq_jobs_live)
    WHERE running_batch = 0 AND status = %(status)s AND queue = %(queue)s
    LIMIT %(cap)s)
  UNION ALL
  (SELECT 1 FROM mysqlq_jobs_history FORCE INDEX (mysqlq_jobs_history_ended)
    WHERE status = %(status)s AND queue = %(queue)s
    LIMIT %(cap)s)
) AS capped;

-- name: next_queue
-- The first queue after a name that has jobs of a status (not running), in either table: one
-- dive into mysqlq_jobs_live and one into mysqlq_jobs_history_ended, so that the queues of a
-- status are listed in as many pairs of dives as there are queues.
SELECT MIN(queue) FROM (
  SELECT MIN(queue) AS queue FROM mysqlq_jobs FORCE INDEX (mysqlq_jobs_live)
   WHERE running_batch = 0 AND status = %(status)s AND queue > %(after)s
  UNION ALL
  SELECT MIN(queue) FROM mysqlq_jobs_history FORCE INDEX (mysqlq_jobs_history_ended)
   WHERE status = %(status)s AND queue > %(after)s
) AS firsts;

-- name: running_queues
-- Queues with running jobs (the running rows of mysqlq_jobs_live).
SELECT DISTINCT queue FROM mysqlq_jobs FORCE INDEX (mysqlq_jobs_live) WHERE running_batch > 0;

-- name: oldest_ready_age
-- Per queue, how long the oldest ready job has been waiting (microseconds): the ready rows only.
SELECT queue, TIMESTAMPDIFF(MICROSECOND, MIN(run_at), NOW(6)) FROM mysqlq_jobs FORCE INDEX (mysqlq_jobs_live)
 WHERE running_batch = 0 AND status = 'ready' GROUP BY queue;

-- name: cancelled_in_hand
-- Which of the jobs a worker holds were cancelled meanwhile (mysqlq cancel): primary-key lookups,
-- as many as the worker holds.
SELECT id FROM mysqlq_jobs WHERE id IN ({ids}) AND status = 'cancelled';
