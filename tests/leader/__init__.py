"""The leader's duties (mysqlq.leader): leadership, the scheduler and its paused entries, retention."""
