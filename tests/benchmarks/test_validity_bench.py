"""The validity benchmark's re-analysis: another measure on the same calls, checked on known truth."""

from __future__ import annotations

import pytest

from benchmarks.bench_validity import reanalyze
from ragray.config import load_config
from ragray.metrics.similarity import get_similarity
from ragray.report.rundata import load_run
from ragray.simulate import simulate


def test_reanalysis_with_the_runs_own_measure_reproduces_its_influence(tmp_path):
    base = load_config(None, ["influence.mode=loo"])  # re-analysis re-scores generated answers
    simulate(tmp_path / "sim", n_questions=6, k=5, scenario="random", seed=4, base=base, progress=False)
    data = load_run(tmp_path / "sim")
    config = load_config(tmp_path / "sim" / "config.yaml")
    questions, passages = reanalyze(data, config, get_similarity("rouge_l").many)
    assert [p["influence"] for p in passages] == pytest.approx([p["influence"] for p in data.table("passages")])
    assert [q["misaligned"] for q in questions] == [q["misaligned"] for q in data.table("questions")]
    # a transform that makes every answer the same leaves no influence anywhere
    questions, passages = reanalyze(data, config, get_similarity("rouge_l").many, lambda a: "same answer")
    assert {p["influence"] for p in passages} == {0.0} and {q["state"] for q in questions} == {"context_ignored"}
