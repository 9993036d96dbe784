"""``main`` with every command loaded, for tools that read a group's ``commands`` itself (the
reference page's generator): the ``mysqlq`` command imports a command's module only when it runs it."""

from __future__ import annotations

import importlib

from mysqlq.cli import COMMAND_MODULES, main

for _module in sorted(set(COMMAND_MODULES.values())):
    importlib.import_module(f"mysqlq.cli.{_module}")

__all__ = ["main"]
