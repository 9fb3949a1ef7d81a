"""The evidence benchmark and what is built from its records, recomputed without a model:

- ``evidence_test.json``, its table CSV and the docs/measurements.md block, ``validity.json``,
  ``evidence_tune.json`` and ``evidence_pilot.json``: ``bench_evidence.report`` on the text-free
  exports ``benchmarks/results/evidence/{test,tune}/`` (what ``--report`` writes);
- ``evidence_gpu_vs_cpu.json``: ``bench_evidence.compare_exports`` on ``evidence/gpu_check/`` and
  the test exports;
- ``used_rule.json``: ``bench_used.run`` on the same exports;
- ``tracing.json``: ``bench_tracing.report`` on ``benchmarks/results/tracing/``;
- ``contextcite.json``, ``contextcite_cc_batch8.json``: each question row's speedups and agreements
  from its own seconds and attribution lists, and the summary over the rows
  (``benchmarks/contextcite_summary.py``).

The evidence and tracing rebuilds read the data sets in ``../shared/data`` (the test split's size,
which passage of a tracing case is the original and which the copy); no figure is read from them.
Skipped as provenance: each file's ``machine``, the test split's ``sessions`` log (each export's
``sessions.jsonl``), tracing's stage-2 ``wall_seconds``, the pilot run's ``wall_seconds`` and
``resumed``, and ContextCite's run settings (``workload``, versions, threads, load average).
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from functools import lru_cache
from typing import Any

from benchmarks.verify import REPO, RESULTS, Figure, check, compare_block, compare_json, compare_text, read_json

#: ``bench_tracing.py --report --candidates 700 --usable 150`` (its docstring): the records per set
#: stage 1 was run on, and stage 2's target
TRACING_CANDIDATES = 700
TRACING_USABLE = 150


def _plain(obj: Any) -> Any:
    """As the results file holds it (tuples become lists, NaN stays NaN)."""
    return json.loads(json.dumps(obj))


def _need_data() -> None:
    from benchmarks.machine import SHARED_DATA

    if not SHARED_DATA.is_dir():
        raise FileNotFoundError(f"{SHARED_DATA} is missing: the evidence and tracing rebuilds need the data sets "
                                "(the test split's size; the tracing cases' original and copy)")


@lru_cache(maxsize=None)
def _report(phase: str) -> dict[str, Any]:
    from benchmarks.bench_evidence import report

    _need_data()
    return _plain(report(phase))


def _pruned(fresh: Any, published: Any) -> Any:
    """``fresh`` cut to the keys ``published`` has (a result written by older code that reported
    less: every figure it has is compared, what the code added since is not)."""
    if isinstance(published, dict) and isinstance(fresh, dict):
        return {k: _pruned(fresh[k], v) for k, v in published.items() if k in fresh}
    if isinstance(published, list) and isinstance(fresh, list):
        return [_pruned(f, p) for f, p in zip(fresh, published)] + fresh[len(published):]
    return fresh


@check("evidence_test", covers=("evidence_test.json", "evidence_test_table.csv"), slow=True)
def evidence_test() -> Iterator[Figure]:
    from benchmarks.bench_evidence import README_BEGIN, README_END, readme_block, table_csv

    published = read_json("evidence_test.json")
    fresh = _report("test")
    yield from compare_json("evidence_test.json", published, fresh, skip=("machine", "sessions"))
    with (RESULTS / "evidence_test_table.csv").open(newline="", encoding="utf-8") as fh:
        yield from compare_text("evidence_test_table.csv", fh.read(), table_csv(fresh))
    # the block names where the report was built (the results file's machine): provenance, kept
    yield from compare_block("docs/measurements.md#evidence-test", REPO / "docs" / "measurements.md", README_BEGIN,
                             README_END, readme_block({**fresh, "machine": published.get("machine")}))


@check("evidence_validity", covers=("validity.json",))
def evidence_validity() -> Iterator[Figure]:
    from benchmarks.bench_evidence import validity_result

    yield from compare_json("validity.json", read_json("validity.json"), _plain(validity_result(_report("test"))),
                            skip=("machine",))


@check("evidence_tune", covers=("evidence_tune.json",))
def evidence_tune() -> Iterator[Figure]:
    yield from compare_json("evidence_tune.json", read_json("evidence_tune.json"), _report("tune"), skip=("machine",))


@check("evidence_pilot", covers=("evidence_pilot.json",))
def evidence_pilot() -> Iterator[Figure]:
    """The pilot (tune split, first 20 questions per set: the tune exports hold exactly those) was
    written by a run that resumed every question from the exports, with the code of 204c508: no
    secondary measure, no goals. Each of its figures against today's report of the same exports."""
    published = read_json("evidence_pilot.json")
    fresh = {**_report("tune"), "limit": published["limit"]}
    run_only = [f"variants.{v}.sets.{s}.{k}" for v, got in published["variants"].items() for s in got["sets"]
                for k in ("wall_seconds", "resumed")]
    yield from compare_json("evidence_pilot.json", published, _pruned(fresh, published), skip=("machine", *run_only))


@check("evidence_gpu_vs_cpu", covers=("evidence_gpu_vs_cpu.json",))
def evidence_gpu_vs_cpu() -> Iterator[Figure]:
    from benchmarks.bench_evidence import compare_exports

    published = read_json("evidence_gpu_vs_cpu.json")
    fresh = [compare_exports(REPO / c["a"], REPO / c["b"]) | {"a": c["a"], "b": c["b"]}
             for c in published["comparisons"]]
    yield from compare_json("evidence_gpu_vs_cpu.json", published, {"comparisons": _plain(fresh)},
                            skip=("what", "command", "gpu", "machine"))


@check("used_rule", covers=("used_rule.json",))
def used_rule() -> Iterator[Figure]:
    from benchmarks.bench_used import run

    yield from compare_json("used_rule.json", read_json("used_rule.json"), _plain(run()), skip=("machine",))


@check("tracing", covers=("tracing.json",))
def tracing() -> Iterator[Figure]:
    from benchmarks.bench_tracing import report

    _need_data()
    fresh = _plain(report(TRACING_CANDIDATES, TRACING_USABLE))
    yield from compare_json("tracing.json", read_json("tracing.json"), fresh, skip=("machine", "stage2.wall_seconds"))


CONTEXTCITE_RUN = ("machine", "workload", "context_cite_version", "torch_threads", "load_1min_after")


@check("contextcite", covers=("contextcite.json", "contextcite_cc_batch8.json"))
def contextcite() -> Iterator[Figure]:
    from benchmarks.contextcite_summary import rederive, rederive_v1, summarize, summarize_v1

    published = read_json("contextcite.json")
    rows = [rederive(r) for r in published["questions"]]
    reference = published["workload"]["cc_dtypes"].split(",")[0]  # the run's setting: ContextCite as shipped
    yield from compare_json("contextcite.json", published, _plain({"questions": rows, "summary": summarize(rows, reference)}),
                            skip=CONTEXTCITE_RUN)
    published = read_json("contextcite_cc_batch8.json")
    rows = [rederive_v1(r) for r in published["questions"]]
    yield from compare_json("contextcite_cc_batch8.json", published,
                            _plain({"questions": rows, "summary": summarize_v1(rows)}), skip=CONTEXTCITE_RUN)
