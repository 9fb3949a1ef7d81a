"""The model calls one question of ``ragray interpret`` costs, known before it runs.

Counted stage by stage as :class:`~ragray.faithfulness.experiment.FaithfulnessExperiment` builds its
arms: the baseline and the controls (DEL_Q, closed book); per explanation stage the calls of its
attributions (:meth:`Measure.calls`: leave-one-out one generation per unit, log-prob one scoring
pass per unit and one for the whole) and, at the final stage, the random draws of every K
(:func:`~ragray.faithfulness.arms.draw_count`: R, or every K-subset when there are fewer); then
DEL_MOST and DEL_LEAST per K, the cumulative curves (two per unit) and the moved-passage controls.

The number of units is not known before the passages are split, so a stage is counted at its most:
``k`` units at the passage level, ``faithfulness.max_units`` at a finer one (a question with more
units at its final level is an error before that stage's calls). That is an upper bound, except for
the middle (sentence) stage of a hierarchical token-level explanation, which ``max_units`` does
not limit: :func:`is_upper_bound` says so.
"""

from __future__ import annotations

from ragray.config import FaithfulnessConfig
from ragray.faithfulness.arms import CUMULATIVE, draw_count, resolve_k
from ragray.faithfulness.attribution import explainers, fitted_on_random_arm
from ragray.faithfulness.experiment import STAGE_LEVELS

__all__ = ["faithfulness_calls", "is_upper_bound"]


def _stages(fc: FaithfulnessConfig) -> tuple[str, ...]:
    return STAGE_LEVELS[fc.level] if fc.hierarchical else (fc.level,)


def _top_ks(fc: FaithfulnessConfig, n: int) -> list[int]:
    """The K of every top-K label that removes fewer than all ``n`` units."""
    ks = [resolve_k(label, n) for label in fc.k_values if label != CUMULATIVE]
    return [k for k in ks if k is not None]


def _stage_calls(fc: FaithfulnessConfig, n: int, final: bool) -> int:
    """An explanation stage of ``n`` units: its attributions' calls, and the random draws at the end."""
    if final:
        attributions = fc.attributions
    else:  # coarse stages rank by the explainer, or by leave-one-out where it fits the random arm
        attributions = ("loo",) if fitted_on_random_arm(fc.explainer) else (fc.explainer,)
    calls = sum(measure().calls(n) for name, measure in explainers().items() if name in attributions)
    if final:
        calls += sum(draw_count(n, k, fc.random_repeats) for k in _top_ks(fc, n))
    return calls


def _deletion_calls(fc: FaithfulnessConfig, n: int) -> int:
    """DEL_MOST and DEL_LEAST per K, both cumulative curves, the moved passage."""
    curves = 2 * n if CUMULATIVE in fc.k_values else 0
    return 2 * len(_top_ks(fc, n)) + curves + len(fc.controls.positions)


def faithfulness_calls(fc: FaithfulnessConfig, passages: int) -> int:
    """Model calls, at most, of one question with ``passages`` retrieved passages (see the module
    docstring for where it is not a bound)."""
    fixed = 1 + int(fc.controls.question_removal) + int(fc.controls.closed_book)
    scored_baseline = 1 if fc.mode == "logprob" else 0  # generated, then scored like every arm
    stages = _stages(fc)
    total, n = fixed + scored_baseline, 0
    for depth, level in enumerate(stages):
        final = depth == len(stages) - 1
        n = passages if level == "passage" else fc.max_units
        total += _stage_calls(fc, min(n, fc.max_units) if final else n, final)
    return total + _deletion_calls(fc, min(n, fc.max_units))


def is_upper_bound(fc: FaithfulnessConfig) -> bool:
    """Whether :func:`faithfulness_calls` bounds the calls (not for a hierarchical token level)."""
    return len(_stages(fc)) < 3
