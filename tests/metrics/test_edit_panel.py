"""The validity panel's edit-test block (ragray.metrics.edit_panel): counts by hand, absent when
off, an explicit not-measured state when nothing was labelled, one line in the console and report."""

from __future__ import annotations

import pytest

from ragray.metrics.edit_panel import edit_test_block, edit_test_line
from ragray.metrics.panel import panel_lines, validity_summary
from ragray.metrics.rates import rate, wilson_interval
from ragray.report.panel import panel_section


def q(qid, calls, unedited=None, reproduces=None):
    return {"question_id": qid, "edit_calls": calls, "edit_unedited": unedited, "edit_reproduces": reproduces}


def p(qid, rank, used, sim, moved):
    return {"question_id": qid, "passage_id": f"{qid}{rank}", "retrieval_rank": rank, "used": used,
            "answer_similarity": sim, "edit_moved": moved}


QUESTIONS = [q("a", 4, "original", True), q("b", 2, "original", False), q("c", 0), q("d", None)]
PASSAGES = [
    p("a", 3, True, 0.9, False),   # listed out of order: ranks decide the retriever's top 1
    p("a", 1, False, 0.2, None),
    p("a", 2, True, 0.9, True),    # ties a3 on similarity: the first in retrieval order is the top 1
    p("a", 4, None, 0.1, True),    # used unmeasured: left out of used's counts only
    p("b", 1, True, None, True),   # no similarity in this question: left out of that control's counts
    p("b", 2, None, None, None),
    p("c", 1, True, 0.5, None),
    p("d", 1, True, 0.5, None),
]


def test_counts_by_hand():
    block = edit_test_block(QUESTIONS, PASSAGES, enabled=True)
    assert block["available"] is True and block["reason"] is None
    assert (block["questions_tested"], block["questions_with_edits"], block["generations"]) == (3, 2, 6)
    assert (block["passages_labelled"], block["moved"]) == (4, 3)
    assert block["unedited_reproduces_run"] == rate(1, 2)
    m = block["marks"]
    # used marks a2, a3, b1 (a4 unmeasured): 2 of the 3 marked moved; both measured movers marked
    assert (m["used"]["measured"], m["used"]["precision"]["k"], m["used"]["precision"]["n"]) == (3, 2, 3)
    assert (m["used"]["recall"]["k"], m["used"]["recall"]["n"]) == (2, 2)
    # the retriever's top 1 among the labelled: b1 only
    assert m["retrieval_top1"]["precision"] == rate(1, 1) and m["retrieval_top1"]["recall"] == rate(1, 3)
    # similarity top 1: a2 (tie with a3, earlier); question b unmeasured
    assert m["answer_similarity_top1"]["measured"] == 3
    assert m["answer_similarity_top1"]["precision"] == rate(1, 1) and m["answer_similarity_top1"]["recall"] == rate(1, 2)
    assert m["used"]["precision"]["share"] == pytest.approx(2 / 3)
    assert m["used"]["precision"]["ci95"] == list(wilson_interval(2, 3))


def test_absent_when_off_and_explicit_when_nothing_is_labelled():
    assert edit_test_block(QUESTIONS, PASSAGES, enabled=False) is None
    nothing = edit_test_block([q("c", 0)], [p("c", 1, True, 0.5, None)], enabled=True)
    assert nothing["available"] is False and nothing["marks"] == {} and nothing["passages_labelled"] == 0
    assert "in none of the 1 questions tested does a passage hold a gold answer" in nothing["reason"]
    untested = edit_test_block([q("d", None)], [], enabled=True)
    assert untested["available"] is False and untested["reason"].startswith("no question with gold answers")
    unlabelled = edit_test_block([q("a", 3, "neither")], [p("a", 1, True, 0.5, None)], enabled=True)
    assert "1 of 1 questions had a passage holding a gold answer, 0 of them answered it unedited" in unlabelled["reason"]
    assert rate(0, 0) == {"k": 0, "n": 0, "share": None, "ci95": [None, None]}


def test_one_line_in_the_panel_console_and_report():
    block = edit_test_block(QUESTIONS, PASSAGES, enabled=True)
    line = edit_test_line(block)
    assert line.startswith("edit test (does the answer follow an edit of the passage?): 4 passages labelled, 3 moved")
    assert "used: precision 0.67 [0.21, 0.94] (2/3), recall 1.00 [0.34, 1.00] (2/2)" in line
    assert edit_test_line(None) is None
    # the test needs gold answers, not gold passages: it stands beside a panel that is not measured
    panel = validity_summary(None, reason="no gold passage ids", edit_test=block)
    assert panel["verdict"] == "NOT MEASURED" and panel["edit_test"] == block
    assert "edit_test" not in validity_summary(None, reason="no gold passage ids")
    lines, table = panel_lines(panel)
    assert lines[1] == line and table == []
    html = panel_section(panel)
    assert html.count('data-key="panel.edit_test.available" data-value="true"') == 1
    assert "4 passages labelled, 3 moved the answer" in html
    off = panel_section(validity_summary(None, reason="no gold passage ids"))
    assert "edit test" not in off and "edit test" not in "\n".join(panel_lines(validity_summary(None))[0])
    nothing = edit_test_line(edit_test_block([q("c", 0)], [], enabled=True))
    assert nothing.startswith("edit test (does the answer follow an edit of the passage?): not measured — in none")
