"""Does an attribution capture what the model used? Top-k drop and LDS (SPEC §12).

Gold labels say which passage is *relevant*; they cannot say which one the model *used*, and a
question–passage cosine finds relevant text for free. The test ContextCite and its successors use
needs no labels and cannot be faked by relevance, because it asks the model again:

- **top-k drop**: remove the k passages a measure scores highest and record how far the log-
  probability of the (scored) answer falls, ``log p(y | all) − log p(y | all but the top k)``
  in nats. A measure that found what the model used makes the answer collapse. Ties at the cut
  go to the better retrieval rank. (For drop-one, the top-1 drop is its own definition: reported,
  not a goal.)
- **LDS** (linear datamodeling score, Park et al. 2023; ContextCite): on held-out random subsets
  S, the Spearman correlation between the measure's additive prediction ``Σ_{i∈S} a_i`` and the
  actual ``log p(y | S)``. Every measure — attributions and controls alike — is read as such an
  additive model of its scores ``a_i`` (retrieval rank as ``(k + 1 − rank) / k``).

Degenerate cases are explicit: a question whose answer's log-prob is the same on every held-out
subset has no LDS for any measure (``None``); a measure whose prediction is constant over the
subsets (it scores every passage alike, or every kept set alike) predicts nothing: LDS 0.
"""

from __future__ import annotations

import math
from collections.abc import Sequence

import numpy as np
from scipy.stats import spearmanr

__all__ = ["lds", "top_k_drop"]


def lds(scores: Sequence[float], kept: Sequence[Sequence[int]], logprobs: Sequence[float],
        predicted: Sequence[float] | None = None) -> float | None:
    """Spearman(Σ_{i ∈ kept[s]} scores[i], logprobs[s]) over the held-out subsets (NaN scores count 0,
    NaN log-probs drop the subset); None when fewer than 3 subsets are measured or the log-probs
    are constant. ``predicted``: a model's own prediction per subset, ranked instead of the sum
    (a model with interactions is not additive)."""
    a = np.nan_to_num(np.asarray(scores, dtype=np.float64), nan=0.0)
    pred, actual = [], []
    for n, (s, lp) in enumerate(zip(kept, logprobs)):
        if lp is None or math.isnan(lp):
            continue
        if predicted is not None:
            pred.append(float(predicted[n]))
        else:
            pred.append(float(a[list(s)].sum()) if len(s) else 0.0)
        actual.append(float(lp))
    if len(actual) < 3 or np.ptp(actual) == 0:
        return None
    if np.ptp(pred) <= 1e-12 * max(1.0, float(np.abs(pred).max())):
        return 0.0
    rho = spearmanr(pred, actual).statistic
    return float(rho) if not math.isnan(rho) else 0.0


def top_k_drop(full: float, without: float) -> float | None:
    """``full − without`` in nats (positive: removing the passages made the answer less likely)."""
    if full is None or without is None or math.isnan(full) or math.isnan(without):
        return None
    return float(full - without)
