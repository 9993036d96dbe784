"""Trace context and OpenTelemetry spans from the producer (and `mysqlq enqueue`) to the handler."""
