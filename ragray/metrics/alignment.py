"""Tie-robust alignment of the retriever's order with the model's use of the passages (SPEC §11).

The seed's Spearman ρ is decided by noise when most passages are unused: with one used passage
and k − 1 influences tied at 0, a question whose used passage is the retriever's #1 gets at most
ρ ≈ 0.52 (k = 10) and is "Divergent". The measures here do not suffer from that. For one
question with passages in retrieval order 1..k and influences ``I_1..I_k``:

- ``usage_ndcg``: nDCG@k of the retrieval order with gain ``max(I_i, 0)`` (Järvelin & Kekäläinen
  2002, linear gain, discount ``1/log2(i + 1)``): 1 when the retriever ordered the passages
  exactly by use; unused passages add nothing, so their noise and ties do not matter.
- ``rbo_alignment``: extrapolated rank-biased overlap ``RBO_EXT`` (Webber, Moffat & Zobel 2010,
  eq. 32) with persistence ``p`` between retrieval order and influence order. Influences at or
  below ε count as unused (tied at 0), and ties are treated as uncertainty: ``RBO^a`` of Corsi &
  Urbano (SIGIR 2024), the expected RBO over uniformly random tie-breaking, computed exactly
  (RBO is linear in the overlaps, so it is RBO of the expected overlaps). ``1 − rbo_alignment``
  is comparable with RAG-E's WARG (Randl et al. 2026).
- ``top1_used``: the retriever's #1 is among the most influential passages (within ε of the
  maximum); ``relies_on_lower_rank``: a lower-ranked passage carries more than ε more influence
  than the #1 — RAG-E's "top-1 ignored" and "relies on less relevant" rates.
- ``rho_ceiling``: the largest Spearman ρ any retrieval order could reach against these
  influence ranks (ties averaged as in ρ): the retrieval order sorted by influence.
- ``misaligned``: ``usage_ndcg < threshold`` — the verdict reports lead with.

Passages whose influence is NaN (the ablation call failed) are left out. When no passage has an
influence above ε the question has no use to align with: every measure is ``None``.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
from scipy.stats import rankdata

__all__ = ["Alignment", "alignment", "expected_overlaps", "rbo_ext", "rho_ceiling", "usage_ndcg"]


@dataclass(frozen=True)
class Alignment:
    """The tie-robust alignment measures of one question (see the module docstring)."""

    usage_ndcg: float
    rbo_alignment: float
    top1_used: bool
    relies_on_lower_rank: bool
    rho_ceiling: float | None  # None when fewer than 2 distinct influence values
    misaligned: bool


def usage_ndcg(gains: Sequence[float]) -> float | None:
    """nDCG of the given order (``gains`` listed in that order, clipped at 0); None if all are 0."""
    g = np.clip(np.asarray(gains, dtype=np.float64), 0.0, None)
    discount = 1.0 / np.log2(np.arange(2, len(g) + 2))
    ideal = float(np.sort(g)[::-1] @ discount)
    if ideal <= 0.0:
        return None
    return float(g @ discount) / ideal


def expected_overlaps(scores: Sequence[float]) -> np.ndarray:
    """``E[X_d]``, d = 1..k: overlap of the first d items of the given order (index order) with the
    first d items by descending ``scores``, ties in ``scores`` broken uniformly at random.

    The tie group that straddles depth d contributes its share of the slots left at that depth:
    ``(d − n_before) / |group|`` per member found in the first d items of the given order.
    """
    s = np.asarray(scores, dtype=np.float64)
    k = len(s)
    values, group = np.unique(-s, return_inverse=True)  # group 0 = highest score
    size = np.bincount(group, minlength=len(values))
    before = np.concatenate([[0], np.cumsum(size)[:-1]])  # items ranked ahead of each group
    out = np.empty(k)
    seen = np.zeros(len(values))  # members of each group among the first d of the given order
    for d in range(1, k + 1):
        seen[group[d - 1]] += 1
        taken = np.clip(d - before, 0, size)  # slots of the first d the group fills, on average
        out[d - 1] = float(np.sum(seen * taken / size))
    return out


def rbo_ext(overlaps: Sequence[float], p: float = 0.9) -> float:
    """Webber et al.'s extrapolated RBO of two conjoint lists of length k from their overlaps X_1..X_k."""
    x = np.asarray(overlaps, dtype=np.float64)
    k = len(x)
    d = np.arange(1, k + 1)
    agreement = x / d
    return float(agreement[-1] * p**k + (1 - p) / p * np.sum(agreement * p**d))


def rho_ceiling(influence: Sequence[float]) -> float | None:
    """The largest Spearman ρ between any order of the k passages and these influence ranks."""
    x = np.asarray(influence, dtype=np.float64)
    if len(x) < 2 or np.all(x == x[0]):
        return None
    ranks = np.sort(rankdata(-x, method="average"))  # the best order puts rank 1 first
    return float(np.corrcoef(np.arange(1, len(x) + 1), ranks)[0, 1])


def alignment(
    influence: Sequence[float], *, epsilon: float, threshold: float, p: float = 0.9
) -> Alignment | None:
    """The measures for one question, ``influence`` in retrieval order (NaN = unmeasured)."""
    x = np.asarray(influence, dtype=np.float64)
    x = x[~np.isnan(x)]
    if len(x) < 2 or float(x.max()) <= epsilon:
        return None
    ndcg = usage_ndcg(x)
    used = np.where(x > epsilon, x, 0.0)  # at or below ε: unused, tied at 0
    top = float(x.max())
    return Alignment(
        usage_ndcg=float(ndcg),
        rbo_alignment=rbo_ext(expected_overlaps(used), p),
        top1_used=bool(x[0] >= top - epsilon),
        relies_on_lower_rank=bool(float(x[1:].max()) > x[0] + epsilon),
        rho_ceiling=rho_ceiling(x),
        misaligned=bool(ndcg < threshold),
    )
