"""How the templates show ages and timestamps (Jinja globals ``age`` and ``utc``)."""

from __future__ import annotations

from datetime import datetime

from mysqlq.core.encryption import described, key_id_of


def age(seconds: float | None) -> str:
    """12.3 s, 4 min, 2.5 h, 3.1 d."""
    if seconds is None:
        return "-"
    if seconds < 60:
        return f"{seconds:.1f} s"
    if seconds < 3600:
        return f"{seconds / 60:.0f} min"
    if seconds < 86400:
        return f"{seconds / 3600:.1f} h"
    return f"{seconds / 86400:.1f} d"


def utc(value: datetime | None) -> str:
    return "-" if value is None else value.strftime("%Y-%m-%d %H:%M:%S") + " UTC"


def error_line(text: str | None) -> str:
    """A list's first line of a job's error; an encrypted one (cut short, it cannot be opened) as such."""
    if not text:
        return ""
    return described(text) if key_id_of(text) else text
