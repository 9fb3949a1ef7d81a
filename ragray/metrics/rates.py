"""Rates k of n with their Wilson score interval (Wilson 1927): the run headline's misaligned rate
and the edit test's precision and recall."""

from __future__ import annotations

import math
from typing import Any

__all__ = ["rate", "wilson_interval"]


def wilson_interval(k: int, n: int, z: float = 1.959964) -> tuple[float | None, float | None]:
    """Wilson score interval of the rate k / n (None, None for n = 0): stays inside [0, 1] and is
    honest at 0 of n or n of n, where the normal interval collapses."""
    if n == 0:
        return None, None
    p, z2 = k / n, z * z
    centre = (p + z2 / (2 * n)) / (1 + z2 / n)
    half = z * math.sqrt(p * (1 - p) / n + z2 / (4 * n * n)) / (1 + z2 / n)
    return max(0.0, centre - half), min(1.0, centre + half)


def rate(k: int, n: int) -> dict[str, Any]:
    """``{"k", "n", "share", "ci95"}``: k of n, its share (None for n = 0) and Wilson 95% interval."""
    return {"k": k, "n": n, "share": k / n if n else None, "ci95": list(wilson_interval(k, n))}
