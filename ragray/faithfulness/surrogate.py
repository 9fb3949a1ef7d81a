"""A sparse linear surrogate of the random-deletion arm (ContextCite-style attribution, no extra calls).

For every DEL_RANDOM draw we know which units were removed (x ∈ {0,1}ⁿ) and how much the answer
changed (d = 1 − sim). We fit d ≈ b + Σᵢ wᵢ·xᵢ with wᵢ ≥ 0 by the non-negative Lasso

    minimize  1/(2m) ‖d − b − Xw‖² + λ‖w‖₁   subject to  w ≥ 0,

(the objective of scikit-learn's ``Lasso(alpha=λ, positive=True)``), solved by cyclic coordinate
descent on centered data. wᵢ is unit i's attribution: the expected change of the answer caused by
removing it, given everything else the draws removed. A unit never removed in any draw gets 0.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from ragray.metrics.linear import fit_lasso

__all__ = ["fit_nonnegative_lasso", "surrogate_weights"]


def fit_nonnegative_lasso(
    X: np.ndarray, y: np.ndarray, alpha: float = 0.01, *, max_iter: int = 2000, tol: float = 1e-9
) -> tuple[np.ndarray, float]:
    """``(w, intercept)`` of the non-negative Lasso above."""
    return fit_lasso(X, y, alpha, positive=True, max_iter=max_iter, tol=tol)


def surrogate_weights(
    n_units: int, removed: Sequence[Sequence[int]], sims: Sequence[float], alpha: float = 0.01
) -> list[float]:
    """Per-unit attribution from draws (``removed[d]`` unit indices, ``sims[d]`` the similarity)."""
    rows = [(r, s) for r, s in zip(removed, sims) if not np.isnan(s)]
    if len(rows) < 2:
        return [float("nan")] * n_units
    X = np.zeros((len(rows), n_units))
    for d, (r, _) in enumerate(rows):
        X[d, list(r)] = 1.0
    y = np.array([1.0 - s for _, s in rows])
    w, _ = fit_nonnegative_lasso(X, y, alpha)
    return [float(v) for v in w]
