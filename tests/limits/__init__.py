"""Rate limits and concurrency limits, across worker processes."""
