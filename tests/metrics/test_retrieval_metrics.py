"""Ranking metrics on hand-computed cases; chunk hits collapse to documents."""

import math

import pytest

from ragray.metrics.retrieval import doc_ranking, mean_scores, score_ranking
from ragray.types import Hit, Passage


def hits(*doc_ids):
    return [Hit(Passage(f"{d}#c{i}", "t", doc_id=d), i + 1, 1.0) for i, d in enumerate(doc_ids)]


def test_by_hand():
    s = score_ranking(hits("x", "g1", "y", "g2"), ["g1", "g2", "g3"], k=4)
    assert s.hit_at_1 == 0 and s.hit_at_5 == 1 and s.hit_at_k == 1
    assert s.mrr == pytest.approx(0.5)
    assert s.recall_at_k == pytest.approx(2 / 3) and s.precision_at_k == pytest.approx(0.5)
    dcg = 1 / math.log2(3) + 1 / math.log2(5)
    idcg = 1 + 1 / math.log2(3) + 1 / math.log2(4)
    assert s.ndcg_at_10 == pytest.approx(dcg / idcg)


def test_chunks_of_one_document_count_once():
    assert doc_ranking(hits("a", "a", "b", "a")) == ["a", "b"]
    s = score_ranking(hits("g", "g", "x"), ["g"], k=3)
    assert s.ndcg_at_10 == 1.0 and s.recall_at_k == 1.0


def test_no_gold_is_unscored_and_not_averaged():
    assert score_ranking(hits("a"), [], k=1) is None
    m = mean_scores([score_ranking(hits("a"), ["a"], 1), None, score_ranking(hits("b"), ["a"], 1)])
    assert m["n_scored"] == 2 and m["n_unscored"] == 1 and m["hit_at_1"] == 0.5


def test_empty_hits_score_zero():
    s = score_ranking([], ["a"], k=10)
    assert (s.hit_at_1, s.mrr, s.ndcg_at_10, s.recall_at_k) == (0, 0, 0, 0)


def test_matches_scipy_free_ndcg_reference_on_perfect_ranking():
    assert score_ranking(hits("a", "b"), ["a", "b"], 2).ndcg_at_10 == pytest.approx(1.0)
