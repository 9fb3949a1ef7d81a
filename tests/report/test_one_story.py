"""One story in every output: the report's headline, filters and cards count every question state
as the console does (measured, diffuse, context ignored, unanswerable, declined, failed, partial)."""

from __future__ import annotations

import re

from ragray.report.lead import headline
from ragray.report.questions import USED_TITLES, question_cards
from ragray.report.run_console import correct_line, stage_line, unverdicted_words, verdict_words


def q(qid, **kw):
    return {"question_id": qid, "question": f"question {qid}", "baseline_answer": "an answer", "answerable": True,
            "answer_correct": False, "hit_at_k": 1.0, **kw}


QUESTIONS = [
    q("aligned", misaligned=False, usage_ndcg=1.0, answer_correct=True, state="measured", stage="right"),
    q("misaligned", misaligned=True, usage_ndcg=0.5, state="measured", stage="generation",
      stage_why="gold ranked #1, above #3 that the answer leaned on"),
    q("diffuse", state="diffuse", carried_by=[1, 2], stage="generation", stage_why="gold retrieved at #1; no passage stands out"),
    q("ignored", state="context_ignored", context_dependent=False, stage="memory",
      stage_why="the model gives this answer without the passages"),
    q("declined", answerable=False, declined=True, answer_correct=True, stage="declined"),
    q("made_up", answerable=False, declined=False, answer_correct=False, stage="made_up"),
    q("failed", state="error", error="timeout", answer_correct=None, stage="no_content"),
]
PASSAGES = [{"question_id": x["question_id"], "passage_id": f"{x['question_id']}-{r}", "retrieval_rank": r,
             "influence": 0.5, "used": r == 1, "is_gold": r == 1, "group": 0 if r < 3 else None,
             "relation": "either suffices" if r < 3 else None, "title": "T", "text": "text"}
            for x in QUESTIONS for r in (1, 2, 3)]


def test_every_card_belongs_to_one_filter_and_the_filters_count_all():
    html = question_cards(QUESTIONS, PASSAGES, [])
    options = dict(re.findall(r'value="(\w+)"[^>]*> ([^<]+?) \(\d+\)', html))
    counts = {k: int(n) for k, n in re.findall(r'value="(\w+)"[^>]*> [^<]+? \((\d+)\)', html)}
    cards = re.findall(r'data-verdict="(\w+)"', html)
    assert len(cards) == len(QUESTIONS) == counts["all"]
    assert all(c in options for c in cards) and sum(n for k, n in counts.items() if k != "all") == len(QUESTIONS)
    assert counts["unanswerable"] == 2 and counts["misaligned"] == 1 and counts["aligned"] == 1


def test_a_wrong_answers_card_leads_with_its_stage_as_the_console_does():
    html = question_cards(QUESTIONS, PASSAGES, [])
    card = html[html.index('data-qid="misaligned"'):].split("</article>")[0]
    assert "GENERATION failed: gold ranked #1, above #3 that the answer leaned on" in card
    assert verdict_words(QUESTIONS[1]).startswith("GENERATION failed: gold ranked #1, above #3")
    assert card.index("GENERATION failed") < card.index(">misaligned<")


def test_used_says_what_it_means_for_passages_that_either_suffice():
    html = question_cards(QUESTIONS[:1], PASSAGES, [])
    assert USED_TITLES["either suffices"] in html.replace("&#x27;", "'") and "needed this passage\"" not in html


def test_the_headline_says_why_the_rest_have_no_verdict_and_carries_the_consoles_lines():
    summary = {"n_questions": len(QUESTIONS),
               "alignment": {"n_scored": 2, "misaligned_rate": 0.5, "misalignment_threshold": 0.8}}
    box = headline(summary, QUESTIONS)
    why = unverdicted_words(QUESTIONS)
    assert why == ("1 no single passage stands clear of the noise, 1 answered without the passages, "
                   "2 unanswerable, 1 failed")
    assert f"5 of 7 questions have no alignment verdict: {why}." in box
    for line in (correct_line(QUESTIONS), stage_line(QUESTIONS)):
        assert line in box.replace("&#x27;", "'")
    assert "declined 1 of 2 unanswerable" in box and "or the question failed" not in box


def test_a_partial_run_says_so_first_in_the_console_the_report_and_the_dashboard_body():
    from ragray.report.run_console import lead_lines, partial_line
    from ragray.rows.summaries import RunSummary

    summary = {"n_questions": 2, "alignment": {"n_scored": 1, "misaligned_rate": 0.0, "misalignment_threshold": 0.8,
                                               "misaligned_ci95": [0.0, 0.79]},
               "partial": {"questions_done": 2, "questions": 8, "why": "interrupted"}}
    line = partial_line(summary)
    assert line.startswith("PARTIAL: 2 of 8 questions finished (interrupted)")
    assert lead_lines(RunSummary.from_dict(summary), [])[0] == line
    box = headline(summary, QUESTIONS[:2])
    assert box.startswith('<p class=partial data-key="partial">PARTIAL: 2 of 8')
    assert partial_line({**summary, "partial": None}) is None and "PARTIAL" not in headline(
        {**summary, "partial": None}, QUESTIONS[:2])


def test_a_used_gold_passage_is_never_hidden_in_more():
    """Issue 66: 'A (…, #2 #5 #6); A (0.12, #9); A (0.12, #7) +2 more' hid the used gold at #1."""
    from ragray.report.run_console import question_lines

    q = {"question_id": "q", "question": "which?", "answer_correct": True}
    infl = {2: 0.3, 5: 0.2, 9: 0.15, 7: 0.14, 1: 0.1}
    ps = [{"question_id": "q", "passage_id": f"p{r}", "retrieval_rank": r, "used": True, "is_gold": r == 1,
           "influence": v, "title": "1973 oil crisis", "text": f"text {r}"} for r, v in infl.items()]
    [line], _ = question_lines([q], ps)
    assert "#1 gold)" in line.cells[3] and line.cells[3].endswith("+2 more") and "p1" in line.used_ids
