"""Influence ranks, Spearman ρ, dominance, states and flags on hand-computed cases."""

import math

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from scipy.stats import spearmanr

from ragray.config import InfluenceConfig
from ragray.metrics.influence import analyze_influence, influence_ranks

CFG = InfluenceConfig()
RANKS = [1, 2, 3, 4]


def test_influence_ranks_average_ties():
    assert influence_ranks([0.2, 0.9, 0.2, 0.0]).tolist() == [2.5, 1.0, 2.5, 4.0]
    r = influence_ranks([0.5, float("nan"), 0.1])
    assert r[0] == 1 and math.isnan(r[1]) and r[2] == 2


def test_aligned_is_rho_one_and_not_divergent():
    res = analyze_influence(RANKS, [0.9, 0.5, 0.2, 0.1], CFG)
    assert res.state == "measured" and res.spearman_rho == pytest.approx(1.0)
    assert res.divergent is False and res.dominance == pytest.approx(0.9 / 1.7)
    assert "single_passage_dominance" in res.flags and "divergent" not in res.flags


def test_inverted_and_buried_and_top1_ignored():
    res = analyze_influence(RANKS, [0.0, 0.1, 0.3, 0.8], CFG)
    assert res.spearman_rho == pytest.approx(-1.0)
    assert {"divergent", "inverted", "top1_ignored", "buried_evidence"} <= set(res.flags)


def test_single_used_passage():
    res = analyze_influence(RANKS, [0.0, 1.0, 0.0, 0.0], CFG)
    # influence ranks [3, 1, 3, 3]: rho = spearman([1,2,3,4], [3,1,3,3])
    want = spearmanr([1, 2, 3, 4], [3, 1, 3, 3]).statistic
    assert res.spearman_rho == pytest.approx(want)
    assert res.dominance == 1.0 and "top1_ignored" in res.flags
    assert "buried_evidence" not in res.flags  # rank 2 of 4 is not below half


@pytest.mark.parametrize(
    "influence, state, flags",
    [
        ([0.0, 0.0, 0.0, 0.0], "context_ignored", ("context_ignored",)),
        ([0.4, 0.4, 0.4, 0.4], "constant_influence", ()),
        ([0.4], "too_few_passages", ()),
        ([0.4, float("nan"), float("nan"), float("nan")], "too_few_passages", ()),
    ],
)
def test_degenerate_states_are_unmeasured(influence, state, flags):
    res = analyze_influence(list(range(1, len(influence) + 1)), influence, CFG)
    assert res.state == state and res.flags == flags
    assert res.spearman_rho is None and res.dominance is None and res.divergent is None


def test_failed_ablation_is_excluded_not_zero():
    res = analyze_influence(RANKS, [0.9, float("nan"), 0.2, 0.1], CFG)
    assert res.state == "measured" and math.isnan(res.influence_rank[1])
    assert res.spearman_rho == pytest.approx(spearmanr([1, 3, 4], [1, 2, 3]).statistic)


def test_threshold_is_configurable():
    infl = [0.5, 0.9, 0.1, 0.0]
    assert analyze_influence(RANKS, infl, CFG).divergent is False  # rho = 0.8
    assert analyze_influence(RANKS, infl, InfluenceConfig(divergence_threshold=0.9)).divergent is True


@settings(max_examples=100, deadline=None)
@given(st.lists(st.floats(0, 1), min_size=2, max_size=12))
def test_property_matches_scipy_and_ranges(infl):
    ranks = list(range(1, len(infl) + 1))
    res = analyze_influence(ranks, infl, CFG)
    if res.state == "measured":
        assert -1 <= res.spearman_rho <= 1
        assert res.spearman_rho == pytest.approx(spearmanr(ranks, influence_ranks(infl)).statistic)
        assert 1 / len(infl) - 1e-12 <= res.dominance <= 1
    else:
        assert res.spearman_rho is None
    assert np.nansum(res.influence_rank) == pytest.approx(sum(ranks))
