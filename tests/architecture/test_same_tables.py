"""scripts/same_tables.py, the before/after check of refactorings, finds what it must."""

from __future__ import annotations

import importlib.util
import json
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

SCRIPT = Path(__file__).resolve().parents[2] / "scripts" / "same_tables.py"


@pytest.fixture()
def same_tables():
    spec = importlib.util.spec_from_file_location("same_tables", SCRIPT)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def _run(root: Path, rows: dict, summary: dict) -> Path:
    (root / "run").mkdir(parents=True)
    pq.write_table(pa.table(rows), root / "run" / "questions.parquet")
    (root / "run" / "summary.json").write_text(json.dumps(summary))
    return root


def test_equal_runs_pass_and_timings_and_paths_are_ignored(tmp_path, same_tables):
    a = _run(tmp_path / "a", {"question_id": ["q1"], "rho": [0.5], "seconds": [1.0]},
             {"n": 1, "wall_seconds": 3.0, "report": str(tmp_path / "a" / "run")})
    b = _run(tmp_path / "b", {"question_id": ["q1"], "rho": [0.5], "seconds": [9.0]},
             {"n": 1, "wall_seconds": 7.0, "report": str(tmp_path / "b" / "run")})
    assert same_tables.compare(a, b) == {}


def test_a_changed_value_type_or_column_is_reported(tmp_path, same_tables):
    a = _run(tmp_path / "a", {"question_id": ["q1", "q2"], "rho": [0.5, float("nan")]}, {"n": 2})
    b = _run(tmp_path / "b", {"question_id": ["q1", "q2"], "rho": [0.5000001, float("nan")]}, {"n": 3})
    problems = same_tables.compare(a, b)
    assert "rho: 1 rows differ, first row 0" in problems["run/questions.parquet"][0]
    assert problems["run/summary.json"] == ["n: 2 vs 3"]
    c = _run(tmp_path / "c", {"question_id": ["q1", "q2"], "rho": [0.5, float("nan")], "new": [1, 2]},
             {"n": 2, "x": 1})
    assert "columns differ" in same_tables.compare(a, c)["run/questions.parquet"][0]
    assert same_tables.compare(a, c, allow_added=True) == {}  # added at the end: listed, allowed
    assert "new" in same_tables.ADDED


def test_nan_and_null_are_different(tmp_path, same_tables):
    a = _run(tmp_path / "a", {"rho": [float("nan")]}, {})
    b = _run(tmp_path / "b", {"rho": pa.array([None], pa.float64())}, {})
    assert same_tables.compare(a, b)["run/questions.parquet"] == ["rho: 1 rows differ, first row 0: nan vs None"]


def test_float_noise_within_the_tolerance_is_listed_apart_and_new_tables_are_allowed(tmp_path, same_tables):
    a = _run(tmp_path / "a", {"sim": [0.3919779062271118, 0.5], "rank": [1, 2]}, {"sim": 0.30685669086995015})
    b = _run(tmp_path / "b", {"sim": [0.3919779658317566, 0.5], "rank": [1, 2]}, {"sim": 0.30685664853326855})
    pq.write_table(pa.table({"x": [1]}), b / "run" / "checks.parquet")
    strict = same_tables.compare(a, b)
    assert set(strict) == {"run/questions.parquet", "run/summary.json", "run/checks.parquet"}
    assert same_tables.compare(a, b, allow_added=True, tolerance=1e-6) == {}
    assert same_tables.NEW_FILES == ["run/checks.parquet"]
    assert {f for cells in same_tables.NEAR.values() for f, _, _ in cells} == {"run/questions.parquet",
                                                                              "run/summary.json"}
    c = _run(tmp_path / "c", {"sim": [0.3919, 0.5], "rank": [1, 3]}, {"sim": 0.30685669086995015})
    problems = same_tables.compare(a, c, tolerance=1e-6)  # beyond it, and integers, still differ
    assert "sim: 1 rows differ" in problems["run/questions.parquet"][0]
    assert "rank: 1 rows differ" in problems["run/questions.parquet"][1]


def test_a_declared_rename_is_equal_and_listed_and_nothing_else_is(tmp_path, same_tables):
    a = _run(tmp_path / "a", {"mode": ["generate", "generate", "jsd"]}, {"influence_mode": "generate"})
    b = _run(tmp_path / "b", {"mode": ["loo", "loo", "jsd"]}, {"influence_mode": "loo"})
    assert set(same_tables.compare(a, b)) == {"run/questions.parquet", "run/summary.json"}
    same_tables.RENAMES["generate"] = "loo"
    assert same_tables.compare(a, b) == {}
    assert same_tables.RENAMED == {("generate", "loo", "run/questions.parquet:mode"): 2,
                                   ("generate", "loo", "run/summary.json:influence_mode"): 1}
    c = _run(tmp_path / "c", {"mode": ["loo", "jsd", "jsd"]}, {"influence_mode": "jsd"})  # not the rename's value
    problems = same_tables.compare(a, c)
    assert problems["run/questions.parquet"] == ["mode: 1 rows differ, first row 1: 'generate' vs 'jsd'"]
    assert problems["run/summary.json"] == ["influence_mode: 'generate' vs 'jsd'"]


def test_a_renamed_summary_key_takes_the_old_ones_place_and_the_kept_old_key_is_added(tmp_path, same_tables):
    before = {"agreement": {"loo_vs_logprob": 0.6, "loo_vs_surrogate": 0.5}, "counts": {"generate": 4}}
    now = {"agreement": {"loo_vs_logprob_drop": 0.6, "loo_vs_surrogate": 0.5, "loo_vs_logprob": 0.6},
           "counts": {"loo": 4}}
    a, b = _run(tmp_path / "a", {"x": [1]}, before), _run(tmp_path / "b", {"x": [1]}, now)
    same_tables.RENAMES.update({"loo_vs_logprob": "loo_vs_logprob_drop", "generate": "loo"})
    assert "run/summary.json" in same_tables.compare(a, b)  # the kept old key is an added key
    assert same_tables.compare(a, b, allow_added=True) == {}
    assert list(same_tables.ADDED_KEYS) == ["agreement.loo_vs_logprob"]  # listed, not silent
    moved = {"agreement": {"loo_vs_surrogate": 0.5, "loo_vs_logprob_drop": 0.6}, "counts": {"loo": 4}}
    c = _run(tmp_path / "c", {"x": [1]}, moved)  # the new name elsewhere than the old one's place
    assert "another order" in same_tables.compare(a, c, allow_added=True)["run/summary.json"][0]


def test_work_set_reaches_only_the_commands_that_read_a_config(tmp_path, same_tables):
    named = same_tables.commands(tmp_path, tmp_path / "out", 4, ("influence.min_share=0.05",))
    for name, args in named.items():
        held = args[-2:] == ["--set", "influence.min_share=0.05"]
        assert held == (name in same_tables.CONFIGURED), name
    assert {n for n in named if n not in same_tables.CONFIGURED} == {"audit", "retrieve", "score"}
