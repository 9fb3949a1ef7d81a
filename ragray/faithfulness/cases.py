"""Case A / B / C / inconclusive for one question and one K, decided against the random arm.

The random arm gives R similarities (or every one of the C(n, K) possible subsets when there are
at most R of them). Its mean is the reference "sim_random", with a Student-t confidence interval
that carries the finite-population correction √((N − R)/(N − 1)): an exhaustive arm is known
exactly and its interval has zero width.

An arm with similarity s is compared with that mean by a one-sided t-test of the random draws
against the constant s (:func:`ragray.metrics.stats.one_sided_vs_constant`):

- ``below`` (s ≪ sim_random): p ≤ α for "mean > s" AND mean − s ≥ δ (``decision.min_effect``);
- ``above``: p ≤ α for "mean < s" AND s − mean ≥ δ;
- ``similar`` (s ≈ sim_random): neither — no significant difference of at least δ. This is the
  absence of a demonstrated difference, not an equivalence test; with few random draws read it
  together with the interval.

Cases (SPEC §5), checked in this order:

- **C — redundancy / partial dependence**: most ``below`` but sim_most ≥ ``redundancy_sim``;
- **A — faithful**: most ``below`` and least not ``below`` (``similar``, or ``above``: removing
  the least important units hurts less than a random removal, as it should);
- **B — explainer or model failure**: most and least both ``similar``;
- **inconclusive** otherwise, with the reason (least also below, ranking inverted, ...).

The empirical rank p-value of sim_most among the draws (how often a random removal hurt at
least as much) is reported beside the test; it is not used for the decision, because when the
evidence sits in one unit a random K-subset often contains it too, so DEL_MOST cannot be in the
extreme tail even for a perfect explanation.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import asdict, dataclass
from typing import Any

from ragray.config import DecisionConfig
from ragray.metrics.stats import mean_ci, one_sided_vs_constant

__all__ = ["ArmComparison", "CaseResult", "compare_to_random", "decide_case", "CASES"]

CASES = ("A", "B", "C", "inconclusive")


@dataclass(frozen=True)
class ArmComparison:
    sim: float
    effect: float  # mean(random) − sim: > 0 when the arm hurts more than random
    p_below: float
    p_above: float
    status: str  # below | above | similar


def compare_to_random(
    sim: float, random_sims: Sequence[float], population: int | None, decision: DecisionConfig
) -> ArmComparison:
    mean = sum(random_sims) / len(random_sims)
    # None (undefined: a single non-exhaustive draw) counts as no evidence
    p_below = one_sided_vs_constant(random_sims, sim, population=population, alternative="greater")
    p_above = one_sided_vs_constant(random_sims, sim, population=population, alternative="less")
    p_below = 1.0 if p_below is None else p_below
    p_above = 1.0 if p_above is None else p_above
    effect = mean - sim
    if p_below <= decision.alpha and effect >= decision.min_effect:
        status = "below"
    elif p_above <= decision.alpha and -effect >= decision.min_effect:
        status = "above"
    else:
        status = "similar"
    return ArmComparison(sim, effect, p_below, p_above, status)


@dataclass(frozen=True)
class CaseResult:
    case: str
    reason: str
    random_mean: float
    random_low: float | None
    random_high: float | None
    random_sd: float | None
    n_random: int
    rank_p_most: float
    most: ArmComparison
    least: ArmComparison

    def as_row(self) -> dict[str, Any]:
        row = {k: v for k, v in asdict(self).items() if k not in ("most", "least")}
        for name, arm in (("most", self.most), ("least", self.least)):
            row.update({f"sim_{name}": arm.sim, f"effect_{name}": arm.effect,
                        f"p_{name}_below": arm.p_below, f"p_{name}_above": arm.p_above,
                        f"status_{name}": arm.status})
        return row


def _reason(most: ArmComparison, least: ArmComparison, decision: DecisionConfig) -> tuple[str, str]:
    d = f"(effect {most.effect:+.3f}, p={most.p_below:.3g})"
    if most.status == "below" and most.sim >= decision.redundancy_sim:
        return "C", (f"removing the most important units lowers similarity vs random {d} but the "
                     f"answer survives (sim_most {most.sim:.3f} >= {decision.redundancy_sim}): redundant evidence")
    if most.status == "below" and least.status != "below":
        return "A", f"most-important deletion hurts more than random {d}; least-important deletion does not"
    if most.status == "similar" and least.status == "similar":
        return "B", (f"neither most- nor least-important deletion differs from random {d}: the "
                     "explanation carries no information, or the model does not use the context")
    if most.status == "below":
        return "inconclusive", (f"least-important deletion also hurts more than random (effect "
                                f"{least.effect:+.3f}, p={least.p_below:.3g}): the ranking does not separate units")
    if most.status == "above":
        return "inconclusive", (f"most-important deletion hurts less than random (effect {most.effect:+.3f}, "
                                f"p={most.p_above:.3g}): the ranking is inverted")
    return "inconclusive", (f"most-important deletion does not differ from random {d} while least-important "
                            f"deletion does ({least.status}, effect {least.effect:+.3f})")


def decide_case(
    sim_most: float,
    sim_least: float,
    random_sims: Sequence[float],
    population: int | None,
    decision: DecisionConfig,
) -> CaseResult:
    """The case of one question at one K (``population`` None: draws with replacement/unknown N)."""
    ci = mean_ci(random_sims, confidence=decision.confidence, population=population)
    most = compare_to_random(sim_most, random_sims, population, decision)
    least = compare_to_random(sim_least, random_sims, population, decision)
    case, reason = _reason(most, least, decision)
    exhaustive = population is not None and population == len(random_sims)
    hurt_as_much = sum(1 for s in random_sims if s <= sim_most)
    rank_p = hurt_as_much / len(random_sims) if exhaustive else (hurt_as_much + 1) / (len(random_sims) + 1)
    return CaseResult(case, reason, ci["mean"], ci["low"], ci["high"], ci["sd"], len(random_sims), rank_p, most, least)
