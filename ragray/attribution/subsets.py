"""Random passage subsets: the surrogate's training masks and the held-out subsets of the LDS check.

Each subset keeps every passage with probability ½ (ContextCite's ablation distribution), drawn
from a generator seeded by ``(seed, crc32(question id), purpose)``, so a question's subsets do not
depend on the rest of the run. Subsets are distinct within a draw and never equal to one in
``exclude`` (the LDS check's held-out subsets are never ones the surrogate was fitted on); when the
passages allow fewer distinct subsets than asked (2^k), the draw returns them all, once.

The surrogate's subsets may be shown in a shuffled order (``influence.shuffle_masks``) so that a
passage's weight is about its content, not its slot; held-out subsets keep retrieval order, as a
user's pipeline would show the passages that remain.
"""

from __future__ import annotations

import zlib
from collections.abc import Collection, Sequence
from dataclasses import dataclass

import numpy as np

__all__ = ["Subset", "draw_subsets", "top_k_removed"]

_PURPOSE = {"surrogate": 1, "heldout": 2, "random_control": 3, "design": 4}


@dataclass(frozen=True)
class Subset:
    """Kept passages (indices in retrieval order) and the order they are shown in."""

    kept: frozenset[int]
    shown: tuple[int, ...]

    def mask(self, k: int) -> list[float]:
        """1.0 for each kept passage of ``k``, else 0.0 (a row of the surrogate's design matrix)."""
        return [1.0 if i in self.kept else 0.0 for i in range(k)]


def rng_for(seed: int, question_id: str, purpose: str) -> np.random.Generator:
    """The generator of one question's draw for ``purpose`` (surrogate | heldout | random_control)."""
    return np.random.default_rng([seed, zlib.crc32(question_id.encode("utf-8")), _PURPOSE[purpose]])


def draw_subsets(k: int, n: int, *, seed: int, question_id: str, purpose: str, shuffle: bool = False,
                 exclude: Collection[frozenset[int]] = ()) -> list[Subset]:
    """``n`` distinct random subsets of ``k`` passages (fewer when 2^k minus ``exclude`` is fewer)."""
    rng = rng_for(seed, question_id, purpose)
    available = 2**k - len(set(exclude)) if k < 30 else n
    want = min(n, max(0, available))
    seen: set[frozenset[int]] = set(exclude)
    out: list[Subset] = []
    tries = 0
    while len(out) < want and tries < 200 * max(1, want):
        tries += 1
        kept = frozenset(int(i) for i in np.flatnonzero(rng.random(k) < 0.5))
        if kept in seen:
            continue
        seen.add(kept)
        shown = sorted(kept)
        if shuffle:
            shown = [shown[int(j)] for j in rng.permutation(len(shown))]
        out.append(Subset(kept, tuple(shown)))
    return out


def top_k_removed(scores: Sequence[float], k: int) -> tuple[int, ...]:
    """Indices of the ``k`` highest ``scores`` (NaN lowest; ties go to the earlier retrieval rank),
    the passages a top-k drop removes."""
    keyed = sorted(range(len(scores)), key=lambda i: (-(scores[i] if scores[i] == scores[i] else -np.inf), i))
    return tuple(sorted(keyed[:k]))
