"""The README stays a few screens that link to docs/ for the rest; every link it has resolves."""

import re
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]


#: internal bookkeeping a user cannot know: issue numbers, sections of the spec, the projects ragray
#: grew from ("the seed"), goal letters; ``--seed`` and "seeded" (a random seed) are ordinary words
INTERNAL = re.compile(r"(?i:\bissue \d|\bthe seed\b|\bseed's|\bseeds'|\bgoals? \()|\bSPEC\b|§")


def test_the_internal_names_pattern_catches_them_and_spares_the_random_seed():
    for bad in ("before issue 28", "SPEC §5", "the seed's ρ rule", "The seed's loop", "the seeds' RAG versions",
                "the auditor seed's data/ layout", "goal (a)'s bar", "goals (a) and (c)", "Evidence (Issue 26)"):
        assert INTERNAL.search(bad), bad
    for fine in ("--seed 3", "seeded by the question id", "a sweep spec", "the spec's axes", "mask_seed: 0",
                 "with seed 26", "the goal: pooled LDS >= 0.85"):
        assert not INTERNAL.search(fine), fine


def test_readme_is_short_and_no_page_names_internal_bookkeeping():
    readme = (REPO / "README.md").read_text(encoding="utf-8")
    assert len(readme.splitlines()) <= 300
    found = [f"{page.name}:{n}: {line.strip()}"
             for page in [REPO / "README.md", *sorted((REPO / "docs").glob("*.md"))]
             for n, line in enumerate(page.read_text(encoding="utf-8").splitlines(), 1) if INTERNAL.search(line)]
    assert not found, "names a user cannot know:\n" + "\n".join(found)


def test_every_relative_link_of_the_readme_and_docs_resolves():
    for page in [REPO / "README.md", *sorted((REPO / "docs").glob("*.md"))]:
        for target in re.findall(r"\]\(([^)#]+)\)", page.read_text(encoding="utf-8")):
            if not target.startswith(("http://", "https://")):
                assert (page.parent / target).exists(), f"{page.name} links to {target}, which does not exist"


def test_the_published_evidence_block_lives_in_the_measurements_page():
    import inspect

    from benchmarks import bench_evidence

    page = REPO / "docs" / "measurements.md"
    assert inspect.signature(bench_evidence.publish).parameters["readme"].default == page
    text = page.read_text(encoding="utf-8")
    assert text.count(bench_evidence.README_BEGIN) == 1 and text.count(bench_evidence.README_END) == 1


def test_no_shipped_config_or_page_names_the_shared_folder():
    """Examples name datasets (``squad``) or paths a user's clone has, never the dev machines'
    ``../shared`` folder beside the checkout (benchmarks and tests may read it)."""
    import shutil
    import subprocess

    import pytest

    if shutil.which("git") is None or not (REPO / ".git").exists():
        pytest.skip("not a git checkout")
    found = subprocess.run(["git", "grep", "-n", r"\.\./shared", "--", "README.md", "configs", "docs"],
                           cwd=REPO, capture_output=True, text=True)
    assert found.returncode == 1 and found.stdout == "", found.stdout  # 1: no match


def test_ci_points_the_dataset_names_at_the_shared_folder():
    lines = (REPO / ".ci" / "run").read_text(encoding="utf-8").splitlines()
    assert 'RAGRAY_DATA_DIR="$(cd .. && pwd)/shared/data"' in lines and "export RAGRAY_DATA_DIR" in lines
    first_test = next(i for i, line in enumerate(lines) if "pytest" in line)
    assert lines.index("export RAGRAY_DATA_DIR") < first_test


def test_the_readmes_suite_times_are_the_totals_of_the_logs_they_link():
    """Each "whole suite" or "fast subset" row of the README with a log is that JUnit log's total:
    seconds, minutes, test cases."""
    import gzip
    import xml.etree.ElementTree as ET

    rows = re.findall(r"^\| (?:whole suite|fast subset) \|.*?\| ([\d.]+) min \(([\d,.]+) s\), ([\d,]+) test cases at (\w+).*?\]\(([^)]+\.xml\.gz)\)",
                      (REPO / "README.md").read_text(encoding="utf-8"), flags=re.M)
    assert len(rows) >= 4, rows
    for minutes, seconds, tests, commit, log in rows:
        assert commit in log, f"{log} is not the log of {commit}"
        root = ET.parse(gzip.open(REPO / log)).getroot()
        suite = root if root.tag == "testsuite" else root.find("testsuite")
        total = float(suite.get("time"))
        assert float(seconds.replace(",", "")) == round(total, 1), (log, seconds, total)
        assert float(minutes) == round(total / 60, 1), (log, minutes, total / 60)
        assert int(tests.replace(",", "")) == int(suite.get("tests")) == len(list(root.iter("testcase"))), log
