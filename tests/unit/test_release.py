"""What a release says of itself agrees: one version (pyproject.toml's, which `mysqlq --version` and the
installed metadata show), the supported Pythons (classifiers, requires-python and the interpreters the
wheel's smoke test looks for), the licence, and the compatibility page in the docs' navigation."""

from __future__ import annotations

import importlib.metadata
import re
import subprocess
import tomllib

from ..conftest import MYSQLQ, REPO

PROJECT = tomllib.loads((REPO / "pyproject.toml").read_text(encoding="utf-8"))["project"]


def test_the_version_is_written_once_and_shown_by_the_cli() -> None:
    version = PROJECT["version"]
    assert re.fullmatch(r"\d+\.\d+\.\d+", version)
    assert importlib.metadata.version("mysqlq") == version  # `make venv` reinstalls when pyproject.toml changes
    shown = subprocess.run([MYSQLQ, "--version"], capture_output=True, text=True, check=True).stdout
    assert shown.strip() == f"mysqlq, version {version}"
    written = [path.relative_to(REPO) for path in (REPO / "mysqlq").rglob("*.py")
               if re.search(rf"['\"]{re.escape(version)}['\"]", path.read_text(encoding="utf-8"))]
    assert written == []


def test_supported_pythons_agree_with_requires_python() -> None:
    prefix = "Programming Language :: Python :: 3."
    minors = sorted(int(c[len(prefix):]) for c in PROJECT["classifiers"] if c.startswith(prefix))
    assert minors == [11, 12, 13]
    assert minors == list(range(minors[0], minors[-1] + 1))
    assert PROJECT["requires-python"] == f">=3.{minors[0]}"


def test_the_licence_is_mit_and_shipped() -> None:
    assert PROJECT["license"] == "MIT" and PROJECT["license-files"] == ["LICENSE"]
    text = (REPO / "LICENSE").read_text(encoding="utf-8")
    assert text.startswith("MIT License\n") and "the mysqlq authors" in text
    assert not [c for c in PROJECT["classifiers"] if c.startswith("License ::")]  # the expression says it


def test_systemd_python_is_a_linux_dependency_and_the_one_writer_of_journal_and_notifications() -> None:
    assert "systemd-python>=235; sys_platform == 'linux'" in PROJECT["dependencies"]
    users = sorted(str(path.relative_to(REPO)) for path in (REPO / "mysqlq").rglob("*.py")
                   if re.search(r"^\s*(from systemd\b|import systemd\b)", path.read_text(encoding="utf-8"), re.M))
    assert users == ["mysqlq/core/journal.py", "mysqlq/core/systemd.py", "mysqlq/core/systemdbinding.py"]
    assert not (REPO / "mysqlq" / "core" / "journalsocket.py").exists()
    by_hand = [str(path.relative_to(REPO)) for path in (REPO / "mysqlq").rglob("*.py")
               if re.search(r"journal/socket|MFD_ALLOW_SEALING|SCM_RIGHTS", path.read_text(encoding="utf-8"))]
    writers = [REPO / "mysqlq" / "core" / name for name in ("systemd.py", "systemdbinding.py", "journal.py")]
    by_hand += [path.name for path in writers
                if re.search(r"^import socket|socket\.socket\(", path.read_text(encoding="utf-8"), re.M)]
    assert by_hand == []  # neither protocol is spoken by hand any more


def test_the_docs_list_the_promise() -> None:
    nav = (REPO / "mkdocs.yml").read_text(encoding="utf-8")
    assert "Versioning and compatibility: versioning.md" in nav and "Installing: installing.md" in nav


def test_the_producer_only_install_names_every_other_dependency() -> None:
    """*Installing*'s ``pip install --no-deps`` line for an image without systemd's binding installs
    what pyproject.toml lists, all but the binding."""
    page = (REPO / "docs" / "installing.md").read_text(encoding="utf-8")
    line = " ".join(page[page.index("pip install --no-deps mysqlq"):].split("```")[0].replace("\\\n", " ").split())
    named = sorted(re.findall(r"'([^']+)'", line))
    wanted = sorted(d for d in PROJECT["dependencies"] if not d.startswith("systemd-python"))
    assert named == wanted
