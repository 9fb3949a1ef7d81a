"""The README stays a few screens that link to docs/ for the rest; every link it has resolves."""

import re
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]


def test_readme_is_short_and_speaks_to_users():
    text = (REPO / "README.md").read_text(encoding="utf-8")
    assert len(text.splitlines()) <= 150
    # internal bookkeeping users do not know
    assert not re.search(r"issue \d|SPEC|§|the seed|goal \(", text)


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
