"""Statistics for faithfulness deletion experiments: intervals and tests across draws or questions.

Every function is pure and returns JSON-ready values (``float``, ``int``, ``None``, ``str``):
never NaN or infinity. When a quantity is undefined it is ``None`` and the result's ``reason``
says why (no values, fewer than 2 pairs, all differences zero, zero variance ...).

- :func:`mean_ci`: Student-t interval for a mean. ``population`` = N when the n values are
  drawn *without replacement* from N possible ones (e.g. R random K-subsets out of C(n, K)):
  the standard error gets the finite population correction √((N − n)/(N − 1)), so an
  exhaustive sample (n = N) has a zero-width interval.
- :func:`one_sided_vs_constant`: one-sided one-sample t-test of the mean against a constant,
  with the same standard error.
- :func:`mcnemar_exact`: exact two-sided McNemar test of two paired binary outcomes.
- :func:`paired_tests`: paired comparison of two per-question arrays (mean difference with CI,
  Cohen's d_z, Wilcoxon signed-rank with matched-pairs rank-biserial, paired t-test).
- :func:`share_ci`: Wilson score interval for a proportion.
- :func:`holm`: Holm's step-down adjustment of several p-values.
- :func:`min_questions`: the fewest pairs an exact two-sided paired test needs to reach p < α.
- :func:`sign_test`: exact two-sided sign test of paired differences (zeros dropped).
- :func:`stratified_rank_test`: is one arm's value, question by question, placed among that
  question's own random draws as a random draw would be? (Monte Carlo, conditional on the draws.)
"""

from __future__ import annotations

import math
import statistics
from collections.abc import Sequence
from typing import Literal, TypedDict

from scipy import stats as sps

from ragray.errors import InputError

__all__ = [
    "MeanCI",
    "McNemar",
    "WilcoxonResult",
    "TTestResult",
    "PairedTests",
    "ShareCI",
    "mean_ci",
    "one_sided_vs_constant",
    "mcnemar_exact",
    "paired_tests",
    "share_ci",
    "holm",
    "min_questions",
    "sign_test",
    "RankTest",
    "stratified_rank_test",
]


class MeanCI(TypedDict):
    mean: float | None
    low: float | None
    high: float | None
    sd: float | None  # sample standard deviation (n − 1); None for n < 2
    n: int
    reason: str | None


class McNemar(TypedDict):
    b01: int  # pairs where a did not change and b did
    b10: int  # pairs where a changed and b did not
    n_discordant: int
    p_value: float
    statistic: int  # min(b01, b10), the binomial count tested
    reason: str | None


class WilcoxonResult(TypedDict):
    statistic: float | None  # scipy's two-sided statistic: min(R+, R−)
    p_value: float | None
    rank_biserial: float | None  # (R+ − R−) / (R+ + R−), > 0 when x tends to exceed y
    n_nonzero: int
    reason: str | None


class TTestResult(TypedDict):
    statistic: float | None
    p_value: float | None
    reason: str | None


class PairedTests(TypedDict):
    n: int
    mean_difference: MeanCI  # of x − y
    cohen_dz: float | None  # mean(x − y) / sd(x − y); None when sd is 0 or undefined
    wilcoxon: WilcoxonResult
    ttest: TTestResult


class ShareCI(TypedDict):
    share: float | None
    low: float | None
    high: float | None
    reason: str | None


def _floats(values: Sequence[float], what: str) -> list[float]:
    xs = [float(v) for v in values]
    if not all(math.isfinite(v) for v in xs):
        raise InputError(f"{what} must be finite numbers, got {xs}")
    return xs


def _check_confidence(confidence: float) -> None:
    if not 0.0 < confidence < 1.0:
        raise InputError(f"confidence must be in (0, 1), got {confidence}")


def _moments(
    values: Sequence[float], population: int | None
) -> tuple[list[float], float | None, float | None, float | None]:
    """``(values, mean, sd, se)``; ``se`` is 0 for a census (n = N), None when undefined."""
    xs = _floats(values, "values")
    n = len(xs)
    if population is not None and (int(population) != population or population < max(n, 1)):
        raise InputError(
            f"population must be an integer >= the number of values ({n}), got {population}"
        )
    mean = statistics.fmean(xs) if n else None
    # statistics.stdev is exact (rational arithmetic): constant values give exactly 0
    sd = statistics.stdev(xs) if n >= 2 else None
    if population is not None and n == population:
        return xs, mean, sd, 0.0  # every possible value was observed: the mean is exact
    if sd is None:
        return xs, mean, sd, None
    fpc = math.sqrt((population - n) / (population - 1)) if population is not None else 1.0
    return xs, mean, sd, sd / math.sqrt(n) * fpc


def mean_ci(
    values: Sequence[float], confidence: float = 0.95, population: int | None = None
) -> MeanCI:
    """Mean with a two-sided Student-t interval (n − 1 df), FPC applied when ``population``.

    n = N gives a zero-width interval (also for n = 1); otherwise n = 1 gives ``low``/``high``
    None, and no values give everything None.
    """
    _check_confidence(confidence)
    xs, mean, sd, se = _moments(values, population)
    n = len(xs)
    if mean is None:
        return MeanCI(mean=None, low=None, high=None, sd=None, n=0, reason="no values")
    if se is None:
        return MeanCI(mean=mean, low=None, high=None, sd=sd, n=n, reason="fewer than 2 values")
    half = float(sps.t.ppf(0.5 + confidence / 2, n - 1)) * se if se > 0 else 0.0
    return MeanCI(mean=mean, low=mean - half, high=mean + half, sd=sd, n=n, reason=None)


def one_sided_vs_constant(
    values: Sequence[float],
    c: float,
    population: int | None = None,
    alternative: Literal["greater", "less"] = "greater",
) -> float | None:
    """p-value of the one-sided t-test of H0: mean ≤ c (``"greater"``) or mean ≥ c (``"less"``).

    t = (mean − c) / se with the standard error of :func:`mean_ci` (FPC when ``population``)
    and n − 1 degrees of freedom. When se is 0 (constant values, or n = N) the mean is treated
    as exact: p = 0.0 if it lies strictly on the alternative side of c, else 1.0. Returns None
    when the test is undefined (no values, or one value drawn from more than one).
    """
    if alternative not in ("greater", "less"):
        raise InputError(f"alternative must be one of greater, less; got '{alternative}'")
    xs, mean, _, se = _moments(values, population)
    if mean is None or se is None:
        return None
    c = float(c)
    if se == 0:
        beyond = mean > c if alternative == "greater" else mean < c
        return 0.0 if beyond else 1.0
    t = (mean - c) / se
    dist = sps.t(len(xs) - 1)
    return float(dist.sf(t) if alternative == "greater" else dist.cdf(t))


def mcnemar_exact(a_changed: Sequence[bool], b_changed: Sequence[bool]) -> McNemar:
    """Exact two-sided McNemar test: binomial test of min(b01, b10) out of the discordant pairs.

    ``a_changed[i]`` and ``b_changed[i]`` are two binary outcomes of the same unit i (e.g.
    "the answer changed" under two deletion arms). No discordant pair gives p = 1.0.
    """
    if len(a_changed) != len(b_changed):
        raise InputError(
            "a_changed and b_changed must pair up, "
            f"got lengths {len(a_changed)} and {len(b_changed)}"
        )
    pairs = [(bool(a), bool(b)) for a, b in zip(a_changed, b_changed)]
    b01 = sum(1 for a, b in pairs if not a and b)
    b10 = sum(1 for a, b in pairs if a and not b)
    n_disc = b01 + b10
    if n_disc == 0:
        return McNemar(b01=0, b10=0, n_discordant=0, p_value=1.0, statistic=0,
                       reason="no discordant pairs")
    k = min(b01, b10)
    p = float(sps.binomtest(k, n_disc, 0.5, alternative="two-sided").pvalue)
    return McNemar(b01=b01, b10=b10, n_discordant=n_disc, p_value=p, statistic=k, reason=None)


def _rank_biserial(diffs: Sequence[float]) -> float:
    """Matched-pairs rank-biserial correlation (Kerby 2014) of non-zero differences:
    (R+ − R−) / (R+ + R−) with average ranks of |d| — the zero_method="wilcox" ranking."""
    ranks = sps.rankdata([abs(d) for d in diffs])
    plus = float(sum(r for r, d in zip(ranks, diffs) if d > 0))
    minus = float(sum(r for r, d in zip(ranks, diffs) if d < 0))
    return (plus - minus) / (plus + minus)


def _wilcoxon(x: list[float], y: list[float], diffs: list[float]) -> WilcoxonResult:
    nonzero = [d for d in diffs if d != 0]
    missing = "fewer than 2 pairs" if len(diffs) < 2 else None
    missing = missing or (None if nonzero else "all differences are zero")
    if missing is None:
        try:
            res = sps.wilcoxon(x, y, zero_method="wilcox", alternative="two-sided")
        except ValueError as exc:  # older scipy raises when every difference is zero
            missing = f"wilcoxon undefined: {exc}"
    if missing is not None:
        return WilcoxonResult(statistic=None, p_value=None, rank_biserial=None,
                              n_nonzero=len(nonzero), reason=missing)
    return WilcoxonResult(statistic=float(res.statistic), p_value=float(res.pvalue),
                          rank_biserial=_rank_biserial(nonzero), n_nonzero=len(nonzero),
                          reason=None)


def paired_tests(x: Sequence[float], y: Sequence[float]) -> PairedTests:
    """Paired comparison of ``x`` and ``y`` (one value of each per question), differences x − y.

    ``mean_difference``: :func:`mean_ci` of the differences (95 %); ``cohen_dz``: mean / sd of
    the differences; ``wilcoxon``: scipy's two-sided signed-rank test with zero differences
    dropped (``zero_method="wilcox"``) and the matched-pairs rank-biserial correlation;
    ``ttest``: scipy's ``ttest_rel``. Tests are None with a reason for fewer than 2 pairs, for
    all-zero differences (Wilcoxon) and for differences with zero variance (t-test).
    """
    xs, ys = _floats(x, "x"), _floats(y, "y")
    if len(xs) != len(ys):
        raise InputError(f"x and y must pair up, got lengths {len(xs)} and {len(ys)}")
    diffs = [a - b for a, b in zip(xs, ys)]
    md = mean_ci(diffs)
    sd, mean = md["sd"], md["mean"]
    dz = mean / sd if sd and mean is not None else None
    if len(diffs) < 2:
        ttest = TTestResult(statistic=None, p_value=None, reason="fewer than 2 pairs")
    elif not sd:
        ttest = TTestResult(statistic=None, p_value=None, reason="differences have zero variance")
    else:
        res = sps.ttest_rel(xs, ys)
        ttest = TTestResult(statistic=float(res.statistic), p_value=float(res.pvalue), reason=None)
    return PairedTests(n=len(diffs), mean_difference=md, cohen_dz=dz,
                       wilcoxon=_wilcoxon(xs, ys, diffs), ttest=ttest)


def share_ci(count: int, n: int, confidence: float = 0.95) -> ShareCI:
    """count / n with its Wilson score interval (Wilson 1927); n = 0 gives all None.

    center = (p + z²/2n) / (1 + z²/n),
    half-width = z / (1 + z²/n) · √(p(1 − p)/n + z²/4n²).
    """
    _check_confidence(confidence)
    if n < 0 or not 0 <= count <= max(n, 0):
        raise InputError(f"need 0 <= count <= n, got count={count}, n={n}")
    if n == 0:
        return ShareCI(share=None, low=None, high=None, reason="n is 0")
    p = count / n
    z = float(sps.norm.ppf(0.5 + confidence / 2))
    denom = 1 + z * z / n
    center = (p + z * z / (2 * n)) / denom
    half = z / denom * math.sqrt(p * (1 - p) / n + z * z / (4 * n * n))
    # the bounds are exactly 0 at count = 0 and 1 at count = n; rounding would miss them by ~1e-17
    low = 0.0 if count == 0 else max(0.0, center - half)
    high = 1.0 if count == n else min(1.0, center + half)
    return ShareCI(share=p, low=low, high=high, reason=None)


def holm(p_values: Sequence[float]) -> list[float]:
    """Holm's step-down adjusted p-values, in the input order."""
    m = len(p_values)
    order = sorted(range(m), key=lambda i: p_values[i])
    adjusted, running = [0.0] * m, 0.0
    for step, i in enumerate(order):
        running = max(running, min(1.0, (m - step) * p_values[i]))
        adjusted[i] = running
    return adjusted


def min_questions(alpha: float) -> int:
    """The fewest pairs for which an exact two-sided paired test can give p < α: the signed-rank
    test's and McNemar's smallest p-value is 2 / 2ⁿ (every pair, or every discordant pair, one way)."""
    return max(2, math.floor(1 - math.log2(alpha)) + 1)


def sign_test(diffs: Sequence[float]) -> McNemar:
    """Exact two-sided sign test of ``diffs`` (zeros dropped): McNemar's binomial test with
    "positive" and "negative" as the two outcomes (``b10`` positives, ``b01`` negatives)."""
    return mcnemar_exact([d > 0 for d in diffs], [d < 0 for d in diffs])


class RankTest(TypedDict):
    n: int  # groups (questions) tested
    n_below: int  # groups whose value sits below the middle of their own draws (mid-rank share < ½)
    n_above: int  # ... above it (> ½)
    statistic: float  # the sum over groups of the value's mid-rank share among its draws
    expected: float  # its mean under the null: n / 2
    p_value: float  # two-sided, Monte Carlo (1 + hits) / (1 + draws)
    reason: str | None


def stratified_rank_test(groups: Sequence[tuple[float, Sequence[float]]], *, draws: int = 20_000,
                         seed: int = 0) -> RankTest:
    """Two-sided test that in every group ``(value, random_values)`` the value is exchangeable
    with the group's random values (it is one more random draw), against "lower" or "higher".

    Per group the value's mid-rank share u = (#draws below + ½ #draws equal) / R: 0 below every
    draw, 1 above every one; the statistic is Σ u. Under the null the value is any of the group's
    R + 1 pooled values with equal chance, so Σ u's null distribution is that of one pick per
    group: drawn ``draws`` times (a fixed seed: the same data give the same p), p = (1 + picks at
    least as far from n / 2 on the observed side) / (1 + draws), doubled, at most 1. Unlike a sign
    test against each group's median, this holds its level where the draws tie at the median (a
    similarity of 1.0 for most removals: nothing can be above it) or are skewed."""
    import numpy as np

    kept = [(float(v), np.asarray(r, dtype=float)) for v, r in groups if len(r) >= 1]
    n = len(kept)
    if n == 0:
        return RankTest(n=0, n_below=0, n_above=0, statistic=0.0, expected=0.0, p_value=1.0, reason="no groups")
    observed, pools = [], []
    for value, rand in kept:
        pooled = np.sort(np.append(rand, value))
        below = np.searchsorted(pooled, pooled, side="left")
        equal = np.searchsorted(pooled, pooled, side="right") - below - 1  # the other pooled values tied
        pools.append((below + 0.5 * equal) / len(rand))
        observed.append(float(((rand < value).sum() + 0.5 * (rand == value).sum()) / len(rand)))
    t, expected = float(sum(observed)), n / 2
    rng = np.random.default_rng(seed)
    null = np.zeros(draws)
    for pool in pools:
        null += pool[rng.integers(0, len(pool), size=draws)]
    eps = 1e-9 * n
    low = (1 + int((null <= t + eps).sum())) / (1 + draws)
    high = (1 + int((null >= t - eps).sum())) / (1 + draws)
    return RankTest(n=n, n_below=sum(u < 0.5 for u in observed), n_above=sum(u > 0.5 for u in observed),
                    statistic=t, expected=expected, p_value=min(1.0, 2 * min(low, high)), reason=None)
