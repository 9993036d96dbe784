"""A structlog processor that writes each event to the journal with structured fields."""

from __future__ import annotations

from collections.abc import MutableMapping
from typing import Any

import structlog

from systemd import journal

PRIORITIES = {"critical": 2, "error": 3, "warning": 4, "info": 6, "debug": 7}


class JournalRenderer:
    """Sends ``event`` as MESSAGE and every bound key as an upper-case field (JOB_ID=42, ...)."""

    def __call__(self, logger: Any, name: str, event_dict: MutableMapping[str, Any]) -> Any:
        level = str(event_dict.pop("level", name))
        event = str(event_dict.pop("event", ""))
        fields = {key.upper(): str(value) for key, value in event_dict.items() if value is not None}
        detail = " ".join(f"{key}={value}" for key, value in event_dict.items() if value is not None)
        journal.send(
            f"{event} {detail}".rstrip(),
            PRIORITY=str(PRIORITIES.get(level, 6)),
            SYSLOG_IDENTIFIER="mysqlq",
            MYSQLQ_EVENT=event,
            **fields,
        )
        raise structlog.DropEvent
