"""Dataset-level results of ``ragray interpret`` (``summary.json``).

Per K: the share of each case (Wilson 95% intervals), and paired tests across questions of the
DEL_MOST and DEL_LEAST arms against the random arm — each question contributes its random-arm
mean similarity as the pair of its sim_most / sim_least. McNemar compares changed/unchanged
(similarity < T), where the random arm counts as changed when its mean similarity is below T.
Wilcoxon signed-rank and the paired t-test compare the similarities; effect sizes are the mean
difference (random − arm, positive when the arm hurts more), its CI, Cohen's d_z and the
rank-biserial correlation. Questions that failed or whose case could not be computed at a K are
left out of that K's tests (they are counted). ``verdict``: the K's answer to "are the
explanations faithful?" from those tests (:mod:`ragray.faithfulness.verdict`).
"""

from __future__ import annotations

import math
from collections import Counter
from collections.abc import Sequence
from typing import Any

from ragray.config.renamed import OLD_AGREEMENT, with_old_columns
from ragray.config import ExperimentConfig, FaithfulnessConfig
from ragray.faithfulness.arms import CUMULATIVE, DEL_RANDOM
from ragray.faithfulness.cases import CASES
from ragray.faithfulness.attribution import attribution_order
from ragray.metrics.stats import mcnemar_exact, mean_ci, paired_tests, share_ci, stratified_rank_test
from ragray.faithfulness.verdict import KTests, circular, family_verdicts
from ragray.rows.faithfulness import FaithfulnessRecord
from ragray.rows.summaries import ControlsSummary, DeletionCurveSummary, FaithfulnessCost, FaithfulnessSummary

__all__ = ["summarize_faithfulness"]


def _mean(values: Sequence[float | None]) -> float | None:
    vals = [float(v) for v in values if v is not None and not math.isnan(v)]
    return sum(vals) / len(vals) if vals else None


def _tests(tested: list[dict[str, Any]]) -> dict[str, Any]:
    """DEL_MOST and DEL_LEAST against each question's random-arm mean, paired across questions."""
    rand = [r["random_mean"] for r in tested]
    return {f"{arm}_vs_random": {
        "paired": paired_tests(rand, [r[f"sim_{arm}"] for r in tested]),
        "mcnemar": mcnemar_exact([r[f"changed_{arm}"] for r in tested], [r["changed_random"] for r in tested]),
    } for arm in ("most", "least")}


def _tested(rows: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """A K's case rows whose random arm ran (the others are inconclusive before any test)."""
    return [r for r in rows if r.get("random_mean") is not None]


def _by_construction(row: dict[str, Any], fc: FaithfulnessConfig) -> bool:
    """Whether a case's test re-measures what the explainer ranked by (rows written before the
    ``by_construction`` column: the explainer and K say)."""
    if row.get("by_construction") is not None:
        return bool(row["by_construction"])
    return circular(fc.explainer, fc.mode, row["k"])


def _rank_tests(rows: list[dict[str, Any]], draws: dict[tuple[str, str], list[float]], fc: FaithfulnessConfig
                ) -> KTests:
    """The K's verdict tests on its tested questions, less those where the test is circular (and
    questions without random draws): DEL_MOST and DEL_LEAST each among its question's ``draws``."""
    tested = _tested(rows)
    kept = [r for r in tested if not _by_construction(r, fc) and draws.get((r["question_id"], r["k_label"]))]
    n_circular = sum(_by_construction(r, fc) for r in tested)
    most, least = (stratified_rank_test([(r[f"sim_{arm}"], draws[(r["question_id"], r["k_label"])]) for r in kept])
                   for arm in ("most", "least"))
    return len(kept), most, least, n_circular


def _random_draws(records: Sequence[FaithfulnessRecord]) -> dict[tuple[str, str], list[float]]:
    """Each question's random-removal similarities per K (failed draws left out, as its case does)."""
    draws: dict[tuple[str, str], list[float]] = {}
    for record in records:
        for a in record.arms:
            if a.arm == DEL_RANDOM and a.similarity is not None and not math.isnan(a.similarity):
                draws.setdefault((a.question_id, a.k_label), []).append(a.similarity)
    return draws


def _per_k(rows: list[dict[str, Any]], fc: FaithfulnessConfig) -> dict[str, Any]:
    counts = Counter(r["case"] for r in rows)
    tested = _tested(rows)
    rand = [r["random_mean"] for r in tested]
    out: dict[str, Any] = {
        "n_questions": len(rows),
        "n_tested": len(tested),
        "cases": {c: {"count": counts.get(c, 0), **share_ci(counts.get(c, 0), len(rows))} for c in CASES},
        "random_mean": mean_ci(rand) if rand else None,
        "sim_most_mean": _mean([r["sim_most"] for r in tested]),
        "sim_least_mean": _mean([r["sim_least"] for r in tested]),
    }
    out.update(_tests(tested))
    return out


def summarize_faithfulness(records: Sequence[FaithfulnessRecord], config: ExperimentConfig,
                           model_id: str) -> FaithfulnessSummary:
    """``summary.json`` of a faithfulness experiment over its finished ``records``."""
    fc = config.faithfulness
    questions = [r.question.as_dict() for r in records]
    ok = [q for q in questions if q["error"] is None]
    cases = [c.as_dict() for r in records for c in r.cases]
    by_k = {label: [c for c in cases if c["k_label"] == label] for label in fc.k_values if label != CUMULATIVE}
    per_k = {label: _per_k(rows, fc) for label, rows in by_k.items()}
    # the K's verdicts as one family: a run's several K are several claims (Holm over them)
    draws = _random_draws(records)
    verdicts = family_verdicts({label: _rank_tests(rows, draws, fc) for label, rows in by_k.items()},
                               fc.decision.alpha, explainer=fc.explainer)
    for label, verdict in verdicts.items():
        per_k[label]["verdict"] = verdict
    agreement = {}
    order = attribution_order()
    for i, a in enumerate(order):
        for b in order[i + 1 :]:
            if a in fc.attributions and b in fc.attributions:
                agreement[f"{a}_vs_{b}"] = {
                    "mean_spearman": _mean([q[f"rho_{a}_{b}"] for q in ok]),
                    "top1_agreement": _mean([q[f"top1_{a}_{b}"] for q in ok]),
                }
    agreement = with_old_columns(agreement, OLD_AGREEMENT)
    explained = _mean([q["explainer_calls"] for q in ok])
    flat = _mean([q["n_units_flat"] for q in ok])
    auc_most, auc_least = [q["auc_most"] for q in ok], [q["auc_least"] for q in ok]
    paired_auc = [(m, s) for m, s in zip(auc_most, auc_least) if m is not None and s is not None]
    return FaithfulnessSummary(
        model=model_id,
        backend=config.generation.backend,
        level=fc.level,
        hierarchical=fc.hierarchical,
        explainer=fc.explainer,
        mode=fc.mode,
        similarity=fc.similarity,
        threshold_t=fc.threshold_t,
        random_repeats=fc.random_repeats,
        decision=fc.decision.model_dump(),
        n_questions=len(questions),
        n_failed=len(questions) - len(ok),
        per_k=per_k,
        controls=ControlsSummary(
            parametric_rate=_mean([q["parametric"] for q in ok]),
            closed_book_sim_mean=_mean([q["closed_book_sim"] for q in ok]),
            del_q_sim_mean=_mean([q["del_q_sim"] for q in ok]),
            position_sensitive_rate=_mean([q["position_sensitive"] for q in ok]),
            **{f"move_{w}_sim_mean": _mean([q[f"move_{w}_sim"] for q in ok]) for w in ("start", "middle", "end")},
        ),
        deletion_curve=DeletionCurveSummary(
            auc_most_mean=_mean(auc_most),
            auc_least_mean=_mean(auc_least),
            least_vs_most=paired_tests([s for _, s in paired_auc], [m for m, _ in paired_auc]) if paired_auc else None,
        ),
        agreement=agreement,
        cost=FaithfulnessCost(
            calls_requested_per_question=_mean([q["calls_requested"] for q in questions]),
            calls_generated_per_question=_mean([q["calls_generated"] for q in questions]),
            score_passes_per_question=_mean([q["score_passes"] for q in questions]),
            explainer_calls_per_question=explained,
            explainer_calls_flat_per_question=flat,
            hierarchical_saving=(1 - explained / flat) if fc.hierarchical and explained is not None and flat else None,
            seconds_per_question=_mean([q["seconds"] for q in questions]),
        ),
    )
