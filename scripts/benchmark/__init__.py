"""The benchmark behind ``scripts/bench``: a module per kind of workload of docs/performance.md, named
by what it measures, each run as the sections W1…W10 that ``scripts/bench --only`` names:

- ``drain`` (W1: a backlog drained, against the bare-SQL loop and its ceiling; W1nohistory: the same
  with done jobs deleted as they complete), ``drain_warm`` (W1warm: idle workers handed a backlog),
  ``drain_tls`` (W1tls), ``drain_traced`` (W1otel: what tracing costs);
- ``latency`` (W2), ``idle`` (W3), ``enqueue`` (W4), ``django_enqueue`` (W4django), ``history`` (W5:
  the drain beside done rows, and their purge), ``recovery`` (W6: a worker killed), ``io_bound`` (W7,
  W7sweep), ``fairness`` (W8: slow jobs spread over workers), ``workflows`` (W9), ``rate_limit`` (W10,
  W10keys), ``strategies`` (the claim strategies);

each a function of a Bench that runs its workload ``bench.runs`` times, prints one line per figure as
soon as it is known, and returns the figures (for the summary table). Beside them: what they share
(``shared``: sizes, default settings, the drains they time), the bare-SQL reference loop (``bare``),
the plumbing (``common``), the Galera comparison (``galera``), the paced producer run on another test
host (``producer``), the profile and the CPU of the worker's and the producer's own code
(``profiling``, with ``parts_worker`` and ``enqueue_cpu``) and the server's work per job by statement
and index (``serverwork``), and the retention of a large history, batched deletes against dropped
partitions (``history_retention``, section ``retention``), and a job's whole life, enqueue, drain and
retention, with its history kept and off (``whole_job``, section ``wholejob``). ``bare.py`` and ``producer.py`` also run
as scripts of their own (in worker processes, on other hosts)."""
