"""What importing mysqlq brings into a process: an application that only enqueues, and CLI commands
other than ``worker``, load neither the worker, the leader's modules nor ``importlib.metadata``
(read only when a handler is looked up); neither structlog nor asyncio until a handler uses ``ctx.log``
or async code runs; and orjson only when a payload or result is first decoded."""

from __future__ import annotations

import json
import subprocess
import sys

HEAVY = ("mysqlq.worker.loop", "mysqlq.leader.maintainer", "importlib.metadata", "structlog", "orjson")


def loaded_after(statement: str) -> set[str]:
    code = f"import json, sys\n{statement}\nprint(json.dumps(sorted(sys.modules)))"
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60, check=True)
    return set(json.loads(result.stdout.splitlines()[-1]))


def test_import_mysqlq_loads_no_worker_and_no_entry_points() -> None:
    loaded = loaded_after("import mysqlq\nfrom mysqlq import JobContext, Producer, handler")
    assert "mysqlq.producer.enqueue" in loaded  # the check sees what was imported
    assert not loaded & set(HEAVY), sorted(loaded & set(HEAVY))


def test_neither_a_producer_nor_a_worker_loads_importlib_resources_or_tempfile() -> None:
    """The SQL files are read beside their module; the hint directory's fallback imports tempfile
    only when it is needed: 8 ms of imports (shutil, the compressors) no process pays."""
    unneeded = {"importlib.resources", "tempfile", "shutil", "bz2", "lzma"}
    loaded = loaded_after("import mysqlq\nimport mysqlq.worker.loop\nfrom mysqlq.store.sql import query, migrations\n"
                          "query('claim_batch')\nmigrations()")
    assert "mysqlq.hint.local" in loaded and "mysqlq.store.sql" in loaded  # the check sees what was imported
    assert not loaded & unneeded, sorted(loaded & unneeded)


def test_orjson_comes_with_the_first_decode() -> None:
    decoded = "import mysqlq\nfrom mysqlq.core.jobs import decode_payload\nassert decode_payload(b'[1]') == [1]"
    assert "orjson" in loaded_after(decoded)


def test_structlog_and_asyncio_come_only_with_a_handlers_log_or_async_code() -> None:
    as_library = "import mysqlq\nfrom mysqlq.core import logs\nlog = logs.get_logger('mysqlq.x')\nlog.warning('x.y')"
    assert not loaded_after(as_library) & {"structlog", "asyncio"}  # a record of the logging module
    as_worker = f"{as_library}\nimport mysqlq.worker.loop\nlogs.configure('console')\nlog.bind(a=1).info('x.z')"
    assert "mysqlq.worker.loop" in loaded_after(as_worker)
    assert not loaded_after(as_worker) & {"structlog", "asyncio"}  # the CLI's own lines
    assert "structlog" in loaded_after(f"{as_worker}\nlogs.for_handler(log.bind(a=1), job_id=1).info('x.h')")


def test_the_cli_loads_the_worker_only_for_the_worker_command() -> None:
    loaded = loaded_after("import mysqlq.cli")
    assert "mysqlq.cli" in loaded
    assert not loaded & {"mysqlq.worker.loop", "importlib.metadata", "mysqlq.cli.run", "mysqlq.cli.ops"}


def test_a_command_loads_its_own_module_and_no_other() -> None:
    looked_up = "import click\nfrom mysqlq.cli import main\nmain.get_command(click.Context(main), 'worker')"
    loaded = {name for name in loaded_after(looked_up) if name.startswith("mysqlq.cli.")}
    assert loaded == {"mysqlq.cli.run"}


def test_the_table_of_command_modules_is_what_the_modules_register() -> None:
    from mysqlq.cli import COMMAND_MODULES
    from mysqlq.cli.reference import main

    registered = {name: getattr(command.callback, "__module__", "") for name, command in main.commands.items()}
    assert registered == {name: f"mysqlq.cli.{module}" for name, module in COMMAND_MODULES.items()}


def test_the_worker_class_is_still_reachable_from_the_package() -> None:
    loaded = loaded_after("from mysqlq.worker import Worker\nassert Worker.__module__ == 'mysqlq.worker.loop'")
    assert "mysqlq.worker.loop" in loaded
