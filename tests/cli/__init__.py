"""The command line: its commands, options and MYSQLQ_* variables, and the operations commands (jobs,
stats, retry, cancel, pause)."""
