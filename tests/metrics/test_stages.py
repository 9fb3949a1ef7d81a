"""Which stage failed, on questions of known truth: each stage from the rows that define it."""

from __future__ import annotations

import pytest

from ragray.metrics.stages import FAILURES, STAGES, stage_counts, stage_of


def passages(k=10, gold=(), used=()):
    return [{"retrieval_rank": r, "is_gold": r in gold, "used": r in used} for r in range(1, k + 1)]


def question(**kw):
    return {"baseline_answer": "Paris", "answer_correct": False, "hit_at_k": 1.0, "context_dependent": True,
            "answerable": True, **kw}


@pytest.mark.parametrize(("q", "ps", "stage", "words"), [
    # HotpotQA, Jaclyn Stapp: both gold paragraphs at #1 and #3, the wrong answer leaned on a distractor at #10
    (question(), passages(gold=(1, 3), used=(10,)), "generation", "gold ranked #1 #3, above #10"),
    (question(), passages(gold=(7,), used=(2,)), "ranking", "gold ranked #7, below #2"),
    (question(hit_at_k=0.0), passages(used=(2,)), "retrieval", "no gold passage retrieved"),
    # the gold never retrieved: retrieval, even where the model then answered from memory
    (question(hit_at_k=0.0, context_dependent=False), passages(), "retrieval", "no gold passage"),
    (question(context_dependent=False), passages(gold=(1,)), "memory", "without the passages"),
    (question(), passages(gold=(2,), used=(2,)), "generation", "leaned on the gold (#2) and is still wrong"),
    (question(), passages(gold=(4,)), "generation", "no passage stands out"),
    (question(answer_correct=True), passages(gold=(1,), used=(1,)), "right", "right, from the passages"),
    (question(answerable=False, declined=True), passages(), "declined", "declined"),
    (question(answerable=False, declined=False), passages(used=(3,)), "made_up", "answered anyway"),
    (question(error="timeout"), passages(), "no_content", "failed"),
    (question(baseline_answer="  "), passages(), "no_content", "generated nothing"),
    (question(answer_correct=None, hit_at_k=None), passages(used=(3,)), "not_judged", "leaned on #3"),
    (question(hit_at_k=None), passages(used=(3,)), "not_judged", "no gold passages to tell"),
])
def test_each_stage_from_the_rows_that_define_it(q, ps, stage, words):
    s = stage_of(q, ps)
    assert s.stage == stage and words in s.why


def test_counts_hold_every_stage_and_failures_are_stages():
    counts = stage_counts([stage_of(question(), passages(gold=(7,), used=(2,))),
                           stage_of(question(hit_at_k=0.0), passages())])
    assert list(counts) == list(STAGES) and set(FAILURES) <= set(STAGES)
    assert counts["ranking"] == counts["retrieval"] == 1 and sum(counts.values()) == 2


def test_the_console_leads_a_wrong_answer_with_its_stage_and_counts_them():
    from ragray.report.run_console import stage_line, verdict_words

    rows = []
    for q, ps in [(question(misaligned=True), passages(gold=(1, 3), used=(10,))),
                  (question(), passages(gold=(7,), used=(2,))), (question(hit_at_k=0.0), passages()),
                  (question(answer_correct=True), passages(gold=(1,), used=(1,)))]:
        s = stage_of(q, ps)
        rows.append(q | {"stage": s.stage, "stage_why": s.why})
    assert verdict_words(rows[0]) == "GENERATION failed: gold ranked #1 #3, above #10 that the answer leaned on; misaligned"
    assert verdict_words(rows[2]).startswith("RETRIEVAL failed: no gold passage retrieved")
    line = stage_line(rows)
    assert line.startswith("wrong answers by stage: 1 retrieval (") and "1 ranking (" in line and "1 generation (" in line
    assert stage_line(rows[3:]) is None


def test_generate_modes_context_ignored_is_memory_without_a_closed_book():
    s = stage_of(question(context_dependent=None, state="context_ignored", hit_at_k=None), passages())
    assert s.stage == "memory"

