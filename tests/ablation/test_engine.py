"""The ablation engine: each distinct prompt paid once, one backend call per batch, the cost
counted, and the two ways to measure an ablation (regenerate and compare, or score log-probs)."""

from __future__ import annotations

import math

import pytest

from ragray.ablation.engine import SCORERS, CallBook, GenerateScorer, LogprobScorer, kept_share
from ragray.generation.base import Generation, Message
from ragray.generation.scripted import ScriptedGenerator
from ragray.metrics.similarity import get_similarity


def prompt(text: str):
    return (Message("user", text),)


class Counting(ScriptedGenerator):
    """Scripted answers; counts backend calls and what each scored."""

    def __init__(self, fail_on=None):
        super().__init__(fail_on=fail_on)
        self.score_batches: list[int] = []

    def logprobs(self, prompts, answers):
        self.score_batches.append(len(prompts))
        return [-float(len(p[-1].content)) / 10 if a else 0.0 for p, a in zip(prompts, answers)]


def test_kept_share_is_the_probability_kept():
    assert kept_share(-2.0, -2.0) == 1.0
    assert kept_share(-1.0, -2.0) == 1.0  # more likely without the passage: nothing lost
    assert kept_share(-2.0 - math.log(4), -2.0) == pytest.approx(0.25)


def test_the_book_pays_each_prompt_once_in_one_call():
    gen = Counting()
    book = CallBook(gen)
    a, b = prompt("ANSWER=tern"), prompt("ANSWER=skua")
    book.request(4)
    assert [g.text for g in book.generate([a, b, a, b])] == ["tern", "skua", "tern", "skua"]
    assert gen.batches == [2] and book.generated == 2
    assert [g.text for g in book.generate([b, prompt("ANSWER=auk")])] == ["skua", "auk"]
    assert gen.batches == [2, 1]  # only the new prompt went out
    s1 = book.logprobs([a, b, a], ["tern", "tern", "tern"])
    assert s1[0] == s1[2] and gen.score_batches == [2] and book.score_passes == 2
    assert book.logprobs([a], ["skua"]) and gen.score_batches == [2, 1]  # another answer: another pass
    assert book.known_score(b, "tern") == s1[1] and book.known_score(b, "auk") is None
    assert book.cost.requested == 4 and book.cost.generated == 3 and book.cost.score_passes == 3


def test_generate_scorer_compares_each_order_with_its_own_baseline():
    book = CallBook(Counting())
    scorer = SCORERS.get("generate")(get_similarity("exact_match"))
    forward = [prompt("ANSWER=tern"), prompt("ANSWER=tern"), prompt("ANSWER=skua")]
    control = [prompt("ANSWER=skua x"), prompt("ANSWER=tern y")]
    m = scorer.measure(book, [forward, control])
    assert isinstance(scorer, GenerateScorer) and not m.scored
    assert m.similarities == [[1.0, 1.0, 0.0], [1.0, 0.0]]
    assert [len(g) for g in m.gens] == [3, 2] and book.generated == 4  # the repeated prompt once


def test_logprob_scorer_generates_only_baselines_and_keeps_shares():
    gen = Counting()
    book = CallBook(gen)
    scorer = SCORERS.get("logprob")(None)
    orders = [[prompt("ANSWER=tern"), prompt("ANSWER=tern and more words"), prompt("x")],
              [prompt("ANSWER=skua"), prompt("y")]]
    m = scorer.measure(book, orders)
    assert isinstance(scorer, LogprobScorer) and m.scored
    assert gen.batches == [2] and gen.score_batches == [5]  # baselines in one call, every arm in one
    assert [len(g) for g in m.gens] == [1, 1] and m.similarities[0][0] == 1.0
    assert m.similarities[0][1] == pytest.approx(math.exp(-(len("ANSWER=tern and more words") - len("ANSWER=tern")) / 10))
    assert m.similarities[0][2] == 1.0  # a shorter prompt scores higher here: nothing lost


def test_a_failed_first_baseline_stops_log_prob_scoring():
    gen = Counting(fail_on="BOOM")
    m = SCORERS.get("logprob")(None).measure(CallBook(gen), [[prompt("BOOM"), prompt("ANSWER=a")]])
    assert not m.scored and not m.gens[0][0].ok and gen.score_batches == []
    assert all(math.isnan(s) for s in m.similarities[0])


def test_modes_are_registered_scorers():
    assert SCORERS.names() == ["generate", "jsd", "logprob"]
    assert isinstance(Generation("a", 1, 1, 0.0), Generation)
