"""Which passages did the answer use: one question's influences -> a used/unused mark per passage.

Every rule first requires the influence to be above ``epsilon`` (``influence.epsilon``: at or
below it a passage counts as unused everywhere in ragray), then (``influence.used_rule`` with its
``influence.used_threshold``):

- ``absolute``: influence > ``threshold``;
- ``relative``: influence >= ``threshold`` x the question's largest influence;
- ``outlier``: influence > median + ``threshold`` x MAD of the question's influences (MAD: the
  median absolute deviation from the median, unscaled).

The relative and outlier rules look at the whole question, not one passage: whole-answer
log-probs move a little whenever any passage leaves the prompt (bf16 moves drop-one influences by
up to 0.4: benchmarks/results/dtype.json), so a fixed bar marks irrelevant passages beside the one
the answer came from. Which rule is ragray's default, and how it was measured against gold evidence:
benchmarks/bench_used.py, benchmarks/results/used_rule.json, docs/trust.md ("What 'used' means").
NaN influences (unmeasured) get None and take no part in the question's max, median or MAD.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import get_args

import numpy as np

from ragray.config import UsedRule

__all__ = ["USED_RULES", "used_marks"]

USED_RULES: tuple[str, ...] = get_args(UsedRule)


def used_marks(influence: Sequence[float], *, rule: str, threshold: float, epsilon: float) -> list[bool | None]:
    """One mark per passage (see the module docstring): True used, False unused, None unmeasured
    (NaN influence). A question with nothing measured gets all None."""
    if rule not in USED_RULES:
        raise ValueError(f"unknown used rule {rule!r}; valid rules: {', '.join(USED_RULES)}")
    values = [float(v) for v in influence]
    measured = np.array([v for v in values if not math.isnan(v)], dtype=float)
    if not len(measured):
        return [None] * len(values)
    if rule == "absolute":
        bar = threshold
    elif rule == "relative":
        bar = threshold * float(measured.max())
    else:
        median = float(np.median(measured))
        bar = median + threshold * float(np.median(np.abs(measured - median)))
    # relative keeps its maximum (>=); absolute and outlier need the value strictly above the bar
    above = (lambda v: v >= bar) if rule == "relative" else (lambda v: v > bar)
    return [None if math.isnan(v) else bool(v > epsilon and above(v)) for v in values]
