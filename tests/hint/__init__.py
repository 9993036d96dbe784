"""The has-task hints (mysqlq.hint): where workers take them, how producers find them, on one host and
across hosts."""
