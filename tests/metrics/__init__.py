"""Prometheus metrics: the dashboard's /metrics, a worker's --metrics-port, and contrib/'s dashboard
and alerts."""
