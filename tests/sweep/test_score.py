"""The documented score: per-question weighted means, confidence, ties by cost then latency."""

import pytest

from ragray.adapters.sweep.score import rank_trials, score_trial


def test_score_is_overall_times_confidence():
    weights = {"f1": 2.0, "mrr": 1.0}
    qs = [{"f1": 1.0, "mrr": 0.0}, {"f1": 0.5, "mrr": None}, {"f1": None, "mrr": None}]
    s = score_trial(qs, weights)
    # q1: (2*1 + 1*0)/3 = 2/3; q2: f1 only = 0.5; q3: nothing measured -> not scored
    assert s["overall"] == pytest.approx((2 / 3 + 0.5) / 2)
    assert s["coverage"] == {"f1": pytest.approx(2 / 3), "mrr": pytest.approx(1 / 3)}
    assert s["confidence"] == pytest.approx((2 * 2 / 3 + 1 / 3) / 3)
    assert s["score"] == pytest.approx(s["overall"] * s["confidence"])
    assert s["n_scored_questions"] == 2 and s["overall_low"] < s["overall"] < s["overall_high"]


def test_unmeasured_metrics_lower_confidence_not_the_mean():
    full = score_trial([{"f1": 0.8, "mrr": 0.8}] * 4, {"f1": 1, "mrr": 1})
    partial = score_trial([{"f1": 0.8, "mrr": None}] * 4, {"f1": 1, "mrr": 1})
    assert full["overall"] == pytest.approx(partial["overall"]) == pytest.approx(0.8)
    assert full["confidence"] == 1.0 and partial["confidence"] == 0.5
    assert partial["score"] < full["score"]


def test_ranking_breaks_ties_by_cost_then_latency_and_puts_failures_last():
    rows = [
        {"trial_id": "slow", "status": "done", "score": 0.5, "tokens_per_question": 10, "latency_s": 9.0},
        {"trial_id": "failed", "status": "failed", "score": None},
        {"trial_id": "best", "status": "done", "score": 0.7, "tokens_per_question": 99, "latency_s": 9.0},
        {"trial_id": "fast", "status": "done", "score": 0.5, "tokens_per_question": 10, "latency_s": 1.0},
        {"trial_id": "cheap", "status": "done", "score": 0.5 + 1e-12, "tokens_per_question": 5, "latency_s": 5.0},
        {"trial_id": "priced", "status": "done", "score": 0.5, "cost_usd_per_question": 0.001,
         "tokens_per_question": 1, "latency_s": 0.1},
    ]
    ranked = rank_trials(rows)
    assert [r["trial_id"] for r in ranked] == ["best", "priced", "cheap", "fast", "slow", "failed"]
    assert [r["rank"] for r in ranked] == [1, 2, 3, 4, 5, None]
