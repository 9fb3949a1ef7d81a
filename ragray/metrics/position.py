"""Position control (SPEC §11): does influence follow the passage or the slot it is shown in?

Passages are shown in retrieval order, so retrieval rank k is also the slot next to the question.
With ``influence.position_control`` drop-one also runs with the passages in a second order
(reversed, or shuffled with a seed). Per passage ``i``: ``f_i`` its influence in retrieval order,
``c_i`` in the control order, and the content influence ``(f_i + c_i) / 2``. Per question, with
``Z = Σ|f| + Σ|c|``:

- ``position_sensitivity = Σ_i |f_i − c_i| / Z`` — how much a passage's influence changes when only
  its slot changes (0: the same in both orders; 1: no passage keeps any of its influence);
- the slot distance ``Σ_j |f(slot j) − c(slot j)| / Z`` compares what stands in the same slot;
- ``position_driven``: sensitivity ≥ the threshold and the slot distance at most half the
  passage distance — influence follows the slot rather than the passage.

Unmeasured (``None``) when fewer than 2 passages have an influence in both orders, or when no
passage has any influence in either order.
"""

from __future__ import annotations

import zlib
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

__all__ = ["PositionResult", "content_influence", "control_order", "position_analysis"]


@dataclass(frozen=True)
class PositionResult:
    content_influence: tuple[float, ...]  # retrieval order; NaN where either order is unmeasured
    position_sensitivity: float
    slot_distance: float
    position_driven: bool


def control_order(k: int, mode: str, seed: int, question_id: str) -> list[int]:
    """Indices (retrieval order) of the passages in slots 1..k of the control order."""
    if mode == "reversed":
        return list(range(k))[::-1]
    if mode == "shuffled":
        # a stable per-question seed (str hash() is salted per process)
        rng = np.random.default_rng([seed, zlib.crc32(question_id.encode("utf-8"))])
        order = list(range(k))
        for _ in range(8):  # a shuffle that leaves every passage in place tells nothing
            order = [int(i) for i in rng.permutation(k)]
            if k < 2 or order != list(range(k)):
                break
        return order
    raise ValueError(f"position_control: unknown order '{mode}' (reversed | shuffled)")


def content_influence(forward: Sequence[float], control: Sequence[float]) -> list[float]:
    """Per passage, the mean of its influence in both orders (NaN where either is unmeasured)."""
    return [(f + c) / 2 for f, c in zip(forward, control)]


def position_analysis(
    forward: Sequence[float], control: Sequence[float], order: Sequence[int], threshold: float
) -> PositionResult | None:
    """``forward``/``control``: influence per passage in retrieval order, measured with the passages
    in retrieval order and in ``order`` (slot j shows passage ``order[j]``)."""
    f = np.asarray(forward, dtype=np.float64)
    c = np.asarray(control, dtype=np.float64)
    ok = ~(np.isnan(f) | np.isnan(c))
    content = tuple(content_influence(forward, control))
    if ok.sum() < 2:
        return None
    total = float(np.abs(f[ok]).sum() + np.abs(c[ok]).sum())
    if total == 0.0:
        return None
    by_passage = float(np.abs(f[ok] - c[ok]).sum()) / total
    c_slot = c[np.asarray(order)]  # c_slot[j]: control influence of what stands in slot j
    slot_ok = ~(np.isnan(f) | np.isnan(c_slot))
    by_slot = float(np.abs(f[slot_ok] - c_slot[slot_ok]).sum()) / total
    return PositionResult(content, by_passage, by_slot, by_passage >= threshold and by_slot <= by_passage / 2)
