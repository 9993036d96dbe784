"""The worker (mysqlq.worker): claims, outcomes, slots, crash safety, cancelling, progress, snoozes and
results."""
