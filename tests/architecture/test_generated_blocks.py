"""Every generated block of README.md and docs/*.md is what its generator writes from the results
file in the repo: a block edited by hand, or left stale after its results changed, fails here."""

import copy
import difflib
import json
import re
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from benchmarks import bench_evidence, bench_stages, lighthouse_example, readme_example, shared_evidence_docs
from ragray.config import limits

REPO = Path(__file__).resolve().parents[2]
MARKER = re.compile(r"<!-- ([\w-]+):begin\b")
EVIDENCE_TEST = REPO / "benchmarks" / "results" / "evidence_test.json"
SHARED_EVIDENCE = REPO / "benchmarks" / "results" / "shared_evidence.json"


def _results(path: Path) -> Callable[[], Any]:
    return lambda: json.loads(path.read_text(encoding="utf-8"))


#: block name -> (begin marker, end marker, the results it is written from, the generator)
GENERATED: dict[str, tuple[str, str, Callable[[], Any], Callable[[Any], str]]] = {
    "evidence-test": (bench_evidence.README_BEGIN, bench_evidence.README_END, _results(EVIDENCE_TEST),
                      bench_evidence.readme_block),
    "shared-evidence": (shared_evidence_docs.DOCS_BEGIN, shared_evidence_docs.DOCS_END, _results(SHARED_EVIDENCE),
                        shared_evidence_docs.docs_block),
    # the stage verdict's measured check (benchmarks/bench_stages.py report --split test)
    "stages": (bench_stages.DOCS_BEGIN, bench_stages.DOCS_END, _results(bench_stages.RESULT), bench_stages.docs_block),
    # from the committed record of every scored context of the worked example
    "lighthouse": (lighthouse_example.BEGIN, lighthouse_example.END, _results(lighthouse_example.RECORD),
                   lighthouse_example.block),
    # rendered by the console code from the kept run's tables
    "readme-example": (readme_example.BEGIN, readme_example.END, lambda: None, lambda _: readme_example.block()),
    # not from a results file: from the caps in the code (scripts/serve_limits_table.py writes it)
    "serve-limits": (limits.DOCS_BEGIN, limits.DOCS_END, lambda: limits.CAPS, limits.limits_table),
}


def _pages() -> dict[Path, str]:
    return {p: p.read_text(encoding="utf-8") for p in [REPO / "README.md", *sorted((REPO / "docs").glob("*.md"))]}


def _committed(name: str) -> str:
    begin, end, _, _ = GENERATED[name]
    holders = [text for text in _pages().values() if begin in text]
    assert len(holders) == 1, f"the {name} block should live in exactly one page, found {len(holders)}"
    return holders[0].split(begin, 1)[1].split(end, 1)[0]


def test_every_generated_block_in_the_docs_has_a_registered_generator():
    found = {name for text in _pages().values() for name in MARKER.findall(text)}
    assert found, "no generated block found: the marker pattern no longer matches the pages"
    assert found <= set(GENERATED), f"blocks without a generator in this test: {sorted(found - set(GENERATED))}"


@pytest.mark.parametrize("name", sorted(GENERATED))
def test_the_committed_block_is_what_its_generator_writes_from_the_results_in_the_repo(name):
    _, _, results, generate = GENERATED[name]
    fresh = f"\n{generate(results())}\n"
    committed = _committed(name)
    diff = "".join(list(difflib.unified_diff(committed.splitlines(True), fresh.splitlines(True),
                                             "committed", "regenerated"))[:40])
    assert committed == fresh, (f"the {name} block is stale or hand-edited; rewrite it from the results "
                                f"(see its begin marker for the command):\n{diff}")


def test_a_changed_result_makes_the_block_differ():
    """The comparison above can fail: one figure moved in the results changes the block."""
    result = copy.deepcopy(_results(EVIDENCE_TEST)())
    cell = result["variants"]["frozen"]["pooled"]["subsets"]["all"]["metrics"]["lds"]
    cell["measures"][cell["best"]]["mean"] += 0.1
    assert f"\n{bench_evidence.readme_block(result)}\n" != _committed("evidence-test")
