"""Explanation units, the contexts left after removing them, arms, importance and the surrogate."""

import itertools

import numpy as np
import pytest

from ragray.faithfulness.arms import question_rng, random_draws, resolve_k
from ragray.faithfulness.importance import buckets, normalize, rank_units
from ragray.attribution.measures import lasso_weights
from ragray.attribution.linear import fit_lasso
from ragray.faithfulness.units import Context, units_in
from ragray.types import Passage

P = (
    Passage("a", "First one here. Second one there.", title="A"),
    Passage("b", "Only sentence."),
    Passage("c", "Alpha beta. Gamma delta epsilon."),
)


def texts(passages):
    return [p.text for p in passages]


def test_passage_units_remove_whole_passages_and_keep_order():
    ctx = Context.at_level(P, "passage")
    assert [u.id for u in ctx.units] == ["a", "b", "c"]
    assert texts(ctx.without([1])) == [P[0].text, P[2].text]
    assert ctx.without([]) == P
    assert [p.id for p in ctx.without([], order=(2, 0, 1))] == ["c", "a", "b"]


def test_sentence_units_cut_exact_spans_and_drop_emptied_passages():
    ctx = Context.at_level(P, "sentence")
    assert [u.id for u in ctx.units] == ["a#s0", "a#s1", "b#s0", "c#s0", "c#s1"]
    assert [u.text for u in ctx.units][:2] == ["First one here.", "Second one there."]
    out = ctx.without([0, 2, 4])
    assert texts(out) == ["Second one there.", "Alpha beta."]  # b lost its only sentence: dropped
    assert out[0].title == "A"  # everything not removed is kept, titles included
    assert texts(ctx.without([1])) == ["First one here.", P[1].text, P[2].text]


def test_token_units_and_hierarchical_refinement():
    flat = Context.at_level(P, "token")
    assert len(flat) == sum(len(p.text.split()) for p in P)
    sentences = Context.at_level(P, "sentence")
    tokens = units_in(P, [sentences.units[4]], "token")  # inside "Gamma delta epsilon."
    assert [u.id for u in tokens] == ["c#s1.t0", "c#s1.t1", "c#s1.t2"]
    ctx = Context(P, tokens)
    assert texts(ctx.without([1])) == [P[0].text, P[1].text, "Alpha beta. Gamma epsilon."]
    assert texts(ctx.without([2])) == [P[0].text, P[1].text, "Alpha beta. Gamma delta"]
    passages = Context.at_level(P, "passage")
    assert [u.id for u in units_in(P, [passages.units[2]], "sentence")] == ["c#s0", "c#s1"]


def test_resolve_k_labels():
    assert resolve_k("top-1", 10) == 1
    assert resolve_k("top-3", 10) == 3
    assert resolve_k("top-20%", 10) == 2
    assert resolve_k("top-20%", 3) == 1  # at least one unit
    assert resolve_k("top-3", 3) is None  # removes everything: most = least = random
    assert resolve_k("top-100%", 7) is None


def test_random_draws_exhaustive_when_few_and_distinct_seeded_otherwise():
    small = random_draws(5, 2, 50, question_rng(0, "q", 2))
    assert small.exhaustive and small.population == 10
    assert set(small.subsets) == set(itertools.combinations(range(5), 2))
    a = random_draws(10, 3, 50, question_rng(0, "q", 3))
    b = random_draws(10, 3, 50, question_rng(0, "q", 3))
    c = random_draws(10, 3, 50, question_rng(1, "q", 3))
    assert a == b and a != c and not a.exhaustive and a.population == 120
    assert len(set(a.subsets)) == 50 and all(len(s) == 3 and list(s) == sorted(s) for s in a.subsets)


def test_normalize_rank_and_buckets():
    assert normalize([0.2, 0.4, -0.1, 0.0]) == [0.5, 1.0, 0.0, 0.0]
    assert normalize([0.0, 0.0]) == [0.0, 0.0]
    nan = normalize([0.5, float("nan")])
    assert nan[0] == 1.0 and np.isnan(nan[1])
    order = rank_units([0.1, 1.0, float("nan"), 0.5, 0.0], np.random.default_rng(0))
    assert order == [1, 3, 0, 4, 2]  # NaN ranks last
    ties = {tuple(rank_units([0.0] * 6, np.random.default_rng(s))) for s in range(20)}
    assert len(ties) > 1  # ties broken at random, not by position
    b = buckets(list(range(10)), 0.2, 0.3)
    assert [b[i] for i in range(10)] == ["most"] * 2 + ["important"] * 5 + ["least"] * 3


def test_nonnegative_lasso_matches_scikit_learn():
    sklearn = pytest.importorskip("sklearn.linear_model")
    rng = np.random.default_rng(3)
    X = (rng.random((80, 12)) < 0.3).astype(float)
    true = np.array([0.8, 0, 0, 0.3, 0, 0, 0, 0, 0.5, 0, 0, 0])
    y = X @ true - 0.2 * X[:, 5] + rng.normal(0, 0.02, 80)
    w, b = fit_lasso(X, y, 0.01, positive=True)
    ref = sklearn.Lasso(alpha=0.01, positive=True, tol=1e-12, max_iter=100000).fit(X, y)
    np.testing.assert_allclose(w, ref.coef_, atol=1e-6)
    assert b == pytest.approx(ref.intercept_, abs=1e-6)
    assert (w >= 0).all() and w[5] == 0.0


def test_surrogate_recovers_the_used_unit_from_random_draws():
    rng = question_rng(0, "s", 3)
    draws = random_draws(10, 3, 50, rng).subsets
    sims = [0.0 if 4 in d else 1.0 for d in draws]  # the answer needs unit 4
    everything = frozenset(range(10))
    w = lasso_weights(10, [(everything - set(d), 1.0 - s) for d, s in zip(draws, sims)], 0.01, positive=True,
                      removed=True, minimum=2)
    assert int(np.argmax(w)) == 4 and w[4] > 0.9
    assert all(np.isnan(lasso_weights(3, [(frozenset({1, 2}), 0.0)], 0.01, minimum=2)))  # too few draws
