"""What the README and the guides promise a new user: one page of README whose links lead somewhere,
the systemd steps in the order they work, honest figures, and the exit code of usage errors."""

from __future__ import annotations

import re
import subprocess

from ..conftest import MYSQLQ, REPO

README = (REPO / "README.md").read_text(encoding="utf-8")
DOCS = REPO / "docs"


def page(name: str) -> str:
    return (DOCS / name).read_text(encoding="utf-8")


def section(text: str, title: str) -> str:
    start = text.index(f"\n## {title}\n")
    end = text.find("\n## ", start + 1)
    return text[start:end if end != -1 else len(text)]


def test_the_readme_is_one_page_with_the_two_commands() -> None:
    assert len(README.splitlines()) <= 250
    assert "make demo" in README and "make test" in README
    for heading in ("## Two commands", "## Quickstart", "## Headline figures"):
        assert heading in README


def test_every_link_of_the_readme_and_the_guides_leads_to_a_file_here() -> None:
    sources = [REPO / "README.md", *sorted(DOCS.rglob("*.md"))]
    for source in sources:
        for target in re.findall(r"\]\(([^)#\s]+)(?:#[^)]*)?\)", source.read_text(encoding="utf-8")):
            if target.startswith(("http://", "https://", "mailto:")):
                continue
            assert (source.parent / target).exists(), f"{source.name} links to {target}, which does not exist"


def test_no_word_from_outside_the_project() -> None:
    for source in [REPO / "README.md", *DOCS.rglob("*.md")]:
        text = source.read_text(encoding="utf-8")
        for word in ("BENCH.md", "seed 0", "../shared"):
            assert word not in text, f"{source.name} mentions {word!r}"


def test_systemd_steps_migrate_with_the_env_file_before_starting_workers() -> None:
    steps = section(page("deployment.md"), "Configure and run")
    migrate = steps.index("--env-file /etc/mysqlq/mysqlq.env migrate")
    assert steps.index("sudoedit /etc/mysqlq/mysqlq.env") < migrate < steps.index("systemctl start worker@1")
    assert "--create-database" in steps


def performance_rows() -> list[list[str]]:
    text = page("performance.md")
    table = text[text.index("| workload | figure | mysqlq |"):]
    table = table[: table.index("\n\n")]
    return [[cell.strip() for cell in line.strip("|").split("|")] for line in table.splitlines()[2:]]


def numbers(text: str) -> list[float]:
    return [float(n.replace(",", "")) for n in re.findall(r"\d[\d,]*\.?\d*", text.replace("*", ""))]


def test_w4_rows_quote_ranges_across_runs() -> None:
    w4 = [row for row in performance_rows() if row[0].startswith("W4")]
    assert len(w4) == 2
    for row in w4:
        assert "3 runs" in row[0]
        low, high = numbers(row[4])[:2]  # the ratio: a range across runs, not one run's figure
        assert low < high


def test_no_ratio_row_claims_a_target_its_lowest_figure_misses() -> None:
    for row in performance_rows():
        workload, ratio, target = row[0], row[4], row[5]
        found = re.match(r"≥ ([\d.]+): met", target)
        if found and ratio:
            assert min(numbers(ratio)) >= float(found.group(1)), workload


def test_usage_errors_exit_2_as_the_cli_reference_says() -> None:
    assert "three\nlines (usage, a hint, the error) and exit 2" in page("reference/cli.md")
    result = subprocess.run([MYSQLQ, "stats", "--no-such-option"], capture_output=True, text=True, check=False)
    assert result.returncode == 2
    lines = [line for line in result.stderr.splitlines() if line.strip()]
    assert lines[0].startswith("Usage: mysqlq stats") and lines[-1].startswith("Error: No such option")
    assert len(lines) == 3
