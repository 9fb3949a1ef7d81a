"""Semantic (packaged MiniLM) and BLEU (sacrebleu as the oracle) similarities; measure helpers."""

import math

import pytest
import sacrebleu
from hypothesis import given, settings
from hypothesis import strategies as st

from ragray.errors import ConfigError
from ragray.metrics.similarity import (
    SIMILARITIES,
    Similarity,
    all_measures,
    get_similarity,
    score_pairs,
)

# --- semantic ---------------------------------------------------------------------------------

PARAPHRASE = ("A cat sits on the mat.", "A kitten is sitting on a rug.")
UNRELATED = ("A cat sits on the mat.", "Stock markets fell sharply today.")


@pytest.fixture(scope="session")
def semantic() -> Similarity:
    return SIMILARITIES.get("semantic")(model="minilm", device="cpu")


def test_semantic_paraphrase_beats_unrelated(semantic):
    para, unrel = semantic(*PARAPHRASE), semantic(*UNRELATED)
    assert 0.0 <= unrel < para <= 1.0
    assert para > 0.5 and unrel < 0.3


def test_semantic_degenerate_convention(semantic):
    assert semantic("Port Anselm", "  Port Anselm ") == 1.0
    assert semantic("", "") == 1.0
    assert semantic("", "Port Anselm") == 0.0 and semantic("Port Anselm", "\n") == 0.0


def test_semantic_many_equals_single_calls_and_encodes_once(semantic, monkeypatch):
    pairs = [
        PARAPHRASE,
        UNRELATED,
        ("Paris", "paris"),
        ("the ferry Tern", "Tern"),
        (" Tern", "the ferry Tern"),  # repeats texts of other pairs (after stripping)
        ("x", "x"),
        ("", "Kestrel"),
        ("1871", "October 1871"),
    ]
    singles = [semantic(a, b) for a, b in pairs]
    calls: list[list[str]] = []
    encode = semantic.encoder.encode

    def counting(texts, *args, **kwargs):
        calls.append(list(texts))
        return encode(texts, *args, **kwargs)

    monkeypatch.setattr(semantic.encoder, "encode", counting)
    batched = semantic.many(pairs)
    assert batched == pytest.approx(singles, abs=1e-6)
    assert all(0.0 <= v <= 1.0 for v in batched)
    assert batched[5] == 1.0 and batched[6] == 0.0
    assert len(calls) == 1  # one batch, each distinct text once, convention-only texts skipped
    assert sorted(calls[0]) == sorted(
        {"A cat sits on the mat.", "A kitten is sitting on a rug.",
         "Stock markets fell sharply today.", "Paris", "paris", "the ferry Tern", "Tern",
         "1871", "October 1871"}
    )
    calls.clear()
    assert semantic.many([("a", "a"), ("", "b")]) == [1.0, 0.0] and calls == []
    assert semantic.many([]) == []


def test_semantic_by_name_without_arguments():
    sim = get_similarity("semantic")
    assert sim.encoder.model_name == "minilm"
    assert sim("Tern", "Tern") == 1.0


# --- BLEU -------------------------------------------------------------------------------------

# (reference a, hypothesis b)
BLEU_PAIRS = [
    ("Paris", "in Paris"),
    ("Paris", "London"),
    ("in Paris", "Paris"),
    ("Aldous Penhallow", "Penhallow"),
    ("the ferry Tern", "Tern ferry"),
    ("14 October 1871", "October 1871"),
    ("29 members", "thirty-one members"),
    ("yes", "Yes"),
    ("no", "no."),
    ("New York City", "New York"),
    ("The cat sat on the mat.", "The cat sat on the mat"),
    ("the cat sat on the mat", "the cat sat on"),
    ("the cat sat on the mat", "the the the the the the the"),
    ("the the the", "the the the the the the"),
    ("a b c d e", "e d c b a"),
    ("a b c d e f g", "a b c x e f g"),
    ("Hello, world.", "Hello world!"),
    ("It costs $1,000.50 (approx.)", "It costs 1,000.50 dollars, approximately."),
    ("The 1990-1995 period", "The period 1990 - 1995"),
    ("e-mail & web", "email &amp; web"),
    ("&quot;quoted&quot; text", '"quoted" text'),
    ("x<skipped>y and z", "x y and z"),
    ("line one-\ncontinued here", "line onecontinued here"),
    ("first line\nsecond line", "first line second line"),
    ("U.S.A. is big", "USA is big"),
    ("3.14 is pi, roughly", "pi is roughly 3.14"),
    ("He said: 'go!'", "He said go"),
    ("The Eiffel Tower was completed in 1889 for the World's Fair in Paris.",
     "The Eiffel Tower, finished in 1889, was built for the Paris World's Fair."),
    ("Marie Curie won the Nobel Prize in Physics in 1903 and in Chemistry in 1911.",
     "Curie received Nobel Prizes in 1903 (Physics) and 1911 (Chemistry)."),
    ("Photosynthesis converts light energy into chemical energy stored in glucose.",
     "Plants use photosynthesis to turn sunlight into chemical energy."),
    ("The mitochondria is the powerhouse of the cell", "Quantum chromodynamics describes quarks"),
    ("one two three four five six seven eight nine ten",
     "one two three four five six seven eight nine ten eleven twelve"),
    ("Café naïve résumé", "Cafe naive resume"),
    ("Ünïcödé — dashes – and “quotes”", "Ünïcödé dashes and quotes"),
    ("   padded answer  ", "padded answer ."),
    ("A", "A A A A"),
    ("<skipped>", "something"),
]


@pytest.mark.parametrize("ref, hyp", BLEU_PAIRS)
def test_bleu_equals_sacrebleu(ref, hyp):
    expected = sacrebleu.sentence_bleu(hyp, [ref]).score / 100
    assert get_similarity("bleu")(ref, hyp) == pytest.approx(expected, abs=1e-9)


def test_bleu_by_hand():
    bleu = get_similarity("bleu")
    # unigram 1/2, bigram 0/1 smoothed to 1/(2*1); effective order 2: sqrt(1/2 * 1/2)
    assert bleu("Paris", "in Paris") == pytest.approx(0.5)
    # every n-gram matches; brevity penalty exp(1 - 6/4)
    assert bleu("the cat sat on the mat", "the cat sat on") == pytest.approx(math.exp(-0.5))
    assert bleu("Paris", "London") == 0.0
    # not symmetric: a is the reference
    assert bleu("the cat sat on the mat", "the cat sat on") != bleu(
        "the cat sat on", "the cat sat on the mat"
    )


_WORDS = st.sampled_from(
    ["the", "The", "cat", "sat", "on", "mat", "1,000", "3.5", "U.S.", "-", "e-mail", "(x)",
     "don't", "&amp;", "&quot;", "<skipped>", "\n", "-\n", ".", ",", "!", "1990-1995", "é", ""]
)
_ANSWERS = st.one_of(
    st.lists(_WORDS, max_size=12).map(" ".join),
    st.lists(_WORDS, max_size=8).map("".join),
    st.text(max_size=40),
)


@settings(max_examples=300, deadline=None)
@given(_ANSWERS, _ANSWERS)
def test_bleu_property_matches_sacrebleu(ref, hyp):
    value = get_similarity("bleu")(ref, hyp)
    assert 0.0 <= value <= 1.0
    r, h = ref.strip(), hyp.strip()
    if r == h:
        assert value == 1.0
    elif not r or not h:
        assert value == 0.0
    else:
        expected = sacrebleu.sentence_bleu(hyp, [ref]).score / 100
        assert value == pytest.approx(expected, abs=1e-9)


# --- several measures -------------------------------------------------------------------------


def test_all_measures_and_score_pairs():
    measures = all_measures(["token_jaccard", "bleu", "edit", "bleu"])
    assert list(measures) == ["token_jaccard", "bleu", "edit"]
    assert all(isinstance(m, Similarity) and m.name == n for n, m in measures.items())
    pairs = [("red ferry boat", "red boat"), ("Paris", "in Paris"), ("", "x"), ("kell", "kelp")]
    scores = score_pairs(measures, iter(pairs))
    assert scores == {name: [m(a, b) for a, b in pairs] for name, m in measures.items()}
    assert scores["token_jaccard"][0] == pytest.approx(2 / 3)
    assert scores["bleu"][1] == pytest.approx(0.5) and scores["edit"][2] == 0.0
    assert score_pairs({}, pairs) == {} and score_pairs(measures, []) == {n: [] for n in measures}


def test_all_measures_unknown_name_lists_valid():
    with pytest.raises(
        ConfigError, match="unknown similarity 'bleurt'; valid: bleu, edit, exact_match, rouge_l, "
        "semantic, token_jaccard"
    ):
        all_measures(["bleu", "bleurt"])
