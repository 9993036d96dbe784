"""Running a claimed job: the handler's call with its time limit and outcome (``job_runner``), the threads
that run jobs side by side (``slots``), the handler's view of its job (``context``), cancels asked
while it runs (``cancels``), the progress it reports (``progress``), the parents it reads
(``parents``) and its span (``job_spans``)."""
