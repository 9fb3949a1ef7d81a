"""The validity panel on known truth: perfect, chance and tied measures, CIs and plain-words verdicts."""

import numpy as np
import pytest

from ragray.metrics.validity import PanelColumn, question_scores, validity_panel


def rows(gold, **cols):
    return [{"question_id": "q", "retrieval_rank": i + 1, "is_gold": g, **{c: v[i] for c, v in cols.items()}}
            for i, g in enumerate(gold)]


def test_question_scores_hand_computed():
    r = rows([False, True, False, False], influence=[0.1, 0.9, 0.0, 0.2], answer_similarity=[0.5, 0.4, 0.3, 0.6])
    assert question_scores(r, PanelColumn("influence", "", "influence")) == (1.0, 1.0)
    assert question_scores(r, PanelColumn("retrieval_rank", "", "retrieval_rank", True)) == (0.0, pytest.approx(2 / 3))
    assert question_scores(r, PanelColumn("answer_similarity", "", "answer_similarity", True)) == (0.0, pytest.approx(1 / 3))
    assert question_scores(r, PanelColumn("random", "", "", True)) == (0.25, 0.5)
    # a tie at the top shares recovery; tied gold/non-gold pairs count 1/2 in the AUC
    tied = rows([True, False, False], influence=[0.0, 0.0, 0.0])
    assert question_scores(tied, PanelColumn("influence", "", "influence")) == (pytest.approx(1 / 3), 0.5)
    assert question_scores(rows([True, True], influence=[1, 0]), PanelColumn("influence", "", "influence")) is None


def panel(n=60, seed=0, noise=0.0):
    rng = np.random.default_rng(seed)
    questions, passages = [], []
    for q in range(n):
        gold = rng.integers(0, 5)
        for i in range(5):
            is_gold = i == gold
            passages.append({"question_id": f"q{q}", "retrieval_rank": i + 1, "is_gold": is_gold,
                             "influence": float(is_gold) + noise * rng.normal(),  # finds gold
                             "answer_similarity": float(rng.uniform())})  # chance
        questions.append({"question_id": f"q{q}", "error": None, "f1": 1.0 if q % 2 else 0.0})
    return validity_panel(questions, passages, "drop-one rouge_l", n_boot=500, seed=1)


def test_a_measure_that_finds_gold_beats_the_embedding_control():
    v = panel()
    assert v["available"] and v["n_questions_with_gold"] == 60
    all_ = v["subsets"]["all"]
    m = all_["measures"]
    assert m["influence"]["recovery_at_1"]["mean"] == 1.0 and m["influence"]["auc"]["mean"] == 1.0
    assert m["random"]["recovery_at_1"]["mean"] == pytest.approx(0.2) and m["random"]["auc"]["mean"] == 0.5
    emb = m["answer_similarity"]["auc"]
    assert emb["low"] <= emb["mean"] <= emb["high"] and emb["low"] < 0.5 < emb["high"]
    assert all_["vs_embedding"]["influence"]["verdict"] == "beats"
    assert v["subsets"]["correct"]["n"] == 30
    assert any("drop-one rouge_l beats the answer–passage embedding control" in line for line in v["verdicts"])


def test_a_measure_no_better_than_the_control_says_so():
    v = panel(noise=100.0)  # influence is noise now
    assert v["subsets"]["all"]["vs_embedding"]["influence"]["verdict"] in ("does not beat", "worse than")
    assert any("does not beat" in line or "worse than" in line for line in v["verdicts"])


def test_no_gold_is_an_explicit_state():
    v = validity_panel([{"question_id": "q", "error": None, "f1": 1.0}],
                       rows([False, False], influence=[0.5, 0.1]), "drop-one rouge_l")
    assert v == {"available": False, "reason": "no retrieved passage is marked gold (no gold passage ids)"}


def test_few_questions_give_numbers_but_no_verdict():
    v = panel(n=6)
    assert v["subsets"]["all"]["vs_embedding"]["influence"]["verdict"] == "too few questions to compare with"
    assert v["subsets"]["all"]["measures"]["influence"]["auc"]["mean"] == 1.0
