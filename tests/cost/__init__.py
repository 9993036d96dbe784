"""What mysqlq costs the server: statements per enqueue, an idle queue, and a hot path that reads no
history."""
