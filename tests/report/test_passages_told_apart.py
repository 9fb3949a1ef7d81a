"""Passages of one title read apart in the console: each adds the few words where its text stops
reading like the others'; a gold passage's rank says gold; the used gold is never hidden."""

from __future__ import annotations

from ragray.report.run_console import MAX_USED, group_words, telling_words, question_lines


def _p(pid, title, text, rank, influence, *, gold=False, used=True, group=None):
    return {"question_id": "q", "passage_id": pid, "title": title, "text": text, "used": used,
            "influence": influence, "retrieval_rank": rank, "group": group, "is_gold": gold}


CRISIS = [_p("a", "1973 oil crisis", "The 1973 oil crisis began in October 1973 when OAPEC proclaimed an embargo.", 2,
             0.5, gold=True),
          _p("b", "1973 oil crisis", "The 1973 oil crisis ended in March 1974 when the embargo was lifted.", 7, 0.2),
          _p("c", "Oil", "Oil is a liquid.", 9, 0.1)]


def test_passages_of_one_title_are_told_apart_by_the_words_that_differ():
    q = {"question_id": "q", "question": "When did the crisis begin?", "answer_correct": True}
    (line,), _ = question_lines([q], CRISIS)
    used = line.cells[3]
    assert used == ('1973 oil crisis "…began in October 1973…" (0.50, #2 gold); '
                    '1973 oil crisis "…ended in March 1974…" (0.20, #7); Oil (0.10, #9)')


def test_a_passage_alone_with_its_title_reads_as_before_and_texts_with_nothing_in_common_start_at_the_start():
    assert group_words([CRISIS[2]]) == "Oil (0.10, #9)"
    assert telling_words(CRISIS[2], [_p("d", "Oil", "Crude comes from wells.", 3, 0.1)]) == '"Oil is a liquid."'


def test_the_used_gold_is_named_even_past_the_named_few():
    many = [_p(f"x{i}", f"Title {i}", f"text {i}", i, 0.9 - 0.1 * i) for i in range(1, MAX_USED + 2)]
    gold = _p("g", "Gold title", "the gold text", 9, 0.01, gold=True)
    (line,), _ = question_lines([{"question_id": "q", "question": "?", "answer_correct": False}], [*many, gold])
    assert "Gold title (0.01, #9 gold)" in line.cells[3] and line.cells[3].endswith("+2 more")
