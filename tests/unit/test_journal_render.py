"""Journal rendering without a journald: field names, priorities, MESSAGE, and when `auto` picks it."""

from __future__ import annotations

import os
import sys
from pathlib import Path

import pytest
import structlog

from mysqlq.core import logs
from mysqlq.core.journal import entry, field_name


def render(level: str, **event: object) -> dict[str, str]:
    lines = entry(level, dict(event))
    fields = [line.split("=", 1) for line in lines]
    names = [name for name, _ in fields]
    assert len(names) == len(set(names)), names  # never two values for one field
    return dict(fields)


def test_keys_become_upper_case_fields_and_the_level_a_syslog_priority() -> None:
    fields = render("warning", event="job.claim_lost", worker="w1", batch_id=7, job_id=42, queue="q", note=None)
    assert fields["PRIORITY"] == "4"
    assert fields["MYSQLQ_EVENT"] == "job.claim_lost"
    assert fields["SYSLOG_IDENTIFIER"] == "mysqlq"
    assert (fields["JOB_ID"], fields["BATCH_ID"], fields["WORKER"], fields["QUEUE"]) == ("42", "7", "w1", "q")
    assert "NOTE" not in fields
    # The event's own keys first, the worker's bound context last.
    assert fields["MESSAGE"] == "job.claim_lost job_id=42 queue=q worker=w1 batch_id=7"


@pytest.mark.parametrize(("level", "priority"), [("critical", "2"), ("error", "3"), ("exception", "3"),
                                                 ("warning", "4"), ("info", "6"), ("debug", "7")])
def test_priorities(level: str, priority: str) -> None:
    assert render(level, event="e")["PRIORITY"] == priority


def test_values_with_spaces_are_quoted_in_message_and_kept_verbatim_in_fields() -> None:
    fields = render("error", event="job.failed", error="ValueError: boom", empty="")
    assert fields["MESSAGE"] == 'job.failed error="ValueError: boom" empty=""'
    assert fields["ERROR"] == "ValueError: boom"


def test_keys_that_would_clash_or_are_not_field_names_are_renamed() -> None:
    assert field_name("job_id") == "JOB_ID"
    assert field_name("message") == "MYSQLQ_MESSAGE"
    assert field_name("priority") == "MYSQLQ_PRIORITY"
    assert field_name("_pid") == "PID"  # fields starting with _ are journald's own
    assert field_name("2nd-try.count") == "MYSQLQ_2ND_TRY_COUNT"
    assert len(field_name("x" * 100)) == 64
    fields = render("info", event="e", message="hi", priority=1)
    assert fields["MYSQLQ_MESSAGE"] == "hi" and fields["PRIORITY"] == "6"


def test_a_traceback_follows_the_message_and_has_a_field() -> None:
    fields = render("error", event="heartbeat.error", exception="Traceback (most recent call last):\n  boom")
    assert fields["MESSAGE"] == "heartbeat.error\nTraceback (most recent call last):\n  boom"
    assert fields["EXCEPTION"].startswith("Traceback")


@pytest.mark.parametrize("whose", ["mysqlq's", "a handler's"])
def test_configured_journal_logging_sends_one_entry_per_event(monkeypatch: pytest.MonkeyPatch, whose: str) -> None:
    sent: list[tuple[str, ...]] = []
    monkeypatch.setattr("mysqlq.core.journal._sendv", lambda *fields: sent.append(fields))
    previous = structlog.get_config(), logs._configured, logs._emit, logs._many, logs._threshold
    try:
        assert logs.configure("journal", "info") == "journal"
        log = logs.get_logger("t").bind(worker="w")
        if whose == "a handler's":  # ctx.log: structlog's logger, writing what mysqlq's own write
            log = logs.for_handler(log)
            assert isinstance(log, structlog.typing.BindableLogger)
        log.debug("hidden")
        log.info("job.done", job_id=1)
        try:
            raise RuntimeError("bad")
        except RuntimeError:
            log.exception("oops")
    finally:
        structlog.configure(**previous[0])
        logs._configured, logs._emit, logs._many, logs._threshold = previous[1:]
        logs._generation += 1
    assert len(sent) == 2
    assert "MESSAGE=job.done job_id=1 worker=w" in sent[0]
    oops = dict(line.split("=", 1) for line in sent[1])
    assert oops["PRIORITY"] == "3" and "RuntimeError: bad" in oops["EXCEPTION"]


def test_auto_picks_the_journal_only_when_stderr_is_the_journal_stream(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    with open(tmp_path / "stderr", "w") as stream:
        monkeypatch.setattr(sys, "stderr", stream)
        info = os.fstat(stream.fileno())
        monkeypatch.delenv("JOURNAL_STREAM", raising=False)
        assert not logs.stderr_is_journal()
        monkeypatch.setenv("JOURNAL_STREAM", f"{info.st_dev}:{info.st_ino}")
        assert logs.stderr_is_journal()
        monkeypatch.setenv("JOURNAL_STREAM", f"{info.st_dev}:{info.st_ino + 1}")  # inherited, stderr redirected
        assert not logs.stderr_is_journal()
