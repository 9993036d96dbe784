"""The plumbing every other part stands on: settings and DSNs, errors, job shapes, the handler
registry, logging (console, JSON, journal), systemd notifications, durations and addresses.

Imports nothing else of mysqlq."""
