"""Workflows: jobs that wait for others, groups and chains, and the same under chaos."""
