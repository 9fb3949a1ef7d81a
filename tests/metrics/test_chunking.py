"""Chunking metrics: lengths and coverage by hand, cohesion/separation against numpy cosines of
the packaged MiniLM, pair selection and sampling with a fake encoder."""

import itertools

import numpy as np
import pytest

from ragray.encoders import resolve_model_path
from ragray.errors import InputError
from ragray.metrics.chunking import chunk_metrics
from ragray.types import Passage


@pytest.fixture(scope="module")
def enc(minilm):
    return minilm



class Fixed:
    """A fake encoder: each text's vector from a table (``default`` for any other text)."""

    def __init__(self, vectors, default=None):
        self.vectors, self.default = vectors, default

    def encode(self, texts, normalize=True, cache=False):
        return np.array([self.vectors.get(t, self.default) for t in texts], dtype=np.float64)


def chunk(doc, pos, text):
    return Passage(f"{doc}#{pos}", text, doc_id=doc, position=pos)


def unit(e):
    e = np.asarray(e, dtype=np.float64)
    return e / np.linalg.norm(e, axis=1, keepdims=True)


def test_lengths_and_coverage_by_hand():
    chunks = [chunk("d", 0, "The Eiffel Tower is in"), chunk("d", 1, "Paris, France."), chunk("e", 0, "x")]
    m = chunk_metrics(chunks, Fixed({}, [1.0, 0.0]), answers=["eiffel tower", "PARIS", "in Paris", " "])
    assert m["n_chunks"] == 3 and m["n_sampled"] == 3
    assert m["tokens_mean"] == pytest.approx(8 / 3)
    assert m["tokens_std"] == pytest.approx(np.std([5, 2, 1]))
    # "in Paris" is cut by the chunk boundary; the blank answer is ignored
    assert m["coverage"] == pytest.approx(2 / 3)
    assert m["separation"] == 1.0 and m["n_separation_pairs"] == 1
    assert chunk_metrics(chunks, Fixed({}, [1.0, 0.0]))["coverage"] is None


def test_token_lengths_with_the_minilm_tokenizer():
    transformers = pytest.importorskip("transformers")
    tok = transformers.AutoTokenizer.from_pretrained(resolve_model_path("minilm"))
    texts = ["Unbelievably, tokenizers split words.", "Paris"]
    m = chunk_metrics([chunk(t, 0, t) for t in texts], Fixed({}), tokenizer=tok)
    lengths = [len(tok.tokenize(t)) for t in texts]  # word pieces, no [CLS]/[SEP]
    assert lengths[0] > 5 and lengths[1] == 1
    assert m["tokens_mean"] == pytest.approx(np.mean(lengths))
    assert m["tokens_std"] == pytest.approx(np.std(lengths))


def test_separation_pairs_consecutive_chunks_of_a_document():
    vectors = {"a0": [1.0, 0.0], "a1": [1.0, 1.0], "a2": [0.0, 2.0], "b0": [1.0, 0.0]}
    chunks = [chunk("A", 2, "a2"), chunk("B", 0, "b0"), chunk("A", 0, "a0"), chunk("A", 1, "a1")]
    m = chunk_metrics(chunks, Fixed(vectors))
    # pairs (a0, a1) and (a1, a2), both at 45°; b0 has no neighbour; one-sentence chunks only
    assert m["n_separation_pairs"] == 2 and m["separation"] == pytest.approx(np.sqrt(0.5))
    assert m["cohesion"] is None and m["cohesion_minus_separation"] is None


def test_cohesion_and_separation_equal_numpy_cosines(enc, counting_encoder):
    texts = [
        "The Eiffel Tower is in Paris. It was finished in 1889. Bananas are yellow.",
        "Gustave Eiffel's company built it. Millions visit it every year.",
        "Single sentence chunk without a second one",
    ]
    counting = counting_encoder(enc)
    m = chunk_metrics([chunk("d", i, t) for i, t in enumerate(texts)], counting)
    assert len(counting.calls) == 1
    s0 = unit(enc.encode(["The Eiffel Tower is in Paris.", "It was finished in 1889.",
                          "Bananas are yellow."], cache=False))
    s1 = unit(enc.encode(["Gustave Eiffel's company built it.", "Millions visit it every year."],
                         cache=False))
    coh0 = np.mean([s0[i] @ s0[j] for i, j in itertools.combinations(range(3), 2)])
    coh1 = s1[0] @ s1[1]
    c = unit(enc.encode(texts, cache=False))
    assert m["n_cohesion_chunks"] == 2
    assert m["cohesion"] == pytest.approx((coh0 + coh1) / 2, abs=1e-5)
    assert m["separation"] == pytest.approx((c[0] @ c[1] + c[1] @ c[2]) / 2, abs=1e-5)
    assert m["cohesion_minus_separation"] == pytest.approx(m["cohesion"] - m["separation"])


def test_one_topic_chunks_are_more_cohesive_than_mixed_ones(enc):
    focused = chunk("f", 0, "The Eiffel Tower is in Paris. The iron tower was finished in 1889 "
                            "for the World's Fair in Paris.")
    mixed = chunk("m", 0, "The Eiffel Tower is in Paris. Bananas are rich in potassium.")
    assert chunk_metrics([focused], enc)["cohesion"] > chunk_metrics([mixed], enc)["cohesion"] + 0.2


def test_sampling_is_seeded_and_bounded(counting_encoder):
    chunks = [chunk("d", i, f"t{i}. Next {i}.") for i in range(10)]
    vectors = {t: np.random.default_rng(len(t) + i).normal(size=4)
               for i, c in enumerate(chunks) for t in (c.text, f"t{i}.", f"Next {i}.")}
    counting = counting_encoder(Fixed(vectors))
    a = chunk_metrics(chunks, counting, max_chunks=3, seed=7)
    b = chunk_metrics(chunks, Fixed(vectors), max_chunks=3, seed=7)
    assert a == b and a["n_chunks"] == 10 and a["n_sampled"] == 3
    assert a["n_cohesion_chunks"] == 3 and a["n_separation_pairs"] <= 3
    assert len(counting.calls[0]) <= 3 * 2 + 6  # sampled chunks' sentences + pairs' chunks
    assert a["tokens_mean"] == 3.0  # lengths always use every chunk
    assert chunk_metrics(chunks, Fixed(vectors), max_chunks=20)["n_sampled"] == 10


def test_empty_corpus_and_bad_arguments(counting_encoder):
    counting = counting_encoder(Fixed({}))
    m = chunk_metrics([], counting, answers=["x"])
    assert m["n_chunks"] == 0 and m["tokens_mean"] is None and m["cohesion"] is None
    assert m["coverage"] == 0.0 and counting.calls == []
    with pytest.raises(InputError, match="max_chunks must be >= 1, got 0"):
        chunk_metrics([], counting, max_chunks=0)
    with pytest.raises(InputError, match="answers must be a list of strings"):
        chunk_metrics([], counting, answers="Paris")
