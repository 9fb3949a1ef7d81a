"""Faithfulness statistics against direct scipy calls and hand computations; degenerate inputs."""

import json
import math
import statistics

import numpy as np
import pytest
from scipy import stats as sps

from ragray.errors import InputError
from ragray.metrics.stats import (
    mcnemar_exact,
    mean_ci,
    one_sided_vs_constant,
    paired_tests,
    share_ci,
    sign_test,
    stratified_rank_test,
)

VALUES = [0.91, 0.42, 0.77, 0.63, 0.88, 0.35, 0.70]


def _json_clean(obj):
    """Serializable with NaN/inf forbidden."""
    return json.loads(json.dumps(obj, allow_nan=False)) == obj


# --- mean_ci ----------------------------------------------------------------------------------


def test_mean_ci_equals_scipy_t_interval():
    ci = mean_ci(VALUES, confidence=0.9)
    low, high = sps.t.interval(0.9, len(VALUES) - 1, loc=np.mean(VALUES), scale=sps.sem(VALUES))
    assert ci["n"] == 7 and ci["reason"] is None
    assert ci["mean"] == pytest.approx(np.mean(VALUES), abs=1e-12)
    assert ci["sd"] == pytest.approx(np.std(VALUES, ddof=1), abs=1e-12)
    assert (ci["low"], ci["high"]) == pytest.approx((low, high), abs=1e-12)
    assert _json_clean(ci)


def test_mean_ci_finite_population_correction():
    n, big_n = len(VALUES), 20
    ci = mean_ci(VALUES, population=big_n)
    se = np.std(VALUES, ddof=1) / math.sqrt(n) * math.sqrt((big_n - n) / (big_n - 1))
    half = sps.t.ppf(0.975, n - 1) * se
    mean = np.mean(VALUES)
    assert (ci["low"], ci["high"]) == pytest.approx((mean - half, mean + half), abs=1e-12)
    plain = mean_ci(VALUES)
    assert ci["high"] - ci["low"] < plain["high"] - plain["low"]


def test_mean_ci_census_and_tiny_samples():
    full = mean_ci(VALUES, population=len(VALUES))
    assert full["low"] == full["high"] == full["mean"]
    one_of_one = mean_ci([0.4], population=1)
    assert one_of_one == {"mean": 0.4, "low": 0.4, "high": 0.4, "sd": None, "n": 1, "reason": None}
    one = mean_ci([0.4])
    assert one == {"mean": 0.4, "low": None, "high": None, "sd": None, "n": 1,
                   "reason": "fewer than 2 values"}
    assert mean_ci([]) == {"mean": None, "low": None, "high": None, "sd": None, "n": 0,
                           "reason": "no values"}
    constant = mean_ci([0.1] * 5)
    assert constant["sd"] == 0.0 and constant["low"] == constant["high"] == constant["mean"]
    assert all(_json_clean(r) for r in (full, one_of_one, one, constant))


def test_mean_ci_rejects_bad_input():
    with pytest.raises(
        InputError, match=r"population must be an integer >= the number of values \(7\), got 5"
    ):
        mean_ci(VALUES, population=5)
    with pytest.raises(InputError, match="confidence must be in"):
        mean_ci(VALUES, confidence=1.0)
    with pytest.raises(InputError, match="values must be finite"):
        mean_ci([0.5, float("nan")])


# --- one_sided_vs_constant --------------------------------------------------------------------


@pytest.mark.parametrize("alternative", ["greater", "less"])
@pytest.mark.parametrize("c", [0.5, 0.66, 0.8])
def test_one_sided_equals_scipy_ttest_1samp(c, alternative):
    expected = sps.ttest_1samp(VALUES, c, alternative=alternative).pvalue
    got = one_sided_vs_constant(VALUES, c, alternative=alternative)
    assert got == pytest.approx(expected, abs=1e-12)


def test_one_sided_with_fpc_by_hand():
    n, big_n, c = len(VALUES), 12, 0.55
    se = np.std(VALUES, ddof=1) / math.sqrt(n) * math.sqrt((big_n - n) / (big_n - 1))
    t = (np.mean(VALUES) - c) / se
    assert one_sided_vs_constant(VALUES, c, population=big_n) == pytest.approx(sps.t.sf(t, n - 1))
    assert one_sided_vs_constant(VALUES, c, population=big_n, alternative="less") == pytest.approx(
        sps.t.cdf(t, n - 1)
    )
    # the correction shrinks the standard error: stronger evidence than without it
    assert one_sided_vs_constant(VALUES, c, population=big_n) < one_sided_vs_constant(VALUES, c)


def test_one_sided_zero_standard_error():
    census = {"population": len(VALUES)}
    mean = float(np.mean(VALUES))
    assert one_sided_vs_constant(VALUES, mean - 0.01, **census) == 0.0
    assert one_sided_vs_constant(VALUES, mean + 0.01, **census) == 1.0
    assert one_sided_vs_constant(VALUES, mean + 0.01, alternative="less", **census) == 0.0
    assert one_sided_vs_constant([0.1] * 4, 0.1) == 1.0  # on c: not strictly beyond
    assert one_sided_vs_constant([0.1] * 4, 0.1, alternative="less") == 1.0
    assert one_sided_vs_constant([0.3] * 4, 0.1) == 0.0
    assert one_sided_vs_constant([0.3], 0.1, population=1) == 0.0


def test_one_sided_undefined_and_bad_alternative():
    assert one_sided_vs_constant([0.3], 0.1) is None
    assert one_sided_vs_constant([], 0.1) is None
    with pytest.raises(InputError, match="alternative must be one of greater, less; got 'two-sid"):
        one_sided_vs_constant(VALUES, 0.5, alternative="two-sided")


# --- mcnemar_exact ----------------------------------------------------------------------------


def test_mcnemar_equals_binomtest():
    a = [False] * 8 + [True] * 2 + [True] * 5 + [False] * 7
    b = [True] * 8 + [False] * 2 + [True] * 5 + [False] * 7
    res = mcnemar_exact(a, b)
    assert (res["b01"], res["b10"], res["n_discordant"], res["statistic"]) == (8, 2, 10, 2)
    assert res["p_value"] == pytest.approx(sps.binomtest(2, 10).pvalue, abs=1e-15)
    assert res["p_value"] == pytest.approx(2 * (1 + 10 + 45) / 1024)  # by hand: 0.109375
    assert res["reason"] is None and _json_clean(res)
    swapped = mcnemar_exact(b, a)
    assert (swapped["b01"], swapped["b10"]) == (2, 8) and swapped["p_value"] == res["p_value"]


def test_mcnemar_no_discordant_pairs_and_bad_lengths():
    res = mcnemar_exact(np.array([True, False]), [True, False])
    assert res == {"b01": 0, "b10": 0, "n_discordant": 0, "p_value": 1.0, "statistic": 0,
                   "reason": "no discordant pairs"}
    assert mcnemar_exact([], [])["p_value"] == 1.0
    with pytest.raises(InputError, match="must pair up, got lengths 2 and 1"):
        mcnemar_exact([True, False], [True])


# --- paired_tests -----------------------------------------------------------------------------

X = [0.82, 0.75, 0.91, 0.60, 0.88, 0.70, 0.95, 0.66, 0.79, 0.73]
Y = [0.41, 0.80, 0.52, 0.60, 0.30, 0.72, 0.55, 0.49, 0.79, 0.20]


def test_paired_tests_equal_scipy():
    res = paired_tests(X, Y)
    d = np.subtract(X, Y)
    assert res["n"] == 10
    md = res["mean_difference"]
    assert md["mean"] == pytest.approx(d.mean(), abs=1e-12)
    low, high = sps.t.interval(0.95, 9, loc=d.mean(), scale=sps.sem(d))
    assert (md["low"], md["high"]) == pytest.approx((low, high), abs=1e-12)
    assert res["cohen_dz"] == pytest.approx(d.mean() / d.std(ddof=1), abs=1e-12)
    w = sps.wilcoxon(X, Y, zero_method="wilcox", alternative="two-sided")
    assert res["wilcoxon"]["statistic"] == pytest.approx(float(w.statistic))
    assert res["wilcoxon"]["p_value"] == pytest.approx(float(w.pvalue), abs=1e-12)
    assert res["wilcoxon"]["n_nonzero"] == 8 and res["wilcoxon"]["reason"] is None
    t = sps.ttest_rel(X, Y)
    assert res["ttest"]["statistic"] == pytest.approx(float(t.statistic), abs=1e-12)
    assert res["ttest"]["p_value"] == pytest.approx(float(t.pvalue), abs=1e-12)
    # rank-biserial against the signed-rank sums: r = (R+ - R-) / (R+ + R-), R+ + R- = m(m+1)/2
    nz = d[d != 0]
    r_plus = sps.rankdata(np.abs(nz))[nz > 0].sum()
    assert res["wilcoxon"]["rank_biserial"] == pytest.approx((2 * r_plus - 36) / 36)
    assert _json_clean(res)


def test_rank_biserial_by_hand():
    # d = 1, 2, -3, 4 (and a zero, dropped): R+ = 1 + 2 + 4 = 7, R- = 3 -> (7 - 3) / 10
    res = paired_tests([1, 2, 0, 4, 5], [0, 0, 3, 0, 5])
    assert res["wilcoxon"]["rank_biserial"] == pytest.approx(0.4)
    assert res["wilcoxon"]["n_nonzero"] == 4
    # ties get average ranks: d = 1, -1, 2 -> ranks 1.5, 1.5, 3: (4.5 - 1.5) / 6
    assert paired_tests([1, 0, 2], [0, 1, 0])["wilcoxon"]["rank_biserial"] == pytest.approx(0.5)
    assert paired_tests([0, 0, 0], [1, 2, 3])["wilcoxon"]["rank_biserial"] == -1.0


def test_paired_tests_degenerate_inputs():
    same = paired_tests([0.5, 0.7, 0.9], [0.5, 0.7, 0.9])
    assert same["wilcoxon"] == {"statistic": None, "p_value": None, "rank_biserial": None,
                                "n_nonzero": 0, "reason": "all differences are zero"}
    assert same["ttest"] == {"statistic": None, "p_value": None,
                             "reason": "differences have zero variance"}
    assert same["cohen_dz"] is None and same["mean_difference"]["mean"] == 0.0
    shifted = paired_tests([0.5, 0.75, 1.0], [0.25, 0.5, 0.75])  # constant non-zero difference
    assert shifted["ttest"]["p_value"] is None and shifted["cohen_dz"] is None
    assert shifted["wilcoxon"]["p_value"] == pytest.approx(
        sps.wilcoxon([0.5, 0.75, 1.0], [0.25, 0.5, 0.75]).pvalue
    )
    single = paired_tests([0.9], [0.1])
    assert single["wilcoxon"]["reason"] == single["ttest"]["reason"] == "fewer than 2 pairs"
    assert single["mean_difference"]["low"] is None and single["cohen_dz"] is None
    empty = paired_tests([], [])
    assert empty["n"] == 0 and empty["mean_difference"]["mean"] is None
    assert all(_json_clean(r) for r in (same, shifted, single, empty))
    with pytest.raises(InputError, match="x and y must pair up, got lengths 2 and 3"):
        paired_tests([0.1, 0.2], [0.1, 0.2, 0.3])


# --- share_ci ---------------------------------------------------------------------------------


def test_wilson_by_hand_and_against_scipy():
    z = 1.959963984540054  # norm.ppf(0.975)
    p = 0.3  # 3 of n = 10
    center = (p + z**2 / 20) / (1 + z**2 / 10)
    half = z / (1 + z**2 / 10) * math.sqrt(p * 0.7 / 10 + z**2 / 400)
    res = share_ci(3, 10)
    assert res["share"] == 0.3 and res["reason"] is None
    assert (res["low"], res["high"]) == pytest.approx((center - half, center + half), abs=1e-12)
    expected = (0.10779126740630, 0.60322185253885)
    assert (res["low"], res["high"]) == pytest.approx(expected, abs=1e-12)
    for count, total, conf in [(0, 7, 0.95), (7, 7, 0.9), (13, 40, 0.99)]:
        ci = sps.binomtest(count, total).proportion_ci(confidence_level=conf, method="wilson")
        got = share_ci(count, total, confidence=conf)
        assert (got["low"], got["high"]) == pytest.approx((ci.low, ci.high), abs=1e-12)
    assert share_ci(0, 7)["low"] == 0.0 and share_ci(7, 7)["high"] == 1.0


def test_share_ci_degenerate_and_invalid():
    assert share_ci(0, 0) == {"share": None, "low": None, "high": None, "reason": "n is 0"}
    with pytest.raises(InputError, match="need 0 <= count <= n, got count=5, n=3"):
        share_ci(5, 3)


def _exact_rank_p(groups):
    """Two-sided p of the stratified rank test by enumerating every pick (one pooled value per group)."""
    import itertools

    pools, observed = [], 0.0
    for value, rand in groups:
        pooled = [*rand, value]
        shares = [(sum(o < v for o in pooled[:j] + pooled[j + 1:]) + 0.5 * sum(o == v for o in pooled[:j] + pooled[j + 1:]))
                  / len(rand) for j, v in enumerate(pooled)]
        pools.append(shares)
        observed += shares[-1]
    sums = [sum(pick) for pick in itertools.product(*pools)]
    low = sum(t <= observed + 1e-9 for t in sums) / len(sums)
    high = sum(t >= observed - 1e-9 for t in sums) / len(sums)
    return min(1.0, 2 * min(low, high))


def test_the_rank_test_matches_enumeration_of_every_pick():
    groups = [(0.2, [1.0, 1.0, 0.2, 0.0, 1.0]), (0.0, [1.0, 1.0, 1.0, 0.5]), (0.7, [0.7, 0.1, 1.0, 1.0, 0.9, 0.3]),
              (0.0, [0.0, 1.0, 1.0])]
    got = stratified_rank_test(groups, draws=200_000)
    assert got["p_value"] == pytest.approx(_exact_rank_p(groups), abs=0.005)
    assert (got["n"], got["n_below"], got["n_above"], got["expected"]) == (4, 4, 0, 2.0)
    assert stratified_rank_test(groups) == stratified_rank_test(groups)  # a fixed seed: the same p


def test_the_rank_test_holds_its_level_where_the_draws_tie_at_the_top():
    """Known truth: the arm is one more random draw; 2 in 3 draws leave the answer as it was (similarity
    1.0, the median), 1 in 3 change it (0.0). A sign test against the median counts every changed arm
    as "below" and none "above", so it rejects far more often than alpha; the rank test does not."""
    rng = np.random.default_rng(1)
    n_sets, n_questions, alpha = 400, 12, 0.05
    rank_rejects = sign_rejects = 0
    for _ in range(n_sets):
        groups = []
        for _ in range(n_questions):
            values = (rng.random(51) >= 1 / 3).astype(float)  # the arm and its 50 random draws, alike
            groups.append((float(values[0]), list(values[1:])))
        rank_rejects += stratified_rank_test(groups, draws=4000)["p_value"] < alpha
        sign_rejects += sign_test([statistics.median(r) - v for v, r in groups])["p_value"] < alpha
    assert rank_rejects / n_sets <= alpha + 0.02, rank_rejects  # at most alpha, give or take the sampling
    assert sign_rejects / n_sets > 0.1, sign_rejects  # the rule before: a false alarm in 1 of ~6 sets here
