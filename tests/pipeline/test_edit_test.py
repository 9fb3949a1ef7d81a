"""The edit test (ragray.pipeline.edit_test) on a fake model whose answer follows given passages:
the label is True where the answer moves with the edit, False where the lone holder's edit leaves
it, absent for copies and mixed answers; one batched call; and in ``ragray run`` only when asked."""

from __future__ import annotations

import re
from collections.abc import Sequence

import pytest

import ragray
from ragray.config import load_config
from ragray.errors import ConfigError
from ragray.generation.base import ChatPrompt, Generation, Generator
from ragray.generation.prompts import get_template
from ragray.generation.scripted import ScriptedGenerator
from ragray.pipeline.cost import question_calls
from ragray.pipeline.edit_test import EditCaseOutcome, EditTest, edit_test, edit_test_calls, outcome_of, substitute_pool
from ragray.types import Passage

TEMPLATE = get_template("numbered")
POOL = substitute_pool([["tern"], ["puffin"], ["Oslo"], ["1984"], ["yes", "no"]])  # the data set's gold answers


class Follows(Generator):
    """Answers with the text of the passages in ``slots`` (1-based, as numbered in the prompt), or
    with ``fixed`` (the model's memory)."""

    name = "follows"
    cacheable = False

    def __init__(self, slots: Sequence[int] = (), fixed: str | None = None) -> None:
        self.slots, self.fixed, self.batches = tuple(slots), fixed, []

    @property
    def model_id(self) -> str:
        return "follows"

    def _answer(self, prompt: ChatPrompt) -> str:
        if self.fixed is not None:
            return self.fixed
        blocks = dict(re.findall(r"\[(\d+)\] ([^\n]*)", prompt[-1].content))
        return " ".join(blocks[str(s)] for s in self.slots)

    def generate(self, prompts: Sequence[ChatPrompt]) -> list[Generation]:
        self.batches.append(len(prompts))
        return [Generation(self._answer(p), 1, 1, 0.0) for p in prompts]

    def logprobs(self, prompts: Sequence[ChatPrompt], answers: Sequence[str]) -> list[float]:
        raise NotImplementedError


def passages(*texts: str) -> list[Passage]:
    return [Passage(id=f"p{i}", text=t) for i, t in enumerate(texts, start=1)]


def run(gen: Generator, shown: list[Passage], answers=("tern",), run_answer: str | None = None) -> EditTest:
    return edit_test("Which bird?", answers, shown, POOL, gen, TEMPLATE, TEMPLATE.system, seed="q",
                     run_answer=run_answer)


def test_the_answer_moves_with_the_passage_it_came_from():
    shown = passages("Kell has a lighthouse.", "The ferry is the tern.")
    gen = Follows(slots=[2])
    test = run(gen, shown, run_answer="The ferry is the tern.")
    assert test.answer == "tern" and test.substitute == "puffin" and test.kind == "phrase"  # seeded, same kind
    assert test.unedited == "original" and test.reproduces_run is True
    assert test.cases == (EditCaseOutcome(("p2",), True, "substitute"),)
    assert test.labels() == {"p2": True}  # p1 holds no answer: no label
    assert gen.batches == [2] and test.generations == 2  # the unedited prompt and the edit, in one call


def test_a_lone_holder_whose_edit_leaves_the_answer_is_a_negative():
    test = run(Follows(fixed="tern"), passages("The tern nests here.", "Ferries run daily."), run_answer="a tern")
    assert test.cases == (EditCaseOutcome(("p1",), True, "original"),)
    assert test.labels() == {"p1": False} and test.reproduces_run is False


def test_copies_label_only_the_passage_the_answer_moved_with():
    shown = passages("The tern nests here.", "A tern, the ferry.", "Tickets cost five crowns.")
    test = run(Follows(slots=[2]), shown)
    assert [(c.edited, c.every_copy, c.outcome) for c in test.cases] == [
        (("p1",), False, "original"),            # another copy still holds it: unlabelled
        (("p2",), False, "substitute"),          # moved with its passage: used
        (("p1", "p2"), True, "substitute")]      # every copy: says nothing of which one
    assert test.labels() == {"p2": True}
    # a model that keeps the answer from memory: neither copy is labelled (the other one still held it)
    assert run(Follows(fixed="tern"), shown).labels() == {}


def test_answers_holding_both_or_neither_label_nothing():
    shown = passages("The tern nests here.", "A tern, the ferry.")
    both = run(Follows(slots=[1, 2]), shown)
    assert [c.outcome for c in both.cases] == ["both", "both", "substitute"] and both.labels() == {}
    neither = run(Follows(fixed="a gull"), shown)
    assert neither.unedited == "neither" and neither.labels() == {}  # the unedited answer must hold it


def test_nothing_to_edit_costs_no_generation():
    gen = Follows(slots=[1])
    test = run(gen, passages("Ferries run daily.", "Terns are birds."))  # "Terns" is not the word "tern"
    assert test == EditTest() and gen.batches == [] and test.generations == 0 and test.labels() == {}
    no_substitute = edit_test("Q?", ["tern"], passages("The tern."), ["tern", "Oslo"], gen, TEMPLATE, None, seed="q")
    assert no_substitute == EditTest(answer="tern") and gen.batches == []


def test_outcomes_pool_and_call_bound():
    assert [outcome_of(t, "tern", "puffin") for t in ("a tern", "puffin!", "tern or puffin", "gull")] == [
        "original", "substitute", "both", "neither"]
    assert substitute_pool([["tern", "Tern"], ["yes"], ["", "1984"], ["tern"]]) == ("1984", "Tern", "tern")
    assert [edit_test_calls(k) for k in (0, 1, 2, 5)] == [0, 2, 4, 7]
    on, off = load_config(values={"influence.edit_test": True}), load_config()
    assert question_calls(on, "run", 5)[0] == question_calls(off, "run", 5)[0] + 7


def test_the_option_is_off_by_default_and_validated():
    assert load_config().influence.edit_test is False
    with pytest.raises(ConfigError, match=r"influence\.edit_test: input should be a valid boolean.*'maybe'"):
        load_config(values={"influence.edit_test": "maybe"})


ROWS = [
    {"id": "q1", "question": "Which ferry sails to Kell?", "answers": ["tern"],
     "passages": ["Kell has a lighthouse.", "The ferry to Kell is the Tern ANSWER=tern", "Tickets cost five crowns."]},
    {"id": "q2", "question": "Which bird sat on the pier?", "answers": ["gull"],
     "passages": ["A gull sat on the pier.", "Birdwatch notes ANSWER=gull"]},
    {"id": "q3", "question": "Which bird nests on Myrrin?", "answers": ["puffin"],
     "passages": ["The puffin nests on Myrrin.", "Myrrin puffin colony ANSWER=puffin"]},
    {"id": "q4", "question": "What is here?", "passages": ["Nothing here ANSWER=x"]},
]
#: no embedding model in these tests
QUIET = {"metrics.embedding": False}


def _calls(gen: ScriptedGenerator) -> int:
    return len(gen.calls)


def test_a_run_with_the_option_labels_passages_and_fills_the_panel():
    gen = ScriptedGenerator()
    r = ragray.run(ROWS, model=gen, settings={**QUIET, "influence.edit_test": True}, progress=False, history=False)
    p = r.passages.to_pandas().sort_values(["question_id", "retrieval_rank"])
    labels = {pid: (None if v is None or v != v else bool(v)) for pid, v in zip(p["passage_id"], p["edit_moved"])}
    # q1: the lone holder carries the marker, the answer moves; q2: the lone holder's edit leaves the answer
    # (the marker is elsewhere); q3: two copies, the answer moves with the marked one; q4: no gold answer
    assert labels == {"q1-p1": None, "q1-p2": True, "q1-p3": None, "q2-p1": False, "q2-p2": None,
                      "q3-p1": None, "q3-p2": True, "q4-p1": None}
    q = r.questions.to_pandas().set_index("question_id")
    assert list(q["edit_calls"].fillna(-1)) == [2, 2, 4, -1]
    assert list(q.loc[["q1", "q2", "q3"], "edit_unedited"]) == ["original"] * 3
    assert bool(q.loc["q1", "edit_reproduces"]) is True
    block = r.summary["panel"]["edit_test"]
    assert block["available"] is True and (block["passages_labelled"], block["moved"]) == (3, 2)
    assert block["generations"] == 8 and block["questions_tested"] == 3
    assert block["marks"]["used"]["precision"]["k"] == 2 and block["marks"]["used"]["recall"]["n"] == 2
    assert "answer_similarity_top1" not in block["marks"]  # no embeddings in this run: no such control


def test_a_run_without_the_option_makes_no_edit_generation_and_no_block():
    on, off = ScriptedGenerator(), ScriptedGenerator()
    ragray.run(ROWS, model=on, settings={**QUIET, "influence.edit_test": True}, progress=False, history=False)
    r = ragray.run(ROWS, model=off, settings=QUIET, progress=False, history=False)
    assert _calls(on) - _calls(off) == 8  # the edit test's generations, and only with the option
    assert "edit_test" not in r.summary["panel"]
    assert set(r.passages["edit_moved"]) == {None} and set(r.questions["edit_calls"]) == {None}


def test_a_year_is_replaced_by_a_year_of_the_same_shape_and_leading_digit():
    from ragray.data.edits import substitute_for

    pool = ["31 metres", "2,400", "3850", "1962", "Hester Quaile"]
    passages = [{"id": "p", "text": "first lit in 1871"}]
    assert substitute_for("1871", pool, passages, seed="q") == "1962"
    assert substitute_for("1871", ["31 metres"], passages, seed="q") == "31 metres"  # no year: any number
    assert substitute_for("Kell", pool, passages, seed="q") == "Hester Quaile"
