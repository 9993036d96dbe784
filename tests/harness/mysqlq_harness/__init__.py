"""What the test suite, the demo and the benchmark stand on: private servers (``mariadb``, ``galera``),
test hosts in network namespaces (``netns``), a private systemd and journald (``systemd``,
``journald``), the environment and lifetime of what a test starts (``lifecycle``), local ports and
HTTP (``net``), and one way to wait, for a condition, for jobs to be done or for processes to stop
(``waiting``). Nothing here imports mysqlq or a database driver."""
