"""Durations as people type them: ``90s``, ``15m``, ``12h``, ``7d``, ``2w`` or plain seconds."""

from __future__ import annotations

import math
import re

from mysqlq.core.errors import ConfigError

UNITS = {"s": 1.0, "m": 60.0, "h": 3600.0, "d": 86400.0, "w": 7 * 86400.0}
OFF = frozenset({"off", "none", "never", "no", "false"})
_DURATION = re.compile(r"(\d+(?:\.\d*)?|\.\d+)\s*([smhdw]?)")


def parse_duration(text: str, what: str = "duration") -> float:
    """Seconds in ``text`` (a number, optionally followed by s, m, h, d or w); ConfigError otherwise."""
    match = _DURATION.fullmatch(str(text).strip().lower())
    if not match:
        raise ConfigError(f"{what} {text!r} is not a duration: use a number with s, m, h, d or w (90s, 15m, 12h, 7d)")
    seconds = float(match.group(1)) * UNITS[match.group(2) or "s"]
    if not math.isfinite(seconds):
        raise ConfigError(f"{what} {text!r} is too long")
    return seconds


def parse_retention(text: str, what: str = "retention") -> float:
    """Like :func:`parse_duration`, but ``0`` and ``off`` (none, never) mean "keep forever" (0.0)."""
    if str(text).strip().lower() in OFF:
        return 0.0
    return parse_duration(text, what)


def format_duration(seconds: float | None) -> str:
    """The shortest exact way to write ``seconds`` (``7d``, ``36h``, ``90s``); ``off`` for 0 or None."""
    if not seconds:
        return "off"
    for unit in ("d", "h", "m"):
        count = seconds / UNITS[unit]
        if count >= 1 and count == int(count):
            return f"{int(count)}{unit}"
    return f"{seconds:g}s"
