"""What the README promises a new user: the systemd steps in the order they work, honest figures,
and the exit code of usage errors."""

from __future__ import annotations

import re
import subprocess

from .conftest import MYSQLQ, REPO

README = (REPO / "README.md").read_text(encoding="utf-8")


def section(title: str) -> str:
    start = README.index(f"\n### {title}\n")
    return README[start:README.index("\n### ", start + 1)]


def test_systemd_steps_migrate_with_the_env_file_before_starting_workers() -> None:
    steps = section("Configure and run")
    migrate = steps.index("--env-file /etc/mysqlq/mysqlq.env migrate")
    assert steps.index("sudoedit /etc/mysqlq/mysqlq.env") < migrate < steps.index("systemctl start worker@1")
    assert "--create-database" in steps


def performance_rows() -> list[list[str]]:
    table = README[README.index("| workload | figure |"):]
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


def test_usage_errors_exit_2_as_the_readme_says() -> None:
    assert "three\nlines (usage, a hint, the error) and exit 2" in README
    result = subprocess.run([MYSQLQ, "stats", "--no-such-option"], capture_output=True, text=True, check=False)
    assert result.returncode == 2
    lines = [line for line in result.stderr.splitlines() if line.strip()]
    assert lines[0].startswith("Usage: mysqlq stats") and lines[-1].startswith("Error: No such option")
    assert len(lines) == 3
