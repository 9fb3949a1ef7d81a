"""Drop-one influence, influence ranks, Spearman ρ, dominance and the failure-mode flags.

The influence seed's loop, phases 5–7, for one question with passages in retrieval order 1..k:

    influence_i       = 1 − sim(baseline, ablated_i)              (sim = ROUGE-L F1 by default)
    influence rank    : largest influence = rank 1, ties share the average rank
    ρ                 = Spearman(retrieval ranks, influence ranks)  (scipy.stats.spearmanr)
    dominance         = max(influence) / Σ influence
    Divergent         ⇔ ρ < threshold (0.7)

Degenerate cases are explicit states, never numbers averaged as if measured:

- ``too_few_passages``: fewer than 2 passages with a measured influence;
- ``context_ignored``: the answer does not depend on the passages (the closed-book pass gives it
  as well) or every influence is 0 — no ablation changed the answer;
- ``diffuse``: the answer depends on the passages, but no passage's credit clears the question's
  noise (the interaction-aware measure only);
- ``constant_influence``: all influences equal but non-zero — ranks carry no order, ρ undefined;
- ``error``: the baseline call failed.

In those states ρ, dominance and divergent are ``None``. Influences of ablation calls that
failed are NaN and excluded from the ranks.

Beside the seed's ρ, every question with some influence above ε gets the tie-robust alignment
measures of :mod:`ragray.metrics.alignment` and, when ``usage_ndcg`` is below
``misalignment_threshold``, the ``misaligned`` flag — the verdict reports lead with. ``divergent``
stays the seed's ρ rule, unchanged.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
from scipy.stats import rankdata, spearmanr

from ragray.config import InfluenceConfig
from ragray.metrics.alignment import Alignment, alignment

__all__ = ["ALIGNMENT_COLUMNS", "FLAGS", "InfluenceResult", "analyze_influence", "error_result", "influence_ranks",
           "usage_gains"]

#: every flag a question can carry (SPEC §9 failure-mode detectors)
FLAGS = (
    "misaligned",
    "position_driven",
    "divergent",
    "inverted",
    "top1_ignored",
    "single_passage_dominance",
    "buried_evidence",
    "shared_evidence",
    "context_ignored",
)


@dataclass(frozen=True)
class InfluenceResult:
    """Influence analysis of one question (arrays are in retrieval order)."""

    state: str  # "measured" | "too_few_passages" | "context_ignored" | "diffuse" | "constant_influence" | "error"
    influence: tuple[float, ...]
    influence_rank: tuple[float, ...]  # NaN where the influence is NaN
    spearman_rho: float | None
    dominance: float | None
    divergent: bool | None
    flags: tuple[str, ...]
    alignment: Alignment | None = None  # None when nothing has an influence above ε
    #: the alignment measures carry a verdict (False: an unanswerable question's, shown not judged)
    judged: bool = True

    @property
    def measured(self) -> bool:
        return self.state == "measured"

    def columns(self) -> dict[str, object]:
        """The question-table columns of this result (alignment measures None where unmeasured)."""
        a = self.alignment
        return {"state": self.state, "spearman_rho": self.spearman_rho, "dominance": self.dominance,
                "divergent": self.divergent, "flags": list(self.flags)} | {
            name: getattr(a, name) if a is not None else None for name in ALIGNMENT_COLUMNS} | (
            {} if self.judged else {"misaligned": None})


#: the tie-robust alignment columns of the questions table (:class:`~ragray.metrics.alignment.Alignment`)
ALIGNMENT_COLUMNS = ("usage_ndcg", "rbo_alignment", "top1_used", "relies_on_lower_rank", "rho_ceiling", "misaligned")


def influence_ranks(influence: Sequence[float]) -> np.ndarray:
    """Rank 1 = most influential; ties share their average rank; NaN stays NaN."""
    x = np.asarray(influence, dtype=np.float64)
    ranks = np.full(len(x), np.nan)
    ok = ~np.isnan(x)
    ranks[ok] = rankdata(-x[ok], method="average")
    return ranks


def _flags(infl: np.ndarray, gains: np.ndarray, ranks: np.ndarray, rho: float, dominance: float,
           cfg: InfluenceConfig) -> list[str]:
    """The seed's flags: ρ's from the influences; top-1 ignored and buried evidence from what was
    used (``gains``: the influences themselves outside the interaction-aware measure)."""
    flags = []
    if rho < cfg.divergence_threshold:
        flags.append("divergent")
    if rho < 0:
        flags.append("inverted")
    # retrieval rank 1 is index 0: it barely matters while something else does
    if not np.isnan(gains[0]) and gains[0] <= cfg.epsilon and np.nanmax(gains) > cfg.epsilon:
        flags.append("top1_ignored")
    if dominance >= cfg.dominance_threshold:
        flags.append("single_passage_dominance")
    top = int(np.nanargmax(gains))  # first of the most used passages
    if top + 1 > cfg.buried_fraction * len(gains):
        flags.append("buried_evidence")
    return flags


def usage_gains(influence: Sequence[float], used: Sequence[bool | None], group: Sequence[int | None] | None = None,
                retrieval_ranks: Sequence[int] | None = None) -> np.ndarray:
    """The gain each passage adds to the alignment measures: its influence where used, else 0; a
    group of passages that substitute for or complement each other counts once, at its member the
    retriever ranked best, with the group's summed gain (so a copy of the evidence never flips a verdict)."""
    infl = np.asarray(influence, dtype=np.float64)
    gains = np.where([bool(u) for u in used], np.nan_to_num(infl, nan=0.0), 0.0)
    if group is None:
        return gains
    ranks = list(retrieval_ranks) if retrieval_ranks is not None else list(range(1, len(gains) + 1))
    for g in {g for g in group if g is not None}:
        members = [i for i, m in enumerate(group) if m == g]
        best = min(members, key=lambda i: ranks[i])
        total = float(gains[members].sum())
        gains[members] = 0.0
        gains[best] = total
    return gains


def analyze_influence(
    retrieval_ranks: Sequence[int], influence: Sequence[float], config: InfluenceConfig, *,
    used: Sequence[bool | None] | None = None, group: Sequence[int | None] | None = None,
    context_dependent: bool | None = None, judged: bool = True,
) -> InfluenceResult:
    """Phases 6–7 and the flags for one question. ``influence[i]`` belongs to ``retrieval_ranks[i]``.

    With ``used`` (the interaction-aware measure's marks) the alignment measures and the flags read
    the usage gains (:func:`usage_gains`): unused passages add nothing, grouped ones count once; a
    question whose answer depends on the passages but uses none clearly is ``diffuse``. An answer that
    does not depend on the passages (``context_dependent`` False) is ``context_ignored``: never aligned
    or misaligned. ``judged`` False (an unanswerable question: no answer to align with) keeps the
    alignment measures, shown, with no misaligned verdict and no misaligned flag."""
    infl = np.asarray(influence, dtype=np.float64)
    ranks = influence_ranks(infl)
    ok = ~np.isnan(infl)
    base = (tuple(float(v) for v in infl), tuple(float(r) for r in ranks))
    if ok.sum() < 2:
        return InfluenceResult("too_few_passages", *base, None, None, None, ())
    measured = infl[ok]
    if context_dependent is False or (used is None and np.all(measured == 0)):
        return InfluenceResult("context_ignored", *base, None, None, None, ("context_ignored",))
    gains = infl if used is None else usage_gains(infl, used, group, retrieval_ranks)
    if used is not None and not np.any(gains[ok] > config.epsilon):
        return InfluenceResult("diffuse", *base, None, None, None, ())
    align = alignment(gains, epsilon=config.epsilon, threshold=config.misalignment_threshold, p=config.rbo_p)
    lead = ("misaligned",) if judged and align is not None and align.misaligned else ()
    shared = ("shared_evidence",) if group is not None and any(g is not None for g in group) else ()
    if np.all(measured == measured[0]):
        return InfluenceResult("constant_influence", *base, None, None, None, (*lead, *shared), align, judged)
    rho = float(spearmanr(np.asarray(retrieval_ranks, dtype=np.float64)[ok], ranks[ok]).statistic)
    dominance = float(measured.max() / measured.sum())
    flags = _flags(infl, gains, ranks, rho, dominance, config)
    return InfluenceResult("measured", *base, rho, dominance, rho < config.divergence_threshold,
                           (*lead, *flags, *shared), align, judged)


def error_result(k: int) -> InfluenceResult:
    """The result of a question whose baseline call failed."""
    nan = tuple(float("nan") for _ in range(k))
    return InfluenceResult("error", nan, nan, None, None, None, ())
