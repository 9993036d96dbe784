"""A handler whose module logs with structlog itself, as an application's code may, not through ctx.log."""

from __future__ import annotations

from typing import Any

import structlog

import mysqlq

log = structlog.get_logger("app")  # made at import, before the worker has looked the handler up


def handler(payload: Any, ctx: mysqlq.JobContext) -> None:
    log.bind(job=ctx.job_id).info("app.said")
    log.debug("app.hidden")  # below the worker's level (info): not written
