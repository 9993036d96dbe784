"""``manage.py mysqlq_worker [OPTIONS]``: ``mysqlq worker`` for this project (its settings module and
its directory already set), with the same options."""

from __future__ import annotations

import os
import shutil
import sys
from pathlib import Path
from typing import Any

from django.core.management.base import BaseCommand, CommandError, CommandParser


class Command(BaseCommand):  # type: ignore[misc]
    help = "Run a mysqlq worker for this project's tasks (the options of `mysqlq worker --help`)."

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("worker_args", nargs="*", help="options for `mysqlq worker`, after --")

    def run_from_argv(self, argv: list[str]) -> None:
        # Everything after the command name goes to `mysqlq worker` as it is.
        self.execute_worker(argv[2:])

    def handle(self, *args: Any, **options: Any) -> None:
        self.execute_worker(list(options.get("worker_args") or []))

    def execute_worker(self, args: list[str]) -> None:
        beside = Path(sys.executable).with_name("mysqlq")
        program = str(beside) if beside.exists() else shutil.which("mysqlq")
        if program is None:
            raise CommandError("the mysqlq command is not installed in this environment")
        project = os.path.abspath(sys.path[0] or os.getcwd())  # where manage.py is: the project imports from there
        os.environ["PYTHONPATH"] = os.pathsep.join(filter(None, [project, os.environ.get("PYTHONPATH")]))
        os.execv(program, [program, "worker", *args])
