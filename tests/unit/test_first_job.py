"""What a worker's first job costs. A job's time starts once its handler is found: the first lookup
of a handler imports its module, a cost of the worker's start. Counted as the first job's time, it
made no-op jobs look slow enough that a worker's first full claim gave most of its jobs back. And a
worker reads the installed entry points as it starts, not at its first job. Server-free."""

from __future__ import annotations

import json
import time
from typing import Any

import pytest

from mysqlq.core import handlers, logs
from mysqlq.core.config import Settings
from mysqlq.core.errors import HandlerNotFound
from mysqlq.core.handlers import Handler, Registry
from mysqlq.core.jobs import ClaimedJob
from mysqlq.worker.running.cancels import Cancels
from mysqlq.worker.running.job_runner import Prepared, Runner

from .test_import_weight import loaded_after


class SlowRegistry(Registry):
    """A registry whose first lookup of a handler takes a while, as an import does."""

    def __init__(self) -> None:
        super().__init__()
        self.found_at: list[float] = []

    def resolve(self, name: str) -> Handler:
        time.sleep(0.05)
        self.found_at.append(time.monotonic())

        def handler(payload: Any, ctx: Any) -> None:
            return None

        return handler


def test_a_job_is_timed_from_when_its_handler_is_found() -> None:
    registry = SlowRegistry()
    runner = Runner(Settings(), registry, logs.get_logger("test"), Cancels())
    job = ClaimedJob(1, "default", "slow.import", b'{"n": 1}', 1, 3, None)
    before = time.monotonic()
    first = runner.prepare(job)
    assert isinstance(first, Prepared)
    assert registry.found_at and first.started >= registry.found_at[0] > before  # the lookup is not its time
    second = runner.prepare(job._replace(id=2))
    assert isinstance(second, Prepared) and len(registry.found_at) == 1  # looked up once, kept
    assert second.started > first.started


def test_a_handler_that_cannot_be_found_fails_the_job_with_the_reason() -> None:
    runner = Runner(Settings(), Registry(), logs.get_logger("test"), Cancels())
    outcome = runner.prepare(ClaimedJob(1, "default", "no.such.handler", b"{}", 1, 3, None))
    assert not isinstance(outcome, Prepared)
    assert outcome.kind == "failed" and "no.such.handler" in (outcome.error or "")


def test_a_worker_loads_the_payload_decoder_before_its_first_job() -> None:
    made = ("from mysqlq.core.config import Settings\nfrom mysqlq.core.handlers import Registry\n"
            "from mysqlq.core import logs\nfrom mysqlq.worker.running.cancels import Cancels\n"
            "from mysqlq.worker.running.job_runner import Runner\n")
    assert "orjson" not in loaded_after(made)  # the check sees what was imported
    assert "orjson" in loaded_after(made + "Runner(Settings(), Registry(), logs.get_logger('x'), Cancels())")


def test_the_entry_points_are_read_once_at_start_and_again_only_for_a_name_not_found(monkeypatch: Any) -> None:
    from importlib.metadata import EntryPoint

    reads: list[int] = []
    installed = {"a.one": EntryPoint("a.one", "json:dumps", "mysqlq.handlers")}

    def read() -> dict[str, EntryPoint]:
        reads.append(1)
        return dict(installed)

    monkeypatch.setattr(handlers, "_entry_points", read)
    registry = Registry()
    registry.preload()
    assert len(reads) == 1
    dumps: Any = json.dumps
    loads: Any = json.loads
    assert registry.resolve("a.one") is dumps and len(reads) == 1  # from what was read at start
    installed["b.two"] = EntryPoint("b.two", "json:loads", "mysqlq.handlers")  # installed by a deploy since
    assert registry.resolve("b.two") is loads and len(reads) == 2  # a miss reads them again
    with pytest.raises(HandlerNotFound):
        registry.resolve("c.three")
    assert len(reads) == 3
