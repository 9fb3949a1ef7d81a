"""The deletion arms of one question: which units each call removes.

Arms (SPEC §5): ``DEL_NONE`` (nothing removed: the baseline), ``DEL_MOST`` / ``DEL_LEAST`` (the
K most / least important units), ``DEL_RANDOM`` (K random units, R draws) and ``DEL_Q`` (the
question removed, every passage kept). The explainers add ``LOO`` (one unit each), the
cumulative K adds the curves ``CUM_MOST`` / ``CUM_LEAST`` (K = 1..n), and the controls add
``CLOSED_BOOK`` (no passages) and ``MOVE_<position>`` (the most influential passage moved).

K labels: ``top-N`` is N units, ``top-P%`` is ⌈P/100 · n⌉ units (at least 1); a K that removes
every unit (or more) is skipped, because most, least and random then coincide.

Random draws are distinct K-subsets. When there are at most R of them (C(n, K) ≤ R) every subset
is used once (``exhaustive``: the random arm is known exactly); otherwise R distinct subsets are
sampled uniformly without replacement. The generator is seeded from the run seed, the question
id and K, so a re-run draws the same subsets whatever else changed.
"""

from __future__ import annotations

import hashlib
import itertools
import math
import re
from dataclasses import dataclass

import numpy as np

__all__ = [
    "Ablation", "RandomDraws", "resolve_k", "random_draws", "draw_count", "question_rng",
    "DEL_NONE", "DEL_MOST", "DEL_LEAST", "DEL_RANDOM", "DEL_Q", "LOO", "CUM_MOST", "CUM_LEAST",
    "CLOSED_BOOK", "CUMULATIVE",
]

DEL_NONE, DEL_MOST, DEL_LEAST, DEL_RANDOM, DEL_Q = "DEL_NONE", "DEL_MOST", "DEL_LEAST", "DEL_RANDOM", "DEL_Q"
LOO, CUM_MOST, CUM_LEAST, CLOSED_BOOK = "LOO", "CUM_MOST", "CUM_LEAST", "CLOSED_BOOK"
CUMULATIVE = "cumulative"

_TOP = re.compile(r"^top-(\d+)(%?)$")


@dataclass(frozen=True)
class Ablation:
    """One call of an experiment: the units it removes and how the prompt is built.

    ``order`` permutes the passages (position controls); ``question`` False drops the question
    (DEL_Q); ``closed_book`` drops every passage.
    """

    arm: str
    removed: tuple[int, ...] = ()
    k_label: str | None = None
    k: int = 0
    draw: int | None = None
    order: tuple[int, ...] | None = None
    question: bool = True
    closed_book: bool = False


def resolve_k(label: str, n_units: int) -> int | None:
    """Units a ``top-N`` / ``top-P%`` label removes among ``n_units``; None when it removes all."""
    m = _TOP.match(label)
    if m is None:
        raise ValueError(f"not a top-K label: {label!r}")
    k = max(1, math.ceil(int(m.group(1)) * n_units / 100)) if m.group(2) else int(m.group(1))
    return k if k < n_units else None


def question_rng(seed: int, question_id: str, *salt: int) -> np.random.Generator:
    """A generator that depends only on the seed, the question id and ``salt``."""
    digest = int.from_bytes(hashlib.sha256(question_id.encode("utf-8")).digest()[:8], "little")
    return np.random.default_rng([seed, digest, *salt])


@dataclass(frozen=True)
class RandomDraws:
    subsets: tuple[tuple[int, ...], ...]
    population: int  # C(n, K): how many distinct subsets exist
    exhaustive: bool


def draw_count(n_units: int, k: int, repeats: int) -> int:
    """How many subsets :func:`random_draws` gives: R, or all C(n, K) when there are fewer."""
    return min(repeats, math.comb(n_units, k))


def random_draws(n_units: int, k: int, repeats: int, rng: np.random.Generator) -> RandomDraws:
    """R distinct K-subsets of ``range(n_units)`` (all of them when there are at most R)."""
    population = math.comb(n_units, k)
    if draw_count(n_units, k, repeats) == population:
        return RandomDraws(tuple(itertools.combinations(range(n_units), k)), population, True)
    seen: dict[tuple[int, ...], None] = {}
    while len(seen) < repeats:
        seen.setdefault(tuple(sorted(int(i) for i in rng.choice(n_units, size=k, replace=False))), None)
    return RandomDraws(tuple(seen), population, False)
