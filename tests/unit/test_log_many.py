"""logs.log_many, the worker's one line per job written a batch at a time: the same entries, in the
same order, as one logger call per job, in every output the CLI configures and as a library."""

from __future__ import annotations

import io
import logging
from collections.abc import Iterator
from typing import Any

import pytest

from mysqlq.core import logs

KEYS = ("job_id", "queue", "handler", "attempt", "duration")
ROWS = [
    (1, "default", "app.mail", 1, 0.000459),
    (2, "two words", "app.mail", 2, 12.5),  # quoted in MESSAGE, verbatim in fields
    (3, "", "app.%s", 1, 0.0),  # empty, and a percent sign that is no placeholder
    (4, "default", None, 1, 1e-06),  # None: shown on the console, left out of the journal
]


@pytest.fixture
def configured() -> Iterator[None]:
    state = logs._configured, logs._emit, logs._many, logs._threshold
    try:
        yield
    finally:
        logs._configured, logs._emit, logs._many, logs._threshold = state
        logs._generation += 1  # loggers made meanwhile settle again


def one_by_one(log: Any) -> None:
    for row in ROWS:
        log.info("job.done", **dict(zip(KEYS, row, strict=True)))


def test_console_lines_are_those_of_one_call_per_row(configured: None, monkeypatch: pytest.MonkeyPatch) -> None:
    stream = io.StringIO()
    monkeypatch.setattr(logs, "_buffered_stderr", lambda: stream)
    logs.configure("console", "info")
    log = logs.get_logger("mysqlq.worker").bind(worker="w 1", batch_id=7)
    one_by_one(log)
    each = stream.getvalue()
    stream.seek(0)
    stream.truncate()
    logs.log_many(log, "info", "job.done", KEYS, ROWS)
    many = stream.getvalue()
    assert len(many.splitlines()) == len(ROWS)
    # The second's stamp may differ if the clock ticked between the two: compare what follows it.
    assert [line[20:] for line in many.splitlines()] == [line[20:] for line in each.splitlines()]
    assert "queue='two words'" in many and "handler=app.%s" in many and "worker='w 1' batch_id=7 job_id=1" in many


def test_journal_entries_are_those_of_one_call_per_row(configured: None, monkeypatch: pytest.MonkeyPatch) -> None:
    sent: list[tuple[str, ...]] = []
    monkeypatch.setattr("mysqlq.core.journal._sendv", lambda *fields: sent.append(fields))
    logs.configure("journal", "info")
    log = logs.get_logger("mysqlq.worker").bind(worker="w1", batch_id=7)
    one_by_one(log)
    each = list(sent)
    sent.clear()
    logs.log_many(log, "info", "job.done", KEYS, ROWS)
    assert [sorted(entry) for entry in sent] == [sorted(entry) for entry in each]
    first = dict(line.split("=", 1) for line in sent[0])
    assert first["MESSAGE"] == "job.done job_id=1 queue=default handler=app.mail attempt=1 duration=0.000459 " \
                               "worker=w1 batch_id=7"
    assert (first["JOB_ID"], first["PRIORITY"], first["MYSQLQ_EVENT"]) == ("1", "6", "job.done")
    assert "HANDLER" not in dict(line.split("=", 1) for line in sent[3])


def test_rows_below_the_configured_level_are_not_written(configured: None, monkeypatch: pytest.MonkeyPatch) -> None:
    stream = io.StringIO()
    monkeypatch.setattr(logs, "_buffered_stderr", lambda: stream)
    logs.configure("console", "warning")
    logs.log_many(logs.get_logger("mysqlq.worker").bind(worker="w1"), "info", "job.done", KEYS, ROWS)
    assert stream.getvalue() == ""


def test_as_a_library_each_row_is_a_record_of_the_logging_module(
    configured: None, caplog: pytest.LogCaptureFixture
) -> None:
    logs._configured, logs._many = False, None  # as in an application: the CLI configured nothing
    with caplog.at_level(logging.INFO, logger="mysqlq"):
        logs.log_many(logs.get_logger("mysqlq.worker").bind(worker="w1"), "info", "job.done", KEYS, ROWS)
    assert [record.job_id for record in caplog.records] == [1, 2, 3, 4]  # type: ignore[attr-defined]
    assert caplog.records[0].getMessage().startswith("job.done worker=w1 job_id=1 queue=default")
