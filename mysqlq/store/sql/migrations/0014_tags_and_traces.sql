-- mysqlq schema version 14: tags on jobs (`enqueue(..., tags=[...])`) and the trace context a job
-- was enqueued in (OpenTelemetry's W3C traceparent and tracestate), so the worker's span of the run
-- continues the producer's trace. Statements are separated by lines holding only ";".
--
-- Both columns are appended last, NULL by default and in no index: both servers add them
-- instantly, a job without tags or trace context stores nothing, and a producer of the previous
-- version keeps working. tags: the job's tags as a JSON array of strings, shown with the job.
-- trace_context: "traceparent" or "traceparent tracestate".
ALTER TABLE mysqlq_jobs ADD COLUMN tags VARCHAR(700) NULL, ADD COLUMN trace_context VARCHAR(600) NULL
;
-- The access path of `mysqlq jobs list --tag` and the dashboard's tag filter: one row per tag of a
-- job, newest jobs first within a tag. Written with the job, deleted with it (retention).
CREATE TABLE IF NOT EXISTS mysqlq_job_tags (
  job_id  BIGINT UNSIGNED NOT NULL,
  tag     VARCHAR(64) NOT NULL,
  PRIMARY KEY (job_id, tag),
  KEY mysqlq_job_tags_tag (tag, job_id)
) ENGINE=InnoDB DEFAULT CHARSET=utf8mb4 COLLATE=utf8mb4_bin
