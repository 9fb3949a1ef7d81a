"""Draft proposals for verified greedy decoding (pure token logic)."""

from __future__ import annotations

from ragray.generation.transformers.drafts import DraftSource, accepted_count


def test_a_sibling_that_already_extends_the_row_is_the_draft() -> None:
    drafts = DraftSource([[1, 2, 3], [1, 2, 3]], size=3)
    outputs = [[7, 8], [7, 8, 9, 10, 11, 12]]
    assert drafts.propose(0, outputs) == [9, 10, 11]
    assert drafts.propose(0, outputs, limit=2) == [9, 10]
    assert drafts.propose(0, outputs, limit=0) == []
    # a sibling that diverged is no draft; the longest continuation wins
    assert DraftSource([[1]] * 3, size=4).propose(0, [[7], [8, 9, 9], [7, 5, 6]]) == [5, 6]


def test_prompt_lookup_follows_the_latest_longest_ngram() -> None:
    prompt = [5, 6, 7, 1, 9, 5, 6, 8, 2, 6, 3]
    drafts = DraftSource([prompt], size=2)
    assert drafts.propose(0, [[4, 5, 6]]) == [8, 2]  # "5 6" last seen before 8 2 (not 7 1)
    assert drafts.propose(0, [[9, 6]]) == [3]  # no "9 6": back off to "6", cut at the prompt's end
    assert drafts.propose(0, [[42]]) == []  # nothing to follow
    assert drafts.propose(0, [[3]]) == []  # the prompt's last token has no follower


def test_accepted_count_stops_at_the_first_miss() -> None:
    assert accepted_count([4, 5, 6], [4, 5, 9, 1]) == 2
    assert accepted_count([4, 5], [4, 5, 6]) == 2
    assert accepted_count([], [3]) == 0
    assert accepted_count([1], [2, 1]) == 0
