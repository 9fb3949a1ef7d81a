"""Hybrid fusion: RRF and alpha formulas by hand, composition of the registered retrievers."""

import pytest

from ragray.config import HybridConfig
from ragray.retrieval.base import SearchIndex
from ragray.retrieval.hybrid import HybridIndex, fuse_alpha, fuse_rrf
from ragray.types import Hit, Passage

P = {pid: Passage(pid, f"text {pid}") for pid in "abcde"}


def ranked(*pairs):
    return [Hit(P[pid], r, s) for r, (pid, s) in enumerate(pairs, start=1)]


def test_rrf_by_hand():
    fused = fuse_rrf([ranked(("a", 9), ("b", 5)), ranked(("b", 3), ("c", 1))], rrf_k=60)
    assert fused["a"] == pytest.approx(1 / 61)
    assert fused["b"] == pytest.approx(1 / 62 + 1 / 61)
    assert fused["c"] == pytest.approx(1 / 62)


def test_alpha_by_hand():
    dense = ranked(("a", 0.9), ("b", 0.5), ("c", 0.1))
    sparse = ranked(("c", 12.0), ("d", 2.0))
    fused = fuse_alpha(dense, sparse, alpha=0.25)
    assert fused["a"] == pytest.approx(0.25 * 1.0)
    assert fused["b"] == pytest.approx(0.25 * 0.5)
    assert fused["c"] == pytest.approx(0.25 * 0.0 + 0.75 * 1.0)
    assert fused["d"] == pytest.approx(0.0)


def test_alpha_constant_list_counts_as_ones():
    assert fuse_alpha(ranked(("a", 2.0), ("b", 2.0)), [], alpha=1.0) == {"a": 1.0, "b": 1.0}


class Fixed(SearchIndex):
    def __init__(self, passages, hits):
        super().__init__(passages)
        self.hits = hits
        self.asked = []

    def search(self, queries, k):
        self.asked.append(k)
        return [self.hits[:k] for _ in queries]


def test_hybrid_merges_dedupes_and_reranks():
    corpus = list(P.values())
    dense = Fixed(corpus, ranked(("a", 0.9), ("b", 0.8), ("c", 0.7)))
    sparse = Fixed(corpus, ranked(("c", 9.0), ("b", 7.0), ("d", 1.0)))
    idx = HybridIndex(corpus, dense, sparse, HybridConfig(dense_k=3, sparse_k=3))
    hits = idx.search(["q"], 3)[0]
    # c: 1/63 + 1/61 = 0.032266 > b: 1/62 + 1/62 = 0.032258 > a: 1/61 > d: 1/63
    assert [h.passage.id for h in hits] == ["c", "b", "a"]
    assert [h.rank for h in hits] == [1, 2, 3]
    assert dense.asked == [3] and sparse.asked == [3]
    assert len({h.passage.id for h in hits}) == 3


def test_hybrid_ties_follow_corpus_order():
    corpus = list(P.values())
    dense = Fixed(corpus, ranked(("d", 1.0)))
    sparse = Fixed(corpus, ranked(("b", 1.0)))
    hits = HybridIndex(corpus, dense, sparse, HybridConfig()).search(["q"], 2)[0]
    assert [h.passage.id for h in hits] == ["b", "d"]
