"""Jensen–Shannon divergence from top-N log-probabilities (vLLM's ``prompt_logprobs``, an
endpoint's ``top_logprobs``), for ``influence.mode: jsd`` where the full vocabulary is not returned.

At each answer position both sides give the log-probabilities of their N likeliest tokens (and of
the actual token). The two distributions are coarse-grained to the same partition: each token in
*both* lists, plus one bucket for the rest of the vocabulary (mass 1 − the listed ones). By the
data-processing inequality the JSD of the coarse-grained distributions is a LOWER BOUND of the
full-vocabulary JSD, exact when the mass outside the shared tokens is the same on both sides;
with the full vocabulary (transformers) ragray computes it exactly. Runs record which they got.
"""

from __future__ import annotations

import math
from collections.abc import Hashable, Mapping, Sequence

__all__ = ["jsd_top_n"]


def _jsd(p: Sequence[float], q: Sequence[float]) -> float:
    total = 0.0
    for a, b in zip(p, q):
        m = (a + b) / 2
        if a > 0:
            total += 0.5 * a * math.log(a / m)
        if b > 0:
            total += 0.5 * b * math.log(b / m)
    return max(0.0, total)


def jsd_top_n(reference: Sequence[Mapping[Hashable, float]], other: Sequence[Mapping[Hashable, float]]) -> float:
    """Σ over positions of the coarse-grained JSD (nats) of two lists of top-N log-prob rows."""
    total = 0.0
    for ref, row in zip(reference, other):
        shared = [t for t in ref if t in row]
        p = [math.exp(ref[t]) for t in shared]
        q = [math.exp(row[t]) for t in shared]
        p.append(max(0.0, 1.0 - sum(p)))
        q.append(max(0.0, 1.0 - sum(q)))
        total += _jsd(p, q)
    return total
