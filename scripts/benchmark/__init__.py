"""The benchmark behind ``scripts/bench``: the workloads W1–W8 of docs/performance.md (``workloads``),
the bare-SQL reference loop (``bare``), the plumbing they share (``common``), the Galera comparison
(``galera``), the paced producer run on another test host (``producer``) and the profile (``profiling``).
``bare.py`` and ``producer.py`` also run as scripts of their own (in worker processes, on other hosts)."""
