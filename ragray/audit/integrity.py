"""The retrieval integrity score of one query (the auditor seed, SPEC §6).

Over the top-k retrieved documents R (chunk hits collapsed to their documents, in rank order) and
the ground-truth documents T:

    coverage    = |R ∩ T| / |T|          (= recall)
    precision   = |R ∩ T| / |R|
    noise_ratio = |R \\ T| / |R|
    score       = int(coverage × 70 − noise_ratio × 30)      (int() truncates toward zero)
    status      = PASS iff score ≥ 60

The score is computed in exact rational arithmetic, so it is the formula's true value: with
coverage 1 and noise 1/10 it is 67, where the seed's float expression gives 66
(70 − 3.0000000000000004 truncated). The score uses the fractions; reports show coverage and noise in percent (two decimals) and
precision/recall as fractions (two decimals), as the seed does. Edge cases: nothing retrieved →
precision 0 and noise 0 (there is no noise in an empty list), coverage 0, FAIL; an empty ground
truth cannot be audited → status ``UNSCORED`` with every number ``None`` (such queries are listed
and never counted as a pass or a fail).

The formula has a ceiling (:func:`best_score`): k retrieved documents and g < k gold documents
leave k − g slots of noise even when retrieval is perfect, so with one gold document the top 3
score at most 70 − 20 = 50 and such a query cannot PASS at k = 3 whatever the retriever does.
:attr:`AuditScore.best_score` says so per query; the status stays the formula's.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from fractions import Fraction
from typing import Any

__all__ = ["AuditScore", "audit_documents", "best_score", "PASS", "FAIL", "UNSCORED", "PASS_SCORE"]

PASS, FAIL, UNSCORED = "PASS", "FAIL", "UNSCORED"
PASS_SCORE = 60
COVERAGE_WEIGHT, NOISE_WEIGHT = 70, 30


@dataclass(frozen=True)
class AuditScore:
    retrieved: tuple[str, ...]
    truth: tuple[str, ...]
    relevant: tuple[str, ...]  # retrieved and in the truth, rank order
    missing: tuple[str, ...]  # in the truth, not retrieved
    noise: tuple[str, ...]  # retrieved, not in the truth
    coverage: float | None
    precision: float | None
    noise_ratio: float | None
    score: int | None
    status: str

    @property
    def recall(self) -> float | None:
        return self.coverage

    @property
    def best_score(self) -> int | None:
        """The formula's best score for this many gold documents among this many retrieved (None
        when nothing was retrieved or there is no truth)."""
        return best_score(len(self.truth), len(self.retrieved)) if self.truth and self.retrieved else None

    def report(self) -> dict[str, Any]:
        """The seed's report fields: coverage/noise in percent, precision/recall as fractions."""
        def pct(x: float | None) -> float | None:
            return None if x is None else round(100 * x, 2)

        def frac(x: float | None) -> float | None:
            return None if x is None else round(x, 2)

        return {
            "score": self.score,
            "coverage": pct(self.coverage),
            "precision": frac(self.precision),
            "recall": frac(self.recall),
            "noise_ratio": pct(self.noise_ratio),
            "status": self.status,
            "retrieved": list(self.retrieved),
            "relevant": list(self.relevant),
            "missing": list(self.missing),
            "noise": list(self.noise),
        }


def best_score(n_truth: int, n_retrieved: int) -> int:
    """The highest score the formula gives ``n_truth`` gold documents when ``n_retrieved`` documents
    are retrieved: as many of them gold as fit, the rest noise (``n_truth`` ≥ 1)."""
    if n_truth < 1:
        raise ValueError(f"need at least one gold document, got {n_truth}")
    found = min(n_truth, n_retrieved)
    return _score(found, n_truth, n_retrieved - found, n_retrieved)


def _score(found: int, n_truth: int, n_noise: int, n_retrieved: int) -> int:
    """``int(coverage × 70 − noise_ratio × 30)`` in exact arithmetic (no noise when nothing is retrieved)."""
    exact = Fraction(found, n_truth) * COVERAGE_WEIGHT
    if n_retrieved:
        exact -= Fraction(n_noise, n_retrieved) * NOISE_WEIGHT
    return int(exact)


def audit_documents(retrieved: Sequence[str], truth: Iterable[str], pass_score: int = PASS_SCORE) -> AuditScore:
    """Score the top-k documents ``retrieved`` (rank order, distinct) against ``truth``."""
    retrieved = tuple(dict.fromkeys(retrieved))
    truth_t = tuple(dict.fromkeys(truth))
    gold = set(truth_t)
    relevant = tuple(d for d in retrieved if d in gold)
    noise = tuple(d for d in retrieved if d not in gold)
    missing = tuple(d for d in truth_t if d not in set(retrieved))
    if not gold:
        return AuditScore(retrieved, truth_t, relevant, missing, noise, None, None, None, None, UNSCORED)
    coverage = len(relevant) / len(gold)
    precision = len(relevant) / len(retrieved) if retrieved else 0.0
    noise_ratio = len(noise) / len(retrieved) if retrieved else 0.0
    score = _score(len(relevant), len(gold), len(noise), len(retrieved))
    status = PASS if score >= pass_score else FAIL
    return AuditScore(retrieved, truth_t, relevant, missing, noise, coverage, precision, noise_ratio, score, status)
