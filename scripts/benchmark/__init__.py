"""The benchmark behind ``scripts/bench``: one module per workload of docs/performance.md (``w1`` … ``w8``,
``w1warm``, ``workflows`` for W9, ``django_enqueue`` for W4django) and the claim-strategy comparison
(``strategies``), each a function of a Bench that runs its workload ``bench.runs`` times, prints one line
per figure as soon as it is known, and returns the figures (for the summary table); what they share
(``shared``: sizes, default settings, the drains they time), the bare-SQL reference loop (``bare``), the
plumbing (``common``), the Galera comparison (``galera``), the paced producer run on another test host
(``producer``), the profile (``profiling``) and the server's work per job (``serverwork``). ``bare.py`` and
``producer.py`` also run as scripts of their own (in worker processes, on other hosts)."""
