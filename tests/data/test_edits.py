"""The edit test's cases: the answer replaced by a same-kind substitute in each passage holding
it, and in every copy at once; the substitute stands in none of the passages."""

from ragray.data.conflicts import taken_source
from ragray.data.edits import answer_in, edit_cases, substitute_for

PASSAGES = [
    {"id": "a", "title": "Tower", "text": "The tower was first lit in 1871 and automated in 1988."},
    {"id": "b", "title": "Museum", "text": "The museum opened in 1990."},
    {"id": "c", "title": "Tower copy", "text": "Lit in 1871, the tower stands 31 metres tall."},
]
POOL = ["1902", "1871", "Paris", "1990", "the blue one"]


def test_every_passage_holding_the_answer_is_edited_alone_and_then_all_together():
    cases = edit_cases(PASSAGES, ["1871"], POOL, seed="q1")
    assert [c.edited for c in cases] == [("a",), ("c",), ("a", "c")]
    assert [c.every_copy for c in cases] == [False, False, True]
    b = cases[0].substitute
    assert b == "1902"  # a number for a number, standing in no passage (1990 does, 1871 is the answer)
    edited = {p["id"]: p["text"] for p in cases[0].passages}
    assert "1871" not in edited["a"] and b in edited["a"] and "1871" in edited["c"]
    assert all("1871" not in p["text"] for p in cases[2].passages)
    assert PASSAGES[0]["text"].count("1871") == 1  # the input is not changed


def test_no_case_without_an_answer_in_the_passages_or_a_substitute():
    assert edit_cases(PASSAGES, ["1850"], POOL, seed="q1") == []
    assert edit_cases(PASSAGES, ["1871"], ["Paris"], seed="q1") == []
    assert answer_in(PASSAGES, ["Lighthouse", "31 metres"]) == ("31 metres", ["c"])
    assert substitute_for("Paris", ["London", "1902", "paris"], PASSAGES, seed="x") == "London"


def test_the_answer_says_which_way_it_went():
    assert taken_source("It was first lit in 1902.", "1871", "1902") == "copy"
    assert taken_source("1871", "1871", "1902") == "original"
    assert taken_source("1871 or 1902", "1871", "1902") is None
