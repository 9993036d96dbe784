"""Taking work in: how many jobs to claim (``claimsize``), when to claim again (``pace``), the claim
itself (``claimer``) and the jobs it admits under concurrency limits (``limits``) and rate limits
(``rates``)."""
