"""The one validity panel on known truth: PASS, FAIL (naming the control), UNDECIDED below the
question count, NOT MEASURED without gold, and one row for two measures with equal numbers."""

import random

from ragray.metrics.evidence import evidence_panel
from ragray.metrics.panel import panel_lines, validity_summary


def tables(n, gold_rank, seed=0, equal_drop=True):
    """``n`` questions of 5 passages; the gold one sits at ``gold_rank`` and the answer used it
    (influence high on gold, noise elsewhere); every answer correct and context dependent."""
    rng = random.Random(seed)
    questions, passages = [], []
    for i in range(n):
        qid = f"q{i}"
        questions.append({"question_id": qid, "error": None, "answer_correct": True, "context_dependent": True,
                          "baseline_answer": "x", "gold_answers": ["x"]})
        for rank in range(1, 6):
            gold = rank == gold_rank
            infl = 0.9 + 0.05 * rng.random() if gold else 0.3 * rng.random()
            passages.append({"question_id": qid, "retrieval_rank": rank, "is_gold": gold, "influence": infl,
                             "logprob_drop": infl if equal_drop else None})
    return questions, passages


def test_influence_that_finds_buried_gold_passes():
    q, p = tables(30, gold_rank=4)
    panel = validity_summary(evidence_panel(q, p, n_boot=500), "drop-one log-prob")
    assert panel["verdict"] == "PASS" and panel["available"]
    assert "beating every free control" in panel["sentence"] and "On 30 questions" in panel["sentence"]
    names = [r["name"] for r in panel["rows"]]
    assert names[0] == "drop-one log-prob = log-prob drop without the passage"  # equal numbers: one row
    assert "the retriever's order" in names and "random" in names
    assert [s["key"] for s in panel["subsets"]] == ["all", "answered", "answered_context_dependent"]
    assert panel["rows"][0]["beats_every_control"] is True


def test_a_retriever_that_already_ranks_gold_first_is_not_beaten():
    q, p = tables(30, gold_rank=1)
    panel = validity_summary(evidence_panel(q, p, n_boot=500), "drop-one log-prob")
    assert panel["verdict"] == "FAIL"
    assert "does not beat the retriever's order 1.00" in panel["sentence"]


def test_too_few_questions_is_undecided_with_numbers():
    q, p = tables(6, gold_rank=4)
    panel = validity_summary(evidence_panel(q, p, n_boot=200), "influence")
    assert panel["verdict"] == "UNDECIDED" and "10 needed" in panel["sentence"]
    assert panel["rows"] and panel["rows"][0]["beats_every_control"] is None
    lines, table = panel_lines(panel)
    assert lines[0].startswith("validity against gold passages: UNDECIDED")
    assert table[0][0] == "measure" and table[1][1].startswith("1.00 [")


def test_no_gold_is_not_measured():
    q, p = tables(12, gold_rank=0)  # no passage is gold
    panel = validity_summary(None, reason="no retrieved passage is marked gold")
    assert panel["verdict"] == "NOT MEASURED" and not panel["rows"]
    assert panel_lines(panel) == (["validity against gold passages: NOT MEASURED — no retrieved passage is "
                                   "marked gold."], [])


def test_generate_mode_uses_the_answered_subset():
    q, p = tables(12, gold_rank=3, equal_drop=False)
    for x in q:
        x["context_dependent"] = None  # not measured in generate mode
    ev = evidence_panel(q, p, n_boot=300)
    panel = validity_summary(ev, "drop-one rouge_l")
    assert panel["primary"] == "answered" and [s["key"] for s in panel["subsets"]] == ["all", "answered"]
    assert panel["verdict"] == "PASS" and "answered correctly," in panel["sentence"]


def test_the_headline_interval_is_wilsons_and_stays_in_0_1():
    from ragray.metrics.summary import wilson_interval

    lo, hi = wilson_interval(5, 10)
    assert round(lo, 3) == 0.237 and round(hi, 3) == 0.763  # the textbook value
    lo, hi = wilson_interval(0, 10)
    assert lo == 0.0 and round(hi, 3) == 0.278  # 0 of n is not "exactly 0"
    assert abs(wilson_interval(4, 4)[1] - 1.0) < 1e-12 and wilson_interval(0, 0) == (None, None)
