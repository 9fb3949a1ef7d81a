"""Drop-one influence, influence ranks, Spearman ρ, dominance and the failure-mode flags.

The influence seed's loop, phases 5–7, for one question with passages in retrieval order 1..k:

    influence_i       = 1 − sim(baseline, ablated_i)              (sim = ROUGE-L F1 by default)
    influence rank    : largest influence = rank 1, ties share the average rank
    ρ                 = Spearman(retrieval ranks, influence ranks)  (scipy.stats.spearmanr)
    dominance         = max(influence) / Σ influence
    Divergent         ⇔ ρ < threshold (0.7)

Degenerate cases are explicit states, never numbers averaged as if measured:

- ``too_few_passages``: fewer than 2 passages with a measured influence;
- ``context_ignored``: every influence is 0 — no ablation changed the answer;
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

__all__ = ["ALIGNMENT_COLUMNS", "FLAGS", "InfluenceResult", "analyze_influence", "error_result", "influence_ranks"]

#: every flag a question can carry (SPEC §9 failure-mode detectors)
FLAGS = (
    "misaligned",
    "position_driven",
    "divergent",
    "inverted",
    "top1_ignored",
    "single_passage_dominance",
    "buried_evidence",
    "context_ignored",
)


@dataclass(frozen=True)
class InfluenceResult:
    """Influence analysis of one question (arrays are in retrieval order)."""

    state: str  # "measured" | "too_few_passages" | "context_ignored" | "constant_influence" | "error"
    influence: tuple[float, ...]
    influence_rank: tuple[float, ...]  # NaN where the influence is NaN
    spearman_rho: float | None
    dominance: float | None
    divergent: bool | None
    flags: tuple[str, ...]
    alignment: Alignment | None = None  # None when nothing has an influence above ε

    @property
    def measured(self) -> bool:
        return self.state == "measured"

    def columns(self) -> dict[str, object]:
        """The question-table columns of this result (alignment measures None where unmeasured)."""
        a = self.alignment
        return {"state": self.state, "spearman_rho": self.spearman_rho, "dominance": self.dominance,
                "divergent": self.divergent, "flags": list(self.flags)} | {
            name: getattr(a, name) if a is not None else None for name in ALIGNMENT_COLUMNS}


#: the tie-robust alignment columns of the questions table (:class:`~ragray.metrics.alignment.Alignment`)
ALIGNMENT_COLUMNS = ("usage_ndcg", "rbo_alignment", "top1_used", "relies_on_lower_rank", "rho_ceiling", "misaligned")


def influence_ranks(influence: Sequence[float]) -> np.ndarray:
    """Rank 1 = most influential; ties share their average rank; NaN stays NaN."""
    x = np.asarray(influence, dtype=np.float64)
    ranks = np.full(len(x), np.nan)
    ok = ~np.isnan(x)
    ranks[ok] = rankdata(-x[ok], method="average")
    return ranks


def _flags(infl: np.ndarray, ranks: np.ndarray, rho: float, dominance: float, cfg: InfluenceConfig) -> list[str]:
    flags = []
    if rho < cfg.divergence_threshold:
        flags.append("divergent")
    if rho < 0:
        flags.append("inverted")
    # retrieval rank 1 is index 0: it barely matters while something else does
    if not np.isnan(infl[0]) and infl[0] <= cfg.epsilon and np.nanmax(infl) > cfg.epsilon:
        flags.append("top1_ignored")
    if dominance >= cfg.dominance_threshold:
        flags.append("single_passage_dominance")
    top = int(np.nanargmax(infl))  # first of the most influential passages
    if top + 1 > cfg.buried_fraction * len(infl):
        flags.append("buried_evidence")
    return flags


def analyze_influence(
    retrieval_ranks: Sequence[int], influence: Sequence[float], config: InfluenceConfig
) -> InfluenceResult:
    """Phases 6–7 and the flags for one question. ``influence[i]`` belongs to ``retrieval_ranks[i]``."""
    infl = np.asarray(influence, dtype=np.float64)
    ranks = influence_ranks(infl)
    ok = ~np.isnan(infl)
    base = (tuple(float(v) for v in infl), tuple(float(r) for r in ranks))
    if ok.sum() < 2:
        return InfluenceResult("too_few_passages", *base, None, None, None, ())
    measured = infl[ok]
    if np.all(measured == 0):
        return InfluenceResult("context_ignored", *base, None, None, None, ("context_ignored",))
    align = alignment(infl, epsilon=config.epsilon, threshold=config.misalignment_threshold, p=config.rbo_p)
    lead = ("misaligned",) if align is not None and align.misaligned else ()
    if np.all(measured == measured[0]):
        return InfluenceResult("constant_influence", *base, None, None, None, lead, align)
    rho = float(spearmanr(np.asarray(retrieval_ranks, dtype=np.float64)[ok], ranks[ok]).statistic)
    dominance = float(measured.max() / measured.sum())
    flags = _flags(infl, ranks, rho, dominance, config)
    return InfluenceResult("measured", *base, rho, dominance, rho < config.divergence_threshold,
                           (*lead, *flags), align)


def error_result(k: int) -> InfluenceResult:
    """The result of a question whose baseline call failed."""
    nan = tuple(float("nan") for _ in range(k))
    return InfluenceResult("error", nan, nan, None, None, None, ())
