"""Ranking metrics at any k and diversity: hand cases, agreement with ``score_ranking``, and
pytrec_eval (trec_eval) as the oracle on synthetic runs and on SciFact retrieved with BM25."""

import math

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from ragray.config import load_config
from ragray.data import load_dataset
from ragray.errors import InputError
from ragray.metrics.retrieval import (
    diversity,
    doc_ranking,
    ndcg_at_k,
    precision_at_k,
    ranking_metrics,
    recall_at_k,
    score_ranking,
)
from ragray.retrieval.stage import RetrievalStage
from ragray.types import Hit, Passage

# ours -> pytrec_eval measure
TREC = {"ndcg_at_10": "ndcg_cut_10", "recall_at_100": "recall_100", "precision_at_5": "P_5",
        "mrr": "recip_rank"}


def test_by_hand_at_any_k():
    m = ranking_metrics(["x", "g1", "y", "g2"], {"g1", "g2", "g3"}, ks=(1, 2, 4))
    assert (m["hit_at_1"], m["hit_at_2"], m["mrr"]) == (0.0, 1.0, 0.5)
    assert m["precision_at_2"] == 0.5 and m["precision_at_4"] == 0.5
    assert m["recall_at_2"] == pytest.approx(1 / 3) and m["recall_at_4"] == pytest.approx(2 / 3)
    idcg2 = 1 + 1 / math.log2(3)
    assert m["ndcg_at_2"] == pytest.approx((1 / math.log2(3)) / idcg2)
    assert m["ndcg_at_4"] == pytest.approx(
        (1 / math.log2(3) + 1 / math.log2(5)) / (idcg2 + 1 / math.log2(4))
    )
    assert set(m) == {f"{n}_at_{k}" for n in ("hit", "precision", "recall", "ndcg")
                      for k in (1, 2, 4)} | {"mrr"}


def test_degenerate_rankings():
    assert ranking_metrics(["a"], set()) is None
    assert ranking_metrics(["a", "a", "b"], {"b"}, ks=(2,))["precision_at_2"] == 0.5  # once each
    assert ranking_metrics([], {"b"}, ks=(3,)) == {
        "hit_at_3": 0.0, "precision_at_3": 0.0, "recall_at_3": 0.0, "ndcg_at_3": 0.0, "mrr": 0.0
    }
    assert precision_at_k(["g"], {"g"}, 10) == 0.1  # divided by k, as trec_eval's P@k
    with pytest.raises(InputError, match="k must be >= 1, got 0"):
        ranking_metrics(["a"], {"a"}, ks=(0,))


RANKINGS = st.lists(st.sampled_from("abcdefghij"), max_size=10, unique=True)
GOLDS = st.sets(st.sampled_from("abcdefghijkl"), min_size=1, max_size=5)


@settings(max_examples=100, deadline=None)
@given(RANKINGS, GOLDS, st.integers(1, 12))
def test_agrees_with_score_ranking_and_bounds(ranking, gold, k):
    hits = [Hit(Passage(f"{d}#0", "t", doc_id=d), i + 1, 1.0) for i, d in enumerate(ranking)]
    s = score_ranking(hits, gold, k)
    m = ranking_metrics(ranking, gold, ks=(1, 5, 10, k))
    assert (m["hit_at_1"], m["hit_at_5"], m[f"hit_at_{k}"]) == (s.hit_at_1, s.hit_at_5, s.hit_at_k)
    assert m[f"recall_at_{k}"] == s.recall_at_k and m[f"precision_at_{k}"] == s.precision_at_k
    assert m["ndcg_at_10"] == s.ndcg_at_10 and m["mrr"] == s.mrr
    assert all(0.0 <= v <= 1.0 + 1e-12 for v in m.values())
    perfect = sorted(gold)
    assert ndcg_at_k(perfect, gold, k) == pytest.approx(1.0)
    assert recall_at_k(perfect, gold, k) == min(k, len(gold)) / len(gold)


@settings(max_examples=60, deadline=None)
@given(st.lists(st.tuples(RANKINGS, GOLDS), min_size=1, max_size=5))
def test_equals_pytrec_eval_on_synthetic_runs(queries):
    pytrec_eval = pytest.importorskip("pytrec_eval")
    queries = [(r, g) for r, g in queries if r]  # trec_eval drops queries with nothing retrieved
    if not queries:
        return
    qrels = {f"q{i}": {d: 1 for d in g} for i, (_, g) in enumerate(queries)}
    run = {f"q{i}": {d: 1000.0 - r for r, d in enumerate(rk)} for i, (rk, _) in enumerate(queries)}
    theirs = pytrec_eval.RelevanceEvaluator(qrels, {"ndcg_cut.3", "P.2", "recall.5"}).evaluate(run)
    for i, (ranking, gold) in enumerate(queries):
        ours = ranking_metrics(ranking, gold, ks=(2, 3, 5))
        t = theirs[f"q{i}"]
        assert abs(ours["ndcg_at_3"] - t["ndcg_cut_3"]) <= 1e-12
        assert abs(ours["precision_at_2"] - t["P_2"]) <= 1e-12
        assert abs(ours["recall_at_5"] - t["recall_5"]) <= 1e-12


@pytest.mark.realdata
def test_scifact_bm25_per_query_equals_pytrec_eval(shared_data):
    pytrec_eval = pytest.importorskip("pytrec_eval")
    config = load_config(overrides=[
        f"data.path={shared_data / 'scifact.jsonl'}", "retrieval.scope=global", "retrieval.top_k=100",
    ])
    qrels, run, ours = {}, {}, {}
    for result in RetrievalStage(config).run(load_dataset(config.data), progress=False):
        q = result.question
        ranking = doc_ranking(result.hits)
        qrels[q.id] = {d: 1 for d in q.gold_passage_ids}
        # scores strictly decreasing with rank, so trec_eval's tie-breaking cannot reorder
        run[q.id] = {d: 1000.0 - r for r, d in enumerate(ranking)}
        ours[q.id] = ranking_metrics(ranking, q.gold_passage_ids, ks=(5, 10, 100))
    evaluator = pytrec_eval.RelevanceEvaluator(qrels, {"ndcg_cut.10", "recall.100", "P.5", "recip_rank"})
    theirs = evaluator.evaluate(run)
    assert len(ours) == 300 and set(theirs) == set(ours)
    for qid, m in ours.items():
        for key, trec in TREC.items():
            assert abs(m[key] - theirs[qid][trec]) <= 1e-9, (qid, key, m[key], theirs[qid][trec])
    for key, trec in TREC.items():
        mean_ours = np.mean([m[key] for m in ours.values()])
        mean_theirs = np.mean([t[trec] for t in theirs.values()])
        print(f"{key}: ragray {mean_ours:.6f}  pytrec_eval {mean_theirs:.6f}")
        assert abs(mean_ours - mean_theirs) <= 1e-9
    assert 0.64 <= np.mean([m["ndcg_at_10"] for m in ours.values()]) <= 0.69  # BEIR BM25: 0.665


# --- diversity ------------------------------------------------------------------------------


def test_diversity_by_hand():
    assert diversity(np.eye(3)) == pytest.approx(1.0)  # orthogonal
    assert diversity(np.array([[1.0, 2.0], [2.0, 4.0]])) == pytest.approx(0.0)  # same direction
    assert diversity(np.array([[1.0, 0.0], [-3.0, 0.0]])) == pytest.approx(2.0)  # opposite
    # cosines 0, 1/√2, 1/√2
    assert diversity(np.array([[1.0, 0.0], [0.0, 1.0], [1.0, 1.0]])) == pytest.approx(
        1 - math.sqrt(2) / 3
    )
    assert diversity(np.array([[1.0, 0.0], [0.0, 0.0]])) == pytest.approx(1.0)  # zero row: cos 0
    assert diversity(np.zeros((1, 4))) is None and diversity(np.zeros((0, 4))) is None
    with pytest.raises(InputError, match="2-d matrix"):
        diversity(np.zeros(3))


@settings(max_examples=50, deadline=None)
@given(st.integers(2, 6), st.integers(1, 5), st.integers(0, 2**32 - 1))
def test_diversity_equals_pairwise_loop(n, dim, seed):
    x = np.random.default_rng(seed).normal(size=(n, dim))
    cos = [x[i] @ x[j] / (np.linalg.norm(x[i]) * np.linalg.norm(x[j]))
           for i in range(n) for j in range(i + 1, n)]
    assert diversity(x) == pytest.approx(1 - np.mean(cos), abs=1e-12)
