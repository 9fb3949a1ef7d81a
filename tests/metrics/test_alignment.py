"""Tie-robust alignment measures against hand computations, brute force and scipy."""

import itertools
import math

import numpy as np
import pytest
from scipy.stats import rankdata, spearmanr

from ragray.config import InfluenceConfig
from ragray.metrics.alignment import alignment, expected_overlaps, rbo_ext, rho_ceiling, usage_ndcg
from ragray.metrics.influence import analyze_influence


def rbo_by_definition(x, y, p):
    """Webber et al. 2010 eq. 32 for two full rankings (lists of items), no ties."""
    k = len(x)
    overlaps = [len(set(x[:d]) & set(y[:d])) for d in range(1, k + 1)]
    return overlaps[-1] / k * p**k + (1 - p) / p * sum(overlaps[d - 1] / d * p**d for d in range(1, k + 1))


def rbo_a_brute_force(scores, p):
    """RBO^a (Corsi & Urbano 2024): the mean RBO over every tie-breaking of the influence order."""
    items = list(range(len(scores)))
    groups = [sorted(i for i in items if scores[i] == v) for v in sorted(set(scores), reverse=True)]
    values = [rbo_by_definition(items, [i for g in perm for i in g], p)
              for perm in itertools.product(*(itertools.permutations(g) for g in groups))]
    return float(np.mean(values))


def test_ndcg_hand_computed():
    assert usage_ndcg([0.0, 1.0, 0.0]) == pytest.approx(1 / math.log2(3))
    # gains 0.2, 0.6, 0.4: DCG = 0.2 + 0.6/log2 3 + 0.4/2; ideal = 0.6 + 0.4/log2 3 + 0.2/2
    dcg = 0.2 + 0.6 / math.log2(3) + 0.2
    ideal = 0.6 + 0.4 / math.log2(3) + 0.1
    assert usage_ndcg([0.2, 0.6, 0.4]) == pytest.approx(dcg / ideal)
    assert usage_ndcg([0.9, 0.0, 0.0, 0.0]) == 1.0  # ties among unused passages cannot lower it
    assert usage_ndcg([-0.3, 0.5]) == pytest.approx(1 / math.log2(3))  # negative influence clipped at 0
    assert usage_ndcg([0.0, 0.0]) is None


def test_rbo_hand_computed():
    # retrieval a, b, c; influence order c, a, b: X = 0, 1, 3
    assert rbo_ext([0, 1, 3], 0.9) == pytest.approx(0.729 + (0.1 / 0.9) * (0.5 * 0.81 + 0.729))
    assert rbo_ext(expected_overlaps([0.5, 0.0, 0.9]), 0.9) == pytest.approx(0.855, abs=1e-12)
    # ties: influence a, {b, c}: E[X] = 1, 1.5, 3 -> the mean of RBO(abc, abc) = 1 and RBO(abc, acb)
    assert list(expected_overlaps([0.9, 0.0, 0.0])) == pytest.approx([1, 1.5, 3])
    assert rbo_ext(expected_overlaps([0.9, 0.0, 0.0]), 0.9) == pytest.approx((1 + 0.729 + (0.9 + 0.405 + 0.729) / 9) / 2)


@pytest.mark.parametrize("seed", range(12))
def test_rbo_with_ties_equals_the_mean_over_every_tie_breaking(seed):
    rng = np.random.default_rng(seed)
    k = int(rng.integers(2, 7))
    scores = rng.choice([0.0, 0.0, 0.3, 0.5, 0.9], size=k)  # many ties
    for p in (0.5, 0.9):
        assert rbo_ext(expected_overlaps(scores), p) == pytest.approx(rbo_a_brute_force(list(scores), p), abs=1e-12)


def test_rbo_identical_order_is_one_and_reversed_is_hand_computed():
    assert rbo_ext(expected_overlaps([5, 4, 3, 2, 1]), 0.9) == pytest.approx(1.0)
    # reversed, k = 5: X = 0, 0, 1, 3, 5; complete lists agree fully from depth k on (p^k)
    assert list(expected_overlaps([1, 2, 3, 4, 5])) == [0, 0, 1, 3, 5]
    expected = 0.9**5 + 0.1 * (1 / 3 * 0.9**2 + 3 / 4 * 0.9**3 + 0.9**4)
    assert rbo_ext(expected_overlaps([1, 2, 3, 4, 5]), 0.9) == pytest.approx(expected)
    assert rbo_ext(rbo_overlaps_reversed(10), 0.9) < 0.55  # k = 10: the tail weighs less


def rbo_overlaps_reversed(k):
    return expected_overlaps(list(range(1, k + 1)))


@pytest.mark.parametrize("influence", [[0.9, 0, 0, 0, 0], [0.9, 0, 0.4, 0.4, 0], [0.1, 0.2, 0.3, 0.2, 0.1],
                                       [0, 0.5, 0, 0.5, 0.2, 0]])
def test_rho_ceiling_is_the_best_spearman_over_all_orders(influence):
    ranks = rankdata(-np.asarray(influence), method="average")
    best = max(spearmanr(perm, ranks).statistic for perm in itertools.permutations(range(1, len(influence) + 1)))
    assert rho_ceiling(influence) == pytest.approx(best)


def test_rho_ceiling_of_one_used_passage_in_ten_is_about_half():
    assert rho_ceiling([0.9] + [0.0] * 9) == pytest.approx(math.sqrt(22.5 / 82.5))  # ≈ 0.522
    assert rho_ceiling([0.2, 0.2]) is None


def test_top1_and_lower_rank_and_verdict():
    a = alignment([0.9, 0, 0, 0], epsilon=0.01, threshold=0.8)
    assert a.top1_used and not a.relies_on_lower_rank and not a.misaligned and a.usage_ndcg == 1.0
    b = alignment([0.0, 0.0, 0.9, 0.0], epsilon=0.01, threshold=0.8)
    assert not b.top1_used and b.relies_on_lower_rank and b.misaligned
    c = alignment([0.5, 0.505, 0, 0], epsilon=0.01, threshold=0.8)  # within ε of the top: used
    assert c.top1_used and not c.relies_on_lower_rank
    assert alignment([0.005, 0.0, 0.01], epsilon=0.01, threshold=0.8) is None  # nothing above ε
    assert alignment([0.5, float("nan"), 0.0], epsilon=0.01, threshold=0.8).usage_ndcg == 1.0


def test_analyze_influence_keeps_the_seed_and_adds_the_verdict():
    cfg = InfluenceConfig()
    r = analyze_influence(range(1, 11), [0.9] + [0.0] * 9, cfg)
    assert r.divergent and r.spearman_rho == pytest.approx(rho_ceiling([0.9] + [0.0] * 9))
    assert "divergent" in r.flags and "misaligned" not in r.flags
    cols = r.columns()
    assert cols["misaligned"] is False and cols["usage_ndcg"] == 1.0 and cols["top1_used"] is True
    buried = analyze_influence(range(1, 11), [0.0] * 8 + [0.9, 0.0], cfg)
    assert buried.flags[0] == "misaligned" and buried.alignment.usage_ndcg == pytest.approx(1 / math.log2(10))
    ignored = analyze_influence(range(1, 4), [0, 0, 0], cfg)
    assert ignored.alignment is None and ignored.columns()["misaligned"] is None
    strict = analyze_influence(range(1, 11), [0.0, 0.9] + [0.0] * 8, cfg.model_copy(update={"misalignment_threshold": 0.6}))
    assert "misaligned" not in strict.flags  # nDCG 0.63 >= 0.6: the threshold is the user's
    # an unanswerable question: the same use is shown (nDCG), but judged nowhere, flag or column
    unjudged = analyze_influence(range(1, 11), [0.0] * 8 + [0.9, 0.0], cfg, judged=False)
    assert "misaligned" not in unjudged.flags and unjudged.columns()["misaligned"] is None
    assert unjudged.columns()["usage_ndcg"] == pytest.approx(1 / math.log2(10))
