"""What importing mysqlq brings into a process: an application that only enqueues, and CLI commands
other than ``worker``, load neither the worker, the leader's modules nor ``importlib.metadata``
(read only when a handler is looked up); and structlog only once the CLI configures logging."""

from __future__ import annotations

import json
import subprocess
import sys

HEAVY = ("mysqlq.worker.loop", "mysqlq.leader.maintainer", "importlib.metadata", "structlog")


def loaded_after(statement: str) -> set[str]:
    code = f"import json, sys\n{statement}\nprint(json.dumps(sorted(sys.modules)))"
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60, check=True)
    return set(json.loads(result.stdout.splitlines()[-1]))


def test_import_mysqlq_loads_no_worker_and_no_entry_points() -> None:
    loaded = loaded_after("import mysqlq\nfrom mysqlq import JobContext, Producer, handler")
    assert "mysqlq.producer.enqueue" in loaded  # the check sees what was imported
    assert not loaded & set(HEAVY), sorted(loaded & set(HEAVY))


def test_structlog_comes_only_with_the_clis_logging() -> None:
    as_library = "import mysqlq\nfrom mysqlq.core import logs\nlogs.get_logger('mysqlq.x').warning('x.y', n=1)"
    assert "structlog" not in loaded_after(as_library)  # a record of the logging module, without it
    assert "structlog" in loaded_after(f"{as_library}\nlogs.configure('console')")


def test_the_cli_loads_the_worker_only_for_the_worker_command() -> None:
    loaded = loaded_after("import mysqlq.cli")
    assert "mysqlq.cli.produce" in loaded
    assert "mysqlq.worker.loop" not in loaded and "importlib.metadata" not in loaded


def test_the_worker_class_is_still_reachable_from_the_package() -> None:
    loaded = loaded_after("from mysqlq.worker import Worker\nassert Worker.__module__ == 'mysqlq.worker.loop'")
    assert "mysqlq.worker.loop" in loaded
