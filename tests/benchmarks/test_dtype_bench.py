"""benchmarks/bench_dtype.py's per-question comparison: ties and all-zero influence are not
counted as disagreements of the two dtypes' most influential passage."""

from __future__ import annotations

import math
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

from benchmarks.bench_dtype import compare_question, summarize  # noqa: E402

Q = {"question_id": "q", "baseline_answer": "a", "state": "measured", "misaligned": False, "seconds": 1.0}


def test_a_tie_at_the_top_is_the_same_top_passage_whatever_order_breaks_it():
    tied = compare_question(Q, Q, {"p1": 0.5, "p2": 0.5, "p3": 0.0}, {"p2": 0.5, "p1": 0.5, "p3": 0.0})
    assert tied["same_top1"] and tied["influence_spearman"] == 1.0 and tied["max_abs_diff"] == 0.0
    split = compare_question(Q, Q, {"p1": 0.5, "p2": 0.5, "p3": 0.0}, {"p1": 0.5, "p2": 0.4, "p3": 0.0})
    assert not split["same_top1"]


def test_no_influence_in_one_dtype_is_a_disagreement_and_rho_is_left_undefined():
    row = compare_question(Q, {**Q, "state": "context_ignored", "misaligned": None},
                           {"p1": 0.0, "p2": 0.0}, {"p1": 0.3, "p2": 0.0})
    assert not row["same_top1"] and not row["same_state"] and row["influence_spearman"] is None
    assert math.isclose(row["max_abs_diff"], 0.3)
    s = summarize([row])
    assert s["rho_undefined"] == 1 and s["rho_mean"] is None and s["same_top1"] == 0


def test_the_used_marks_are_compared_passage_by_passage():
    inf = {"p1": 0.6, "p2": 0.1, "p3": 0.0}
    same = compare_question(Q, Q, inf, inf, {"p1": True, "p2": False, "p3": False}, {"p1": True, "p2": False, "p3": False})
    moved = compare_question(Q, Q, inf, inf, {"p1": True, "p2": False, "p3": False}, {"p1": True, "p2": True, "p3": None})
    assert same["same_used"] and same["used_marks_differ"] == 0 and same["passages_compared"] == 3
    assert not moved["same_used"] and moved["used_marks_differ"] == 1 and moved["used"] == [["p1"], ["p1", "p2"]]
    s = summarize([same, moved])
    assert (s["same_used"], s["used_marks_differ"], s["passages_compared"], s["same_answer_and_used"]) == (1, 1, 6, 1)
