"""Every SQL statement mysqlq runs, loaded by name from the ``.sql`` files beside this module."""

from __future__ import annotations

import re
from functools import cache
from pathlib import Path

# Read as files beside this module (a package installed from a wheel is unpacked on disk):
# importlib.resources would cost every process 8 ms of imports (tempfile, shutil, the compressors).
HERE = Path(__file__).parent
_HEADER = re.compile(r"^-- name: (\w+)\s*$", re.MULTILINE)
# "{@name}" in a statement stands for the text of the statement (a fragment) called name.
_INCLUDE = re.compile(r"\{@(\w+)\}")


@cache
def queries() -> dict[str, str]:
    """Map of query name to statement, from every ``*.sql`` file here (``-- name: x`` headers; the
    schema files, printed for reading, have none and add nothing), each ``{@name}`` in one replaced
    by the fragment of that name (which may include others)."""
    found: dict[str, str] = {}
    for entry in sorted(HERE.iterdir(), key=lambda e: e.name):
        if not entry.name.endswith(".sql"):
            continue
        chunks = _HEADER.split(entry.read_text(encoding="utf-8"))
        for name, body in zip(chunks[1::2], chunks[2::2], strict=True):
            lines = [line for line in body.splitlines() if line.strip() and not line.lstrip().startswith("--")]
            if name in found:
                raise RuntimeError(f"query {name!r} is defined twice ({entry.name})")
            found[name] = "\n".join(lines).rstrip().rstrip(";")
    return {name: _expand(found, text) for name, text in found.items()}


def _expand(found: dict[str, str], text: str) -> str:
    """``text`` with each ``{@name}`` replaced by that fragment, itself expanded."""
    return _INCLUDE.sub(lambda m: _expand(found, found[m.group(1)]), text)


def query(name: str) -> str:
    """The statement called ``name``; a KeyError names the missing query."""
    return queries()[name]


def migrations() -> list[tuple[int, list[str]]]:
    """(version, statements) for each numbered file in ``migrations/``, in order."""
    folder = HERE / "migrations"
    found = []
    for entry in folder.iterdir():
        match = re.fullmatch(r"(\d{4})_\w+\.sql", entry.name)
        if match:
            text = entry.read_text(encoding="utf-8")
            statements = [s.strip() for s in re.split(r"^;\s*$", text, flags=re.MULTILINE) if _has_sql(s)]
            found.append((int(match.group(1)), statements))
    return sorted(found)


def _has_sql(chunk: str) -> bool:
    return any(line.strip() and not line.strip().startswith("--") for line in chunk.splitlines())
