"""The chores one worker does for all while it leads: the election (``elector``), reaping dead workers'
claims (``reaper``), retention of finished jobs (``retention``), recurring jobs (``scheduler``, read from
``schedule_file``), the concurrency-limits sweep (``limits_sweep``) and the rate limits' tidying
(``rates_sweep``), started by ``maintainer``."""
