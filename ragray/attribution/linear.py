"""The Lasso by cyclic coordinate descent: the sparse linear fit of ContextCite-style surrogates.

    minimize  1/(2m) ‖y − b − Xw‖² + α‖w‖₁   (optionally subject to w ≥ 0)

— the objective of scikit-learn's ``Lasso(alpha=α, positive=...)`` — on centered data, so the
intercept is not penalized. Small (tens of subsets × tens of passages), exact, no dependency.
"""

from __future__ import annotations

import numpy as np

__all__ = ["fit_lasso"]


def fit_lasso(X: np.ndarray, y: np.ndarray, alpha: float = 0.01, *, positive: bool = False,
              max_iter: int = 2000, tol: float = 1e-9) -> tuple[np.ndarray, float]:
    """``(w, intercept)``; a column that never varies gets weight 0."""
    X = np.asarray(X, dtype=np.float64)
    y = np.asarray(y, dtype=np.float64)
    m, n = X.shape
    x_mean, y_mean = X.mean(axis=0), y.mean()
    Xc, yc = X - x_mean, y - y_mean
    col_sq = (Xc**2).sum(axis=0)
    w = np.zeros(n)
    resid = yc.copy()
    for _ in range(max_iter):
        biggest = 0.0
        for j in range(n):
            if col_sq[j] == 0.0:
                continue
            old = w[j]
            rho = Xc[:, j] @ resid + col_sq[j] * old
            shrunk = max(0.0, abs(rho) - m * alpha) / col_sq[j]
            new = shrunk if positive and rho > 0 or not positive and rho >= 0 else (0.0 if positive else -shrunk)
            if new != old:
                resid -= Xc[:, j] * (new - old)
                w[j] = new
                biggest = max(biggest, abs(new - old))
        if biggest < tol:
            break
    return w, float(y_mean - x_mean @ w)
