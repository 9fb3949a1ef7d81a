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
