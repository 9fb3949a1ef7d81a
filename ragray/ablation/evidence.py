"""What a log-prob question measures beyond drop-one (SPEC §12), on the question's CallBook.

- **closed book**: the scored answer with no passages: ``logprob_none`` and ``context_dependent``
  (``log p(y | all) − log p(y | none) ≥ influence.context_threshold``);
- **surrogate**: ``influence.masks`` random subsets (:mod:`ragray.ablation.subsets`, shown in a
  shuffled order by default), ``log p(y | subset)`` fitted by a Lasso on the keep-indicators
  (ContextCite): each passage's weight is the log-prob the answer gains when it is kept. Unlike
  drop-one, it credits two passages that each suffice (removing one alone changes nothing). With
  ``influence.surrogate_fit: masks_and_arms`` (the default) the fit also takes the full context and
  the drop-one arms, scored anyway, except any the LDS check holds out, so its LDS is never measured
  on a subset it was fitted on;
- **checks**: for every measure and control, the top-k drop and the LDS on held-out subsets
  (:mod:`ragray.metrics.attribution_checks`), all new prompts in ONE backend call.

Every scored context is kept as a :class:`~ragray.rows.influence.SubsetRow` (the raw data).
"""

from __future__ import annotations

import math
import time
from collections.abc import Callable, Collection, Mapping, Sequence
from dataclasses import dataclass

import numpy as np

from ragray.ablation.engine import CallBook
from ragray.ablation.subsets import Subset, draw_subsets, rng_for, top_k_removed
from ragray.config import InfluenceConfig
from ragray.generation.base import ChatPrompt
from ragray.metrics.attribution_checks import lds, top_k_drop
from ragray.metrics.linear import fit_lasso
from ragray.rows.influence import CheckRow, SubsetRow
from ragray.types import Passage

__all__ = ["Attribution", "ClosedBook", "Surrogate", "closed_book", "fit_points", "fit_surrogate", "heldout_subsets",
           "run_checks"]

#: a prompt for passages in the order given
Build = Callable[[Sequence[Passage]], ChatPrompt]


@dataclass(frozen=True)
class ClosedBook:
    logprob_none: float
    context_dependent: bool | None
    row: SubsetRow


def closed_book(book: CallBook, build: Build, question_id: str, answer: str, logprob_all: float,
                threshold: float) -> ClosedBook:
    """Score the answer with no passages (one pass)."""
    (lp,) = book.score([build(())], [answer])
    dependent = None if math.isnan(lp) or math.isnan(logprob_all) else bool(logprob_all - lp >= threshold)
    return ClosedBook(lp, dependent, SubsetRow(question_id, "closed_book", (), lp))


@dataclass(frozen=True)
class Surrogate:
    weights: list[float]
    subsets: list[Subset]
    rows: tuple[SubsetRow, ...]
    passes: int
    seconds: float


def heldout_subsets(k: int, config: InfluenceConfig, question_id: str,
                    exclude: Collection[frozenset[int]] = ()) -> list[Subset]:
    """The LDS check's held-out subsets of one question (seeded: the surrogate can know them before
    the check runs, and leave them out of its fit)."""
    return draw_subsets(k, config.check_subsets, seed=config.check_seed, question_id=question_id,
                        purpose="heldout", exclude=exclude)


def fit_points(masks: Sequence[tuple[Subset, float]], known: Mapping[frozenset[int], float], k: int,
               reserved: Collection[frozenset[int]] = ()) -> tuple[np.ndarray, np.ndarray]:
    """The surrogate's design matrix and targets: its scored masks, plus the already scored
    subsets in ``known`` (the full context, the drop-one arms) that the LDS check does not hold out
    (``reserved``); NaN log-probs are left out. An arm that keeps the same passages as a mask stays:
    it is another measurement (the mask showed them in another order)."""
    held = set(reserved)
    rows = [(s.kept, lp) for s, lp in masks]
    rows += [(kept, lp) for kept, lp in known.items() if kept not in held]
    rows = [(kept, lp) for kept, lp in rows if not math.isnan(lp)]
    x = np.zeros((len(rows), k))
    for r, (kept, _) in enumerate(rows):
        x[r, list(kept)] = 1.0
    return x, np.array([lp for _, lp in rows])


def fit_surrogate(book: CallBook, build: Build, passages: Sequence[Passage], question_id: str, answer: str,
                  config: InfluenceConfig, known: Mapping[frozenset[int], float] | None = None) -> Surrogate:
    """Score ``config.surrogate_masks`` random subsets and fit the Lasso on them and on ``known``
    (subsets this question already scored, with ``surrogate_fit: masks_and_arms``); NaN weights when
    fewer than 4 masks could be scored."""
    start, before = time.perf_counter(), book.score_passes
    k = len(passages)
    subsets = draw_subsets(k, config.surrogate_masks, seed=config.mask_seed, question_id=question_id,
                           purpose="surrogate", shuffle=config.shuffle_masks)
    lps = book.score([build([passages[i] for i in s.shown]) for s in subsets], [answer] * len(subsets))
    ok = [(s, lp) for s, lp in zip(subsets, lps) if not math.isnan(lp)]
    if len(ok) >= 4:
        reserved = ({s.kept for s in heldout_subsets(k, config, question_id, {s.kept for s in subsets})}
                    if config.check_subsets else set())
        x, y = fit_points(ok, known if config.surrogate_fit == "masks_and_arms" and known else {}, k, reserved)
        w, _ = fit_lasso(x, y, config.surrogate_alpha)
        weights = [float(v) for v in w]
    else:
        weights = [float("nan")] * k
    rows = tuple(SubsetRow(question_id, "surrogate", tuple(passages[i].id for i in s.shown), lp)
                 for s, lp in zip(subsets, lps))
    return Surrogate(weights, subsets, rows, book.score_passes - before, time.perf_counter() - start)


@dataclass(frozen=True)
class Attribution:
    """One measure's per-passage scores (retrieval order), higher = more used."""

    name: str
    scores: list[float]
    control: bool


def random_scores(k: int, seed: int, question_id: str) -> list[float]:
    """The random control's seeded uniform scores."""
    return [float(v) for v in rng_for(seed, question_id, "random_control").random(k)]


def run_checks(book: CallBook, build: Build, passages: Sequence[Passage], question_id: str, answer: str,
               logprob_all: float, measures: Sequence[Attribution], config: InfluenceConfig,
               exclude: Sequence[Subset] = ()) -> tuple[tuple[CheckRow, ...], tuple[SubsetRow, ...], int, float]:
    """Top-k drop and LDS of every measure: ``(check rows, subset rows, passes, seconds)``."""
    start, before = time.perf_counter(), book.score_passes
    k = len(passages)
    heldout = heldout_subsets(k, config, question_id, {s.kept for s in exclude})
    ks = [n for n in config.check_top_k if n < k]
    removals = {(m.name, n): top_k_removed(m.scores, n) for m in measures for n in ks}
    distinct = list(dict.fromkeys(removals.values()))

    def without(removed: tuple[int, ...]) -> ChatPrompt:
        return build([p for i, p in enumerate(passages) if i not in removed])

    prompts = [build([passages[i] for i in s.shown]) for s in heldout] + [without(r) for r in distinct]
    lps = book.score(prompts, [answer] * len(prompts))
    held_lps, removal_lps = lps[: len(heldout)], dict(zip(distinct, lps[len(heldout):]))
    rows = []
    for m in measures:
        value = lds(m.scores, [sorted(s.kept) for s in heldout], held_lps) if heldout else None
        drops = tuple(top_k_drop(logprob_all, removal_lps[removals[(m.name, n)]]) for n in ks)
        rows.append(CheckRow(question_id, m.name, m.control, value, len(heldout), tuple(ks),
                             tuple(float("nan") if d is None else d for d in drops)))
    subset_rows = [SubsetRow(question_id, "heldout", tuple(passages[i].id for i in s.shown), lp)
                   for s, lp in zip(heldout, held_lps)]
    subset_rows += [SubsetRow(question_id, "top_k", tuple(p.id for i, p in enumerate(passages) if i not in r),
                              removal_lps[r]) for r in distinct]
    return tuple(rows), tuple(subset_rows), book.score_passes - before, time.perf_counter() - start
