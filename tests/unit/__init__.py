"""Tests that need no database server: `make test-fast` runs them alone (under a minute)."""
