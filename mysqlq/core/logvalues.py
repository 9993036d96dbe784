"""How every log output writes a float: console lines (mysqlq.core.logs) and journal entries
(mysqlq.core.journal) alike. A module of its own so that logs, which picks the output, imports
journal, one of the outputs, and journal needs nothing back from logs."""

from __future__ import annotations

FLOAT = "%.6g"  # floats (durations, delays) to six significant digits: 0.000459, 12.5, 3600.12
