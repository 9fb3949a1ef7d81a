"""Answer similarities: rouge-score as the oracle, the degenerate-input convention, hand cases."""

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from rouge_score import rouge_scorer

from ragray.errors import ConfigError
from ragray.metrics.similarity import SIMILARITIES, get_similarity, normalize_answer

ROUGE = rouge_scorer.RougeScorer(["rougeL"])


@pytest.mark.parametrize(
    "a, b",
    [
        ("the ferry Tern", "Tern ferry"),
        ("14 October 1871", "October 1871"),
        ("Aldous Penhallow", "Penhallow, the engineer"),
        ("29 members", "thirty-one members"),
    ],
)
def test_rouge_l_equals_rouge_score(a, b):
    assert get_similarity("rouge_l")(a, b) == pytest.approx(ROUGE.score(a, b)["rougeL"].fmeasure)


@pytest.mark.parametrize("name", SIMILARITIES.names())
def test_degenerate_convention(name):
    sim = get_similarity(name)
    assert sim("", "") == 1.0 and sim("  x ", "x") == 1.0
    assert sim("", "Port Anselm") == 0.0 and sim("Port Anselm", " ") == 0.0
    assert sim("...", "...") == 1.0  # rouge-score alone would say 0 for punctuation only


def test_exact_match_normalizes_like_squad():
    em = get_similarity("exact_match")
    assert normalize_answer("The  Tern!") == "tern"
    assert em("The Tern.", "tern") == 1.0 and em("Tern", "Kestrel") == 0.0


def test_token_jaccard_and_edit_by_hand():
    assert get_similarity("token_jaccard")("red ferry boat", "red boat") == pytest.approx(2 / 3)
    assert get_similarity("edit")("kell", "kelp") == pytest.approx(0.75)


SIMS: dict = {}


@settings(max_examples=80, deadline=None)
@given(st.text(max_size=30), st.text(max_size=30))
def test_all_in_unit_interval_and_symmetric(a, b):
    for name in SIMILARITIES.names():
        sim = SIMS.get(name) or SIMS.setdefault(name, get_similarity(name))
        v = sim(a, b)
        assert 0.0 <= v <= 1.0
        if name != "bleu":  # BLEU scores a hypothesis against a reference: not symmetric
            assert v == pytest.approx(sim(b, a), abs=1e-6)


def test_unknown_similarity_lists_valid():
    with pytest.raises(ConfigError, match="unknown similarity 'bleurt'; valid: bleu, edit, exact_match, rouge_l, semantic, token_jaccard"):
        get_similarity("bleurt")
