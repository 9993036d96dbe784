"""What the test suite, the demo and the benchmark stand on: private servers (``mariadb``, ``galera``),
test hosts in network namespaces (``netns``), a private systemd and journald (``systemd``,
``journald``), and one way to wait (``waiting``). Nothing here imports mysqlq or a database driver."""
