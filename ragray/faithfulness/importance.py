"""Unit importances from the three explainers, their ranking and the most / important / least buckets.

- ``loo``: importance = 1 − sim(y, y′ᵢ), y′ᵢ the answer regenerated without unit i.
- ``logprob``: the drop in the teacher-forced log-probability of the baseline answer y when
  unit i is removed, log p(y | all) − log p(y | all − i), clipped at 0 (removals that make y
  more likely are not evidence for it). One forward pass per unit, no generation.
- ``surrogate``: the weight of unit i in a non-negative sparse linear model of the random-deletion
  arm (:mod:`ragray.faithfulness.surrogate`), fitted on answers already generated.

Raw scores are normalized to [0, 1] by dividing by the largest (0 keeps meaning "no effect";
all zeros stay zeros). A unit whose measurement failed is NaN and ranks last.

Ranking: descending importance; ties are broken by a seeded random permutation rather than by
position, so that an explainer that cannot tell units apart is not silently credited with the
retriever's order. Buckets: the first ⌈most·n⌉ ranked units are ``most``, the last ⌈least·n⌉
``least`` (``most`` wins when they overlap on tiny contexts), the rest ``important``.
"""

from __future__ import annotations

import math
from collections.abc import Sequence

import numpy as np

__all__ = ["normalize", "rank_units", "buckets", "loo_scores", "logprob_scores"]


def normalize(raw: Sequence[float]) -> list[float]:
    """Negative scores → 0, then divide by the maximum; NaN stays NaN."""
    x = np.asarray(raw, dtype=np.float64)
    x = np.where(np.isnan(x), np.nan, np.clip(x, 0.0, None))
    top = np.nanmax(x) if np.any(~np.isnan(x)) else 0.0
    return [float(v / top) if top > 0 and not math.isnan(v) else float(v if math.isnan(v) else 0.0) for v in x]


def rank_units(importance: Sequence[float], rng: np.random.Generator) -> list[int]:
    """Unit indices, most important first (NaN last, ties in seeded random order)."""
    tie = rng.permutation(len(importance))
    key = [(-v if not math.isnan(v) else math.inf, int(tie[i])) for i, v in enumerate(importance)]
    return sorted(range(len(importance)), key=key.__getitem__)


def buckets(order: Sequence[int], most: float, least: float) -> dict[int, str]:
    """``{unit index: "most" | "important" | "least"}`` from a ranking (see module docstring)."""
    n = len(order)
    n_most, n_least = math.ceil(most * n), math.ceil(least * n)
    out = {}
    for pos, i in enumerate(order):
        out[i] = "most" if pos < n_most else "least" if pos >= n - n_least else "important"
    return out


def loo_scores(loo_sims: Sequence[float]) -> list[float]:
    """Raw leave-one-out importance 1 − sim per unit (NaN for failed calls)."""
    return [1.0 - s for s in loo_sims]


def logprob_scores(full: float, without: Sequence[float]) -> list[float]:
    """Raw log-prob importance: the drop log p(y | all) − log p(y | all − i), in nats."""
    return [full - w for w in without]
