"""A trial's running step metrics (what Tune's scheduler and TensorBoard see), without Ray."""

import json

import pytest

from ragray.config import load_config
from ragray.pipeline import run_influence
from ragray.adapters.sweep.score import score_trial
from ragray.adapters.sweep.trial import question_metrics, run_trial, running_metrics

ROWS = [{"id": f"q{i}", "question": f"Which boat {i}?", "answers": ["tern"], "gold_passage_ids": [f"q{i}-g"],
         "passages": [{"id": f"q{i}-g", "text": "ANSWER=tern" if i % 2 else "ANSWER=gull"},
                      {"id": f"q{i}-d", "text": f"Gulls {i}."}]} for i in range(5)]
WEIGHTS = {"f1": 1.0, "em": 1.0, "mrr": 1.0}


@pytest.fixture()
def config(tmp_path):
    data = tmp_path / "qa.jsonl"
    data.write_text("".join(json.dumps(r) + "\n" for r in ROWS), encoding="utf-8")
    return load_config(None, [f"data.path={data}", "generation.backend=scripted", "metrics.embedding=false",
                              "retrieval.retriever=given", "retrieval.top_k=2"])


def test_steps_every_n_questions_are_the_leaderboards_numbers_so_far(config, tmp_path):
    steps = []
    result = run_trial(config, tmp_path / "trial", every=2, on_step=steps.append, weights=WEIGHTS)
    assert [s["questions"] for s in steps] == [2.0, 4.0]
    per_q = result["questions"]
    for s in steps:
        so_far = per_q[: int(s["questions"])]
        expected = score_trial(so_far, WEIGHTS)
        assert s["score"] == pytest.approx(expected["score"]) and s["overall_low"] == pytest.approx(expected["overall_low"])
        assert s["f1"] == pytest.approx(sum(q["f1"] for q in so_far) / len(so_far))
    assert running_metrics(per_q, WEIGHTS)["questions"] == 5.0


def test_a_resumed_trial_counts_its_finished_questions_first(config, tmp_path):
    out = tmp_path / "trial"
    run_influence(config, out, progress=False)  # all five finished, as before an interruption
    seen = []
    run_influence(config, out, resume=True, progress=False, on_record=lambda r: seen.append(r.question.question_id))
    assert seen == [r["id"] for r in ROWS]  # the resumed records, in dataset order
    steps = []
    run_trial(config, out, every=5, on_step=steps.append, weights=WEIGHTS)
    assert [s["questions"] for s in steps] == [5.0]


def test_nothing_scored_yet_leaves_the_score_out():
    metrics = running_metrics(question_metrics([]), WEIGHTS)
    assert "score" not in metrics and "overall" not in metrics  # never a 0 the scheduler would read as worst
