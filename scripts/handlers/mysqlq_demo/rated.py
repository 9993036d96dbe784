"""W10's handler, in a module of its own: the rate limit it declares needs a mysqlq that knows rate
limits, and the other handlers run under older ones too (scripts/bench --against)."""

from __future__ import annotations

from typing import Any

import mysqlq


@mysqlq.handler(rate_limit="200/s")
def rated(payload: Any, ctx: Any) -> None:
    """Do nothing, at most 200 starting in any second (W10)."""


@mysqlq.handler(rate_limit="5/s", rate_key=lambda payload: payload["key"])
def rated_key(payload: Any, ctx: Any) -> None:
    """Do nothing, at most 5 of one payload ``key`` starting in any second (W10keys)."""
