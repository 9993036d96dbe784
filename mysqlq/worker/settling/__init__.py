"""Settling a job: its outcome written (``outcomes``) and reported (``report``, ``worker_metrics``), the
leases the worker holds on its jobs until then (``leases``) and the spans of runs not yet settled
(``runs``)."""
