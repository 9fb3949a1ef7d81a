"""Saved indexes load back to the same scores, bit for bit; a mismatched folder is refused."""

import json

import numpy as np
import pytest

from ragray.config import BM25Config, DenseConfig, HybridConfig, RetrievalConfig
from ragray.retrieval import build_retriever
from ragray.retrieval.base import Retriever
from ragray.retrieval.bm25 import BM25Retriever
from ragray.retrieval.dense import DenseRetriever
from ragray.retrieval.hybrid import HybridRetriever


@pytest.fixture(scope="module")
def corpus(dataset):
    return dataset.corpus


@pytest.fixture(scope="module")
def queries(dataset):
    return [q.question for q in dataset.questions] + ["no known words zzz"]


def saved(index, tmp_path, name="idx"):
    folder = tmp_path / name
    folder.mkdir()
    index.save(folder)
    return folder


def same_hits(a, b):
    return [[(h.passage, h.rank, h.score) for h in hits] for hits in a] == [
        [(h.passage, h.rank, h.score) for h in hits] for hits in b
    ]


@pytest.mark.parametrize("stemmer", ["none", "porter"])
def test_bm25_round_trip_is_exact(tmp_path, corpus, queries, stemmer):
    retriever = BM25Retriever(BM25Config(k1=1.2, b=0.6, stemmer=stemmer))
    built = retriever.index(corpus)
    loaded = retriever.load_index(saved(built, tmp_path), corpus)
    np.testing.assert_array_equal(loaded.scores(queries), built.scores(queries))
    assert loaded.vocab == built.vocab and same_hits(loaded.search(queries, 7), built.search(queries, 7))
    assert json.loads((tmp_path / "idx" / "vocab.json").read_text())[:3] == list(built.vocab)[:3]


def test_bm25_empty_index_round_trips(tmp_path):
    retriever = BM25Retriever()
    loaded = retriever.load_index(saved(retriever.index(()), tmp_path), ())
    assert loaded.search(["anything"], 3) == [[]]


def test_bm25_refuses_other_passages(tmp_path, corpus):
    retriever = BM25Retriever()
    folder = saved(retriever.index(corpus), tmp_path)
    with pytest.raises(ValueError, match="does not fit 6 passages"):
        retriever.load_index(folder, corpus[:6])


@pytest.mark.parametrize("kind", ["flat_ip", "flat_l2", "hnsw"])
def test_dense_round_trip_is_exact(tmp_path, corpus, queries, minilm, kind):
    retriever = DenseRetriever(DenseConfig(index=kind, hnsw_m=8, ef_search=16), minilm)
    built = retriever.index(corpus)
    folder = saved(built, tmp_path)
    assert sorted(p.name for p in folder.iterdir()) == ["index.faiss"]
    loaded = retriever.load_index(folder, corpus)
    np.testing.assert_array_equal(loaded.embeddings, built.embeddings)
    assert same_hits(loaded.search(queries, 5), built.search(queries, 5))
    if kind == "hnsw":  # ef_search is a search-time setting, taken from the config, not the file
        wider = DenseRetriever(DenseConfig(index=kind, hnsw_m=8, ef_search=64), minilm)
        assert wider.load_index(folder, corpus)._index.hnsw.efSearch == 64
        assert retriever.index_identity() == wider.index_identity()
        assert retriever.search_identity() != wider.search_identity()


def test_dense_refuses_other_passages_and_handles_empty(tmp_path, corpus, minilm):
    retriever = DenseRetriever(DenseConfig(), minilm)
    folder = saved(retriever.index(corpus), tmp_path)
    with pytest.raises(ValueError, match="holds 7 vectors, not 2"):
        retriever.load_index(folder, corpus[:2])
    empty = retriever.load_index(saved(retriever.index(()), tmp_path, "empty"), ())
    assert empty.search(["x"], 3) == [[]]


def test_hybrid_round_trip_is_exact(tmp_path, corpus, queries, minilm):
    config = HybridConfig(dense_k=4, sparse_k=4, fusion="alpha", alpha=0.3)
    retriever = HybridRetriever(DenseRetriever(DenseConfig(), minilm), BM25Retriever(), config)
    built = retriever.index(corpus)
    folder = saved(built, tmp_path)
    assert {p.name for p in folder.iterdir()} == {"dense", "sparse"}
    loaded = retriever.load_index(folder, corpus)
    assert same_hits(loaded.search(queries, 5), built.search(queries, 5))


def test_identities_name_what_decides_the_index():
    bm25 = build_retriever(RetrievalConfig(bm25=BM25Config(k1=0.9)))
    ident = bm25.index_identity()
    assert ident["bm25"]["k1"] == 0.9 and set(ident["libraries"]) == {"numpy", "scipy"}
    dense = build_retriever(RetrievalConfig(retriever="dense", dense=DenseConfig(device="cpu")))
    small = build_retriever(RetrievalConfig(retriever="dense",
                                            dense=DenseConfig(device="cpu", batch_size=3, cache=False)))
    assert dense.index_identity() == small.index_identity()  # batch size, embedding cache: no
    assert dense.index_identity()["model"].startswith("local:")
    hybrid = build_retriever(RetrievalConfig(retriever="hybrid", dense=DenseConfig(device="cpu")))
    rrf = hybrid.search_identity()
    alpha = build_retriever(RetrievalConfig(retriever="hybrid", dense=DenseConfig(device="cpu"),
                                            hybrid=HybridConfig(fusion="alpha"))).search_identity()
    assert rrf != alpha and hybrid.index_identity()["sparse"]["identity"] == ident | {
        "bm25": BM25Config().model_dump(mode="json")}


class Plain(Retriever):
    name = "plain"

    @classmethod
    def from_config(cls, config):
        return cls()

    def index(self, passages):
        return BM25Retriever().index(passages)


def test_retrievers_are_not_cached_unless_they_opt_in(tmp_path):
    from ragray.cache.keys import index_key, setup_key

    plain = Plain()
    assert plain.index_identity() is None and plain.search_identity() is None
    assert index_key("c", {}, plain) is None and setup_key("global", 3, None, {}, plain, {}) is None
    with pytest.raises(NotImplementedError, match="Plain cannot load"):
        plain.load_index(tmp_path, ())
