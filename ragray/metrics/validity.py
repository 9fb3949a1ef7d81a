"""The validity panel (SPEC §11): does this run's attribution find the gold evidence?

With gold passage ids (HotpotQA supporting facts, SQuAD, NQ, SciFact, …) the passage an answer
needs is known. Per question and per *measure* — each influence the run computed, and controls
that cost no model calls — the passages are scored and two numbers are taken:

- ``recovery@1``: the top-scored passage is gold. Ties at the top share it: the share of gold
  among the tied top passages (the expected hit under random tie-breaking), so a measure that
  ties everything scores chance, not 1;
- ``AUC``: P(score of a gold passage > score of a non-gold one), ties counting ½ (Mann–Whitney).

Means over questions with at least one gold and one non-gold passage, with percentile bootstrap
95% intervals (questions resampled, seeded), over all such questions and over those whose
baseline answer is correct (token F1 ≥ 0.5): attribution of a wrong answer need not point at gold.

Controls: ``retrieval_rank`` (the retriever's order), ``answer_similarity`` (cosine of each
passage with the baseline answer, MiniLM — the control a 2026 benchmark found to match
leave-one-out), ``random`` (exact expectations: recovery = share of gold, AUC = ½). Every measure
is compared with the embedding control by a paired bootstrap of the AUC difference; a measure
that does not beat it is said to in plain words (``verdicts``); below ``MIN_VERDICT_QUESTIONS``
questions the subset gets no verdict, only its numbers.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

__all__ = ["CORRECT_F1", "MIN_VERDICT_QUESTIONS", "PanelColumn", "question_scores", "run_measures", "validity_panel"]

#: a baseline answer counts as correct at token F1 >= this
CORRECT_F1 = 0.5
#: fewer questions than this give no verdict against the embedding control (the CI means little)
MIN_VERDICT_QUESTIONS = 10


@dataclass(frozen=True)
class PanelColumn:
    """A column of the passages table the validity panel reads as a ranking of the passages
    (higher = more important; ``retrieval_rank``'s is its order; ``random`` the expected value of a
    random ranking); ``control`` marks the no-model-call controls. Not a measure: the measures
    (:class:`ragray.attribution.base.Measure`) fill these columns."""

    name: str
    label: str
    column: str
    control: bool = False


def run_measures(passages: Sequence[Mapping[str, Any]], influence_label: str) -> list[PanelColumn]:
    """The measures a run's passages table supports (columns that hold values)."""
    has = {c for p in passages for c, v in p.items() if v is not None}
    out = [PanelColumn("influence", influence_label, "influence")]
    if "content_influence" in has:
        out.append(PanelColumn("content_influence", "content influence (mean of both orders)", "content_influence"))
    out.append(PanelColumn("retrieval_rank", "retrieval rank (control)", "retrieval_rank", control=True))
    if "answer_similarity" in has:
        out.append(PanelColumn("answer_similarity", "answer–passage embedding similarity (control)",
                           "answer_similarity", control=True))
    out.append(PanelColumn("random", "random (control, expected)", "", control=True))
    return out


def _recovery_auc(scores: np.ndarray, gold: np.ndarray) -> tuple[float, float]:
    top = scores == scores.max()
    recovery = float(gold[top].mean())
    g, n = scores[gold], scores[~gold]
    diff = g[:, None] - n[None, :]
    auc = float(((diff > 0) + 0.5 * (diff == 0)).mean())
    return recovery, auc


def question_scores(rows: Sequence[Mapping[str, Any]], measure: PanelColumn) -> tuple[float, float] | None:
    """``(recovery@1, AUC)`` of one question's passages, or None when not defined."""
    gold = np.array([bool(r.get("is_gold")) for r in rows])
    if gold.all() or not gold.any():
        return None
    if measure.name == "random":
        return float(gold.mean()), 0.5
    if measure.column == "retrieval_rank":
        vals = [-float(r["retrieval_rank"]) for r in rows]
    else:
        vals = [r.get(measure.column) for r in rows]
        vals = [float("nan") if v is None else float(v) for v in vals]
    scores = np.asarray(vals, dtype=np.float64)
    ok = ~np.isnan(scores)
    if not (gold[ok].any() and (~gold[ok]).any()):
        return None
    return _recovery_auc(scores[ok], gold[ok])


def bootstrap_ci(values: np.ndarray, boot: np.ndarray) -> dict[str, float | None]:
    """Mean and percentile-bootstrap 95% interval (``boot``: resampled question indices)."""
    if len(values) == 0:
        return {"mean": None, "low": None, "high": None}
    means = values[boot].mean(axis=1)
    return {"mean": float(values.mean()), "low": float(np.percentile(means, 2.5)),
            "high": float(np.percentile(means, 97.5))}


def _subset(per_q: dict[str, dict[str, tuple[float, float]]], measures: list[PanelColumn], qids: list[str],
            n_boot: int, seed: int) -> dict[str, Any]:
    """The table over ``qids`` (questions every measure scores)."""
    qids = [q for q in qids if all(m.name in per_q[q] for m in measures)]
    out: dict[str, Any] = {"n": len(qids), "measures": {}, "vs_embedding": {}}
    if not qids:
        return out
    boot = np.random.default_rng(seed).integers(0, len(qids), size=(n_boot, len(qids)))
    arr = {m.name: np.array([per_q[q][m.name] for q in qids]) for m in measures}
    for m in measures:
        out["measures"][m.name] = {"label": m.label, "control": m.control,
                                   "recovery_at_1": bootstrap_ci(arr[m.name][:, 0], boot), "auc": bootstrap_ci(arr[m.name][:, 1], boot)}
    if "answer_similarity" in arr:
        base = arr["answer_similarity"]
        for m in measures:
            if m.control:
                continue
            d = bootstrap_ci(arr[m.name][:, 1] - base[:, 1], boot)
            verdict = ("too few questions to compare with" if len(qids) < MIN_VERDICT_QUESTIONS
                       else "beats" if d["low"] > 0 else "worse than" if d["high"] < 0 else "does not beat")
            out["vs_embedding"][m.name] = {"auc_difference": d, "verdict": verdict,
                                           "recovery_difference": bootstrap_ci(arr[m.name][:, 0] - base[:, 0], boot)}
    return out


def _pct(v: float | None) -> str:
    return "–" if v is None else f"{100 * v:.0f}%"


def _verdicts(subsets: dict[str, Any], measures: list[PanelColumn]) -> list[str]:
    """Plain-words lines: does each measure beat the embedding control?"""
    lines = []
    for name, sub in subsets.items():
        for m in measures:
            cmp = sub["vs_embedding"].get(m.name)
            if cmp is None:
                continue
            mine, ctrl = sub["measures"][m.name], sub["measures"]["answer_similarity"]
            d = cmp["auc_difference"]
            lines.append(
                f"{name} ({sub['n']} questions): {m.label} {cmp['verdict']} the answer–passage embedding "
                f"control: gold found first {_pct(mine['recovery_at_1']['mean'])} vs "
                f"{_pct(ctrl['recovery_at_1']['mean'])}, AUC {mine['auc']['mean']:.2f} vs {ctrl['auc']['mean']:.2f} "
                f"(difference 95% CI {d['low']:+.2f} .. {d['high']:+.2f})."
            )
    return lines


def validity_panel(questions: Sequence[Mapping[str, Any]], passages: Sequence[Mapping[str, Any]],
                   influence_label: str, *, n_boot: int = 2000, seed: int = 0) -> dict[str, Any]:
    """``summary.json``'s ``validity`` block for a run's questions and passages tables."""
    by_q: dict[str, list[Mapping[str, Any]]] = defaultdict(list)
    for p in passages:
        by_q[p["question_id"]].append(p)
    if not any(p.get("is_gold") for p in passages):
        return {"available": False, "reason": "no retrieved passage is marked gold (no gold passage ids)"}
    measures = run_measures(passages, influence_label)
    per_q: dict[str, dict[str, tuple[float, float]]] = {}
    correct: list[str] = []
    for q in questions:
        qid = q["question_id"]
        if q.get("error") is not None or qid not in by_q:
            continue
        rows = sorted(by_q[qid], key=lambda r: r["retrieval_rank"])
        got = {m.name: s for m in measures if (s := question_scores(rows, m)) is not None}
        if "random" not in got:  # no gold, or only gold, retrieved
            continue
        per_q[qid] = got
        if q.get("f1") is not None and q["f1"] >= CORRECT_F1:
            correct.append(qid)
    subsets = {"all": _subset(per_q, measures, list(per_q), n_boot, seed),
               "correct": _subset(per_q, measures, correct, n_boot, seed)}
    return {
        "available": bool(per_q),
        "reason": None if per_q else "no question has both gold and non-gold passages among its retrieved ones",
        "n_questions_with_gold": len(per_q),
        "correct_f1": CORRECT_F1,
        "n_bootstrap": n_boot,
        "seed": seed,
        "subsets": subsets,
        "verdicts": _verdicts(subsets, measures),
    }
