"""Drop-one, JSD and the Lasso surrogate, read as measures (:class:`~ragray.attribution.base.Measure`).

- ``loo``: 1 − sim(y, y′ᵢ), the answer regenerated without unit i;
- ``logprob_drop``: log p(y | all) − log p(y | all − i), signed, in nats;
- ``logprob_share``: the share of the answer's probability lost without unit i,
  1 − exp(−max(0, drop)) (``influence.mode: logprob_share``);
- ``jsd``: the mean Jensen–Shannon divergence of the next-token distributions without unit i
  (ARC-JSD), measured by the ``jsd`` scorer and read from the evidence;
- ``surrogate``: a sparse linear fit (ContextCite) of the answer on random subsets. With log-probs
  (the influence run): ``log p(y | S)`` on the keep-indicators of ``influence.masks`` subsets (and,
  with ``surrogate_fit: masks_and_arms``, the full context and the drop-one arms); without
  (the faithfulness experiments): the non-negative fit of ``1 − sim`` on the removed-indicators of
  the random-deletion arms, answers already generated. One Lasso (:func:`ragray.attribution.linear.fit_lasso`).
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np

from ragray.attribution.base import MEASURES, Evidence, Fitted, Measure
from ragray.attribution.subsets import Subset, draw_subsets
from ragray.attribution.linear import fit_lasso

__all__ = ["DropShare", "JensenShannon", "LeaveOneOut", "LogprobDrop", "Surrogate", "lasso_weights"]


@MEASURES.register()
class LeaveOneOut(Measure):
    name = "loo"
    as_influence = True
    as_explainer = True
    needs_generated_arms = True
    scorer = "generate"

    def scores(self, evidence: Evidence) -> list[float]:
        change = {o.kept: o.change for o in evidence.changed if o.purpose == "drop"}
        return [change.get(evidence.full - {i}, math.nan) for i in range(evidence.n)]

    def calls(self, n: int) -> int:
        return n


class _DropScores(Measure):
    """Measures read off the drop-one contexts' log-probabilities (one pass per unit and the full one)."""

    needs_drop_scores = True

    def calls(self, n: int) -> int:
        return n + 1


@MEASURES.register()
class DropShare(_DropScores):
    name = "logprob_share"
    as_influence = True

    def scores(self, evidence: Evidence) -> list[float]:
        return [1.0 - math.exp(-max(0.0, d)) if not math.isnan(d) else math.nan for d in evidence.drops()]


@MEASURES.register()
class LogprobDrop(_DropScores):
    name = "logprob_drop"
    as_explainer = True

    def scores(self, evidence: Evidence) -> list[float]:
        return evidence.drops()


@MEASURES.register()
class JensenShannon(_DropScores):
    name = "jsd"
    as_influence = True
    scorer = "jsd"

    def available(self, evidence: Evidence) -> bool:
        return evidence.side.get("jsd") is not None

    def scores(self, evidence: Evidence) -> list[float]:
        values = evidence.side.get("jsd")
        return list(values) if values is not None else [math.nan] * evidence.n


def lasso_weights(n: int, points: list[tuple[frozenset[int], float]], alpha: float, *, positive: bool = False,
                  removed: bool = False, minimum: int = 4) -> list[float]:
    """Weights of the Lasso fit of the values on the units' indicators (kept, or ``removed``);
    NaN for every unit when fewer than ``minimum`` points are given."""
    if len(points) < minimum:
        return [math.nan] * n
    x = np.zeros((len(points), n))
    for r, (kept, _) in enumerate(points):
        x[r, list(kept)] = 1.0
    if removed:
        x = 1.0 - x
    w, _ = fit_lasso(x, np.array([v for _, v in points]), alpha, positive=positive)
    return [float(v) for v in w]


@MEASURES.register()
class Surrogate(Measure):
    name = "surrogate"
    column = "surrogate_weight"
    as_influence = True
    as_explainer = True
    fits_random_arm = True
    own_contexts = True
    random_draws = True

    def subsets(self, n: int, question_id: str) -> list[Subset]:
        c = self.config
        if c is None or not c.surrogate_masks or n < 2:
            return []
        return draw_subsets(n, c.surrogate_masks, seed=c.mask_seed, question_id=question_id, purpose="surrogate",
                            shuffle=c.shuffle_masks)

    def scores(self, evidence: Evidence) -> list[float]:
        if any(o.purpose == "surrogate" for o in evidence.scored):
            masks = [(o.kept, o.logprob) for o in evidence.scored if o.purpose == "surrogate" and not math.isnan(o.logprob)]
            if len(masks) < 4:
                return [math.nan] * evidence.n
            arms = evidence.points(("full", "drop")) if self.config.surrogate_fit == "masks_and_arms" else []
            return lasso_weights(evidence.n, masks + arms, self.config.surrogate_alpha)
        # answers regenerated from random deletions: which removals changed the answer
        draws = [(o.kept, o.change) for o in evidence.changed if o.purpose == "random" and not math.isnan(o.change)]
        return lasso_weights(evidence.n, draws, 0.01, positive=True, removed=True, minimum=2)

    def fit(self, evidence: Evidence) -> Fitted | None:
        """The Lasso's weights (None for a single unit: nothing to fit)."""
        return super().fit(evidence) if evidence.n >= 2 else None

    @classmethod
    def wanted(cls, config: Any) -> bool:
        return bool(config.surrogate_masks)

    def influence(self, fitted: Fitted | None, n: int) -> list[float]:
        """Each weight as a share of the answer's probability, 1 − exp(−max(0, w)), as drop-one's."""
        weights = fitted.scores if fitted is not None else [math.nan] * n
        return [math.nan if w is None or math.isnan(w) else 1.0 - math.exp(-max(0.0, w)) for w in weights]

    def calls(self, n: int) -> int:
        return self.config.surrogate_masks if self.config is not None else 0
