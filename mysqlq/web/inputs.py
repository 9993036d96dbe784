"""What a request may ask for: names, ids and redirect targets, checked before any use."""

from __future__ import annotations

from werkzeug.exceptions import NotFound

from mysqlq.core.config import check_name
from mysqlq.core.errors import MysqlqError
from mysqlq.core.jobs import check_tags


def local_path(value: str | None, default: str = "/") -> str:
    """A redirect target on this site only (no scheme, no host, no //evil.example)."""
    if not value or not value.startswith("/") or value.startswith("//") or "\\" in value:
        return default
    return value


def name_filter(value: str | None, kind: str) -> str | None:
    """A queue or handler name from a filter (None when empty); 404 for a name no job can have."""
    if not value:
        return None
    try:
        return check_name(kind, value)
    except MysqlqError as exc:
        raise NotFound(str(exc)) from None


def tag_filter(value: str | None) -> str | None:
    """A tag from a filter (None when empty); 404 for a tag no job can have."""
    if not value:
        return None
    try:
        return check_tags([value])[0]
    except MysqlqError as exc:
        raise NotFound(str(exc)) from None


def queue_name(name: str) -> str:
    """A queue name from a URL path."""
    queue = name_filter(name, "queue")
    assert queue is not None
    return queue


def job_id_or_none(value: str | None) -> int | None:
    """A job id from a query string (None when empty)."""
    if not value:
        return None
    if not value.isdigit() or not 0 < int(value) < 2**64:
        raise NotFound(f"not a job id: {value!r}")
    return int(value)


def schedule_name(name: str) -> str:
    """A schedule entry's name from a URL path."""
    entry = name_filter(name, "schedule entry")
    assert entry is not None
    return entry
