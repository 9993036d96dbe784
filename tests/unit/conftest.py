"""Keeps this folder free of the database server: `make test-fast` runs it alone, in seconds."""

from __future__ import annotations

from typing import NoReturn

import pytest


@pytest.fixture(scope="session")
def mariadb() -> NoReturn:
    """Stands in for the server fixture of tests/conftest.py here (and so for ``qdb`` and the rest)."""
    pytest.fail("tests/unit runs without a database server: a test that needs one belongs in tests/", pytrace=False)
