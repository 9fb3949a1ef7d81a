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
