"""Taking work in: how many jobs to claim (``claimsize``), from the durations seen so far
(``observed_durations``), the claim itself (``claimer``) and the jobs it admits under concurrency
limits (``concurrency_admission``) and rate limits (``rate_admission``)."""
