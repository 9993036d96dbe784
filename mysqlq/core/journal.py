"""Journal output: each event becomes one journal entry with upper-case fields, sent by libsystemd's
``sd_journal_sendv`` (systemd-python's ``systemd.journal.sendv``): a value holding newlines (a
traceback) goes in the protocol's binary-safe form, an entry too big for a datagram in a sealed memfd,
and where no journald listens the entry is dropped. Imported only when logging goes to the journal,
which needs the binding (mysqlq.core.systemdbinding)."""

from __future__ import annotations

import functools
import json
import re
from collections.abc import Iterable, Sequence
from typing import Any

from systemd.journal import sendv as _sendv

from mysqlq.core.logvalues import FLOAT

PRIORITIES = {"critical": 2, "exception": 3, "error": 3, "warning": 4, "warn": 4, "info": 6, "debug": 7}
IDENTIFIER = "mysqlq"
# Fields this module sets itself (or journald interprets): an event key of the same name gets a prefix.
RESERVED = frozenset({"MESSAGE", "MESSAGE_ID", "PRIORITY", "SYSLOG_IDENTIFIER", "SYSLOG_FACILITY", "SYSLOG_PID",
                      "SYSLOG_TIMESTAMP", "MYSQLQ_EVENT", "CODE_FILE", "CODE_LINE", "CODE_FUNC", "ERRNO"})
# Bound context, shown after the event's own keys in MESSAGE (it is in every line of a worker).
TRAILING = ("worker", "batch_id")
_INVALID = re.compile(r"[^A-Z0-9_]")
_QUOTED = re.compile(r'[ "=\n\t]')  # a value holding one of these is shown JSON-quoted in MESSAGE
MAX_FIELD_NAME = 64


@functools.lru_cache(maxsize=1024)  # an event's keys are few and repeat on every line
def field_name(key: str) -> str:
    """The journal field for an event key: ``job_id`` → ``JOB_ID``; always a valid, user-settable name."""
    name = _INVALID.sub("_", key.upper()).lstrip("_")
    if not name or name[0].isdigit() or name in RESERVED:
        name = "MYSQLQ_" + name
    return name[:MAX_FIELD_NAME]


def _shown(value: Any) -> str:
    """A value as MESSAGE shows it."""
    if type(value) is int:  # most values of a job's line: never quoted
        return str(value)
    if type(value) is float:
        return FLOAT % value
    text = str(value)
    return json.dumps(text, ensure_ascii=False) if not text or _QUOTED.search(text) else text


def _field(value: Any) -> Any:
    """A value as its own field holds it: verbatim, floats as MESSAGE shows them."""
    return FLOAT % value if type(value) is float else value


def entry(level: str, event_dict: dict[str, Any]) -> list[str]:
    """An event as journal fields: MESSAGE (the event and its keys, readable), PRIORITY from the
    level, and every key as a field of its own (``job_id=42`` → ``JOB_ID=42``)."""
    event = str(event_dict.pop("event", ""))
    trace = event_dict.pop("exception", None)
    items = [(key, value) for key, value in event_dict.items() if value is not None and key not in TRAILING]
    items += [(key, value) for key, value in event_dict.items() if value is not None and key in TRAILING]
    message = " ".join([event, *(f"{key}={_shown(value)}" for key, value in items)])
    if trace:
        message += "\n" + str(trace)
        items.append(("exception", trace))
    return [
        f"MESSAGE={message}",
        f"PRIORITY={PRIORITIES.get(level, 6)}",
        f"SYSLOG_IDENTIFIER={IDENTIFIER}",
        f"MYSQLQ_EVENT={event}",
        *(f"{field_name(key)}={_field(value)}" for key, value in items),
    ]


def sendv(*fields: str) -> None:
    """Send one entry of ``NAME=value`` fields. A value no strict UTF-8 encodes (a lone surrogate, as
    from a file name decoded with ``surrogateescape``) goes with ``?`` for it; a journald socket no
    journald listens on drops the entry, as a missing socket does."""
    try:
        _sendv(*fields)
    except UnicodeEncodeError:
        _sendv(*(field.encode("utf-8", "replace") for field in fields))
    except ConnectionRefusedError:
        pass


def send(level: str, event_dict: dict[str, Any]) -> None:
    """One event as one journal entry (one ``sd_journal_sendv``)."""
    sendv(*entry(level, event_dict))


def send_many(level: str, event: str, context: dict[str, Any], keys: Sequence[str],
              rows: Iterable[tuple[Any, ...]]) -> None:
    """One entry per row, each as :func:`entry` renders ``context`` with the row's values
    named by ``keys`` (the entries a batch's jobs log, without a renderer's work per entry)."""
    names = [field_name(key) for key in keys]
    leading = [f"{key}={_shown(value)}" for key, value in context.items() if value is not None and key not in TRAILING]
    trailing = [f"{key}={_shown(value)}" for key, value in context.items() if value is not None and key in TRAILING]
    constant = [f"PRIORITY={PRIORITIES.get(level, 6)}", f"SYSLOG_IDENTIFIER={IDENTIFIER}", f"MYSQLQ_EVENT={event}",
                *(f"{field_name(key)}={_field(value)}" for key, value in context.items() if value is not None)]
    write = _sendv  # the binding's own, called directly: this loop is a batch's job lines
    for row in rows:
        shown = [f"{key}={_shown(value)}" for key, value in zip(keys, row, strict=True) if value is not None]
        message = " ".join([event, *leading, *shown, *trailing])
        fields = (f"MESSAGE={message}", *constant,
                  *(f"{name}={_field(value)}" for name, value in zip(names, row, strict=True) if value is not None))
        try:
            write(*fields)
        except (UnicodeEncodeError, ConnectionRefusedError):
            sendv(*fields)
