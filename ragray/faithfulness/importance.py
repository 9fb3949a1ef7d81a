"""Unit importances from the explainers' raw scores (:mod:`ragray.faithfulness.attribution`),
their ranking and the most / important / least buckets.

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

__all__ = ["normalize", "rank_units", "buckets"]


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
