"""Validity panel v2 on known truth: per-question tables whose winner is known."""

import numpy as np
import pytest

from ragray.metrics.evidence import answered, evidence_panel, holm


def tables(n, lds_of, seed=0):
    rng = np.random.default_rng(seed)
    questions, passages, checks = [], [], []
    for i in range(n):
        qid = f"q{i}"
        questions.append({"question_id": qid, "baseline_answer": "It was Tern.", "gold_answers": ["tern"],
                          "context_dependent": i % 2 == 0, "error": None, "logprob_all": -1.0})
        for r in range(1, 5):
            passages.append({"question_id": qid, "retrieval_rank": r, "is_gold": r == 2,
                             "logprob_drop": 5.0 if r == 2 else rng.random(), "influence": 0.5,
                             "answer_similarity": rng.random(), "question_similarity": rng.random(),
                             "random_control": rng.random()})
        for m, mean in lds_of.items():
            checks.append({"question_id": qid, "measure": m, "lds": mean + rng.normal(0, 0.1),
                           "top_k": [1], "top_k_drop": [mean * 10 + rng.normal(0, 1)]})
    return questions, passages, checks


def test_a_measure_that_beats_every_control_is_named_and_a_tie_is_not():
    lds = {"logprob_drop": 0.9, "influence": 0.5, "retrieval_rank": 0.3, "answer_similarity": 0.5,
           "question_similarity": 0.3, "random_control": 0.0}
    panel = evidence_panel(*tables(40, lds))
    t = panel["subsets"]["all"]["metrics"]["lds"]
    assert t["n"] == 40 and t["best"] == "logprob_drop" and t["best_beats_every_control"] is True
    # influence ties the answer-passage cosine: no win claimed against it
    assert t["vs_controls"]["influence"]["answer_similarity"]["beats"] is False
    assert t["vs_controls"]["influence"]["random_control"]["beats"] is True
    # the gold metrics: the drop finds gold first every time; the random control is its expectation
    g = panel["subsets"]["all"]["metrics"]["recovery_at_1"]
    assert g["measures"]["logprob_drop"]["mean"] == 1.0 and g["measures"]["random_control"]["mean"] == 0.25
    # the primary subset: answered and context dependent (every other question)
    assert panel["subsets"]["answered_context_dependent"]["n_questions"] == 20
    assert panel["subsets"]["answered"]["n_questions"] == 40


def test_below_ten_questions_no_verdict():
    lds = {"logprob_drop": 0.9, "random_control": 0.0}
    t = evidence_panel(*tables(6, lds))["subsets"]["all"]["metrics"]["lds"]
    assert t["best"] == "logprob_drop" and t["best_beats_every_control"] is None


def test_holm_matches_a_hand_computation():
    assert holm([0.01, 0.04, 0.03]) == pytest.approx([0.03, 0.06, 0.06])
    assert holm([0.5]) == [0.5]


@pytest.mark.parametrize("answer, golds, expected", [
    ("The ferry is the Tern.", ["tern"], True),
    ("Terns nest here", ["tern"], False),  # whole words only
    ("yes, it does", ["yes"], True),
    ("anything", [], None),
])
def test_answered(answer, golds, expected):
    assert answered(answer, golds) is expected


def test_the_lines_say_who_wins_in_plain_words():
    from ragray.metrics.evidence import evidence_lines

    lds = {"logprob_drop": 0.9, "answer_similarity": 0.5, "random_control": 0.0}
    panel = evidence_panel(*tables(20, lds))
    lines = evidence_lines(panel, ["all"])
    assert lines[0].startswith("context dependent: 10 of 20 questions")
    assert any(l.startswith("all (20 q), lds: logprob_drop 0.8") and "best control answer_similarity" in l
               and l.endswith("beats every control") for l in lines)
    # by default the primary subset only (10 questions: answered and context dependent)
    assert all(l.startswith("answered_context_dependent (10 q)") for l in evidence_lines(panel)[1:])


def test_the_report_section_shows_the_primary_subset():
    from ragray.report.trust import evidence_section

    panel = evidence_panel(*tables(20, {"logprob_drop": 0.9, "answer_similarity": 0.5}))
    html = evidence_section({"evidence": panel})
    assert 'id="evidence"' in html and "answered_context_dependent" in html
    assert 'data-measure="logprob_drop"' in html and "beats 1 of 1 controls" in html
    assert evidence_section({"evidence": None}) == ""
