-- Statements of the scheduler (mysqlq.leader.scheduler) and `mysqlq schedule list`: one row of state per
-- schedule entry in mysqlq_schedules. Same conventions as queries.sql; times are UTC.

-- name: schedule_now
-- The server's clock: every worker and host judges ticks by this one.
SELECT NOW(6);

-- name: schedule_states
-- The state of every known entry.
SELECT name, timing, last_tick, next_tick, enqueued_at, last_job_id, paused FROM mysqlq_schedules ORDER BY name;

-- name: schedule_states_page
-- The state of the first entries by name, for the dashboard (a bounded read).
SELECT name, timing, last_tick, next_tick, enqueued_at, last_job_id, paused
  FROM mysqlq_schedules ORDER BY name LIMIT %(limit)s;

-- name: schedule_set_paused
-- Pause or resume one entry (0 rows: no worker has started it yet, or it already was).
UPDATE mysqlq_schedules SET paused = %(paused)s WHERE name = %(name)s;

-- name: schedule_known
-- Whether an entry has state (a leading worker has started it).
SELECT paused FROM mysqlq_schedules WHERE name = %(name)s;

-- name: schedule_skip
-- A paused entry's due tick passes: move to the next one without enqueueing anything.
UPDATE mysqlq_schedules SET next_tick = %(next_tick)s WHERE name = %(name)s AND next_tick = %(due)s AND paused;

-- name: schedule_add
-- An entry seen for the first time starts at its next tick (0 rows: another worker added it first).
INSERT INTO mysqlq_schedules (name, timing, next_tick) VALUES (%(name)s, %(timing)s, %(next_tick)s)
ON DUPLICATE KEY UPDATE name = name;

-- name: schedule_retime
-- An entry whose cron or interval changed starts again at the next tick of its new timing.
UPDATE mysqlq_schedules SET timing = %(timing)s, next_tick = %(next_tick)s
 WHERE name = %(name)s AND timing = %(old_timing)s;

-- name: schedule_advance
-- After a tick was enqueued: remember it and the next one, if nobody advanced the entry meanwhile.
UPDATE mysqlq_schedules
   SET last_tick = %(tick)s, next_tick = %(next_tick)s, enqueued_at = NOW(6), last_job_id = %(job_id)s
 WHERE name = %(name)s AND next_tick = %(due)s;

-- name: schedule_forget
-- Entries no longer in the schedule file lose their state (added again, they start afresh).
DELETE FROM mysqlq_schedules WHERE name NOT IN ({ids});

-- name: schedule_forget_all
-- A schedule file with no entries: no state is kept.
DELETE FROM mysqlq_schedules;
