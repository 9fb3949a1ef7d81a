"""The model calls one question of the influence run costs, known before it runs.

Counted from the loop's own plan (:class:`~ragray.ablation.loop.InfluenceLoop`): the drop-one arms
of :func:`~ragray.ablation.plan.drop_one_plan` (and of :func:`~ragray.ablation.plan.control_plan`
with a position control), the contexts each measure asks for (:meth:`Measure.subsets`: the
interactions design up to ``influence.budget``, the surrogate's masks), the closed book, a declining
answer, the held-out subsets and the top-k drops of the checks. Each is a generation or a scoring
pass. It is an upper bound: the call book pays a prompt that two arms share once, and a question
with fewer passages than ``k`` costs less.
"""

from __future__ import annotations

from ragray.ablation.engine import SCORERS
from ragray.ablation.plan import control_plan, drop_one_plan
from ragray.attribution.base import measure_for_mode, measures, planners
from ragray.config import InfluenceConfig
from ragray.types import Passage

__all__ = ["influence_calls"]

#: what ``influence.mode: auto`` may become (:func:`~ragray.ablation.loop.resolve_mode`): the cost
#: before the backend is asked whether it scores is the larger
AUTO_MODES = ("interactions", "loo")


def _mode_calls(config: InfluenceConfig, k: int, mode: str) -> int:
    passages = [Passage(id=f"p{i}", text="") for i in range(k)]
    orders = [drop_one_plan(passages)]
    if config.position_control != "none" and k >= 2:
        orders.append(control_plan(passages))
    arms = sum(map(len, orders))
    measure = measure_for_mode(mode)(config)
    if SCORERS.get(measure.scorer).generates_arms:
        return arms  # every arm generated, nothing scored
    planned = sum(len(m.subsets(k, "")) for m in planners(measure, config)) if k >= 2 else 0
    closed_book = 1 if config.closed_book or measure.needs_closed_book else 0
    decline = 1  # an unanswerable question also scores the declining answer
    checks = 0
    if k >= 2:  # the held-out subsets, and each measure's top-k removal per k below the passages
        checks = config.check_subsets + len(measures()) * sum(1 for n in config.check_top_k if n < k)
    return len(orders) + arms + planned + closed_book + decline + checks


def influence_calls(config: InfluenceConfig, k: int) -> int:
    """Model calls, at most, of one question with ``k`` passages (generations and scoring passes)."""
    modes = AUTO_MODES if config.mode == "auto" else (config.mode,)
    return max(_mode_calls(config, k, m) for m in modes)
