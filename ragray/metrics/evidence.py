"""Validity panel v2 (SPEC §12): does each attribution measure beat every free control — on gold
evidence, and on what removing its passages does to the answer?

Measures (passages-table columns; higher = more used): ``influence`` (the run's, clipped),
``logprob_drop`` (signed, unclipped), ``jsd``, ``surrogate_weight``. Controls that cost no model
call: ``retrieval_rank``, ``retrieval_score``, ``answer_similarity`` (answer–passage cosine),
``question_similarity`` (question–passage cosine: what a dense retriever sees), ``random_control``
(gold metrics: the exact expectation; checks: the seeded draw).

Metrics per question: ``recovery_at_1`` and ``auc`` against the gold passages
(:func:`ragray.metrics.validity.question_scores`), and from the checks table ``lds`` and
``top{k}_drop`` (:mod:`ragray.metrics.attribution_checks`).

Subsets: ``all``; ``answered`` (the normalized gold answer appears in the answer: a 32-token answer
never reaches token F1 ≥ 0.5, so the old "correct" subset was always empty); and the primary one,
``answered_context_dependent`` (also ``context_dependent``: with no passages the model would not
give this answer, so some passage was used).

Per subset and metric: the mean of each measure over the questions every measure has a value for,
a percentile-bootstrap 95% interval (questions resampled, seeded), and each attribution measure
paired with each control: the mean difference with its interval and a two-sided bootstrap p-value,
Holm-corrected over the attribution measures compared with that control. A measure *beats* a
control when the corrected p < 0.05 and the difference is positive. ``best`` is the attribution
measure with the highest mean; the panel says whether it beats every control. Below
:data:`MIN_VERDICT_QUESTIONS` questions a subset gets numbers but no verdict.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np

from ragray.metrics.stats import holm
from ragray.metrics.answers import contains_gold as answered
from ragray.metrics.validity import PanelColumn, bootstrap_ci, question_scores

__all__ = ["ATTRIBUTIONS", "CONTROLS", "MIN_VERDICT_QUESTIONS", "PRIMARY", "answered", "evidence_lines", "evidence_panel", "holm"]

#: the columns this panel reads as attributions: the printed influence and the column of each
#: measure the checks report beside it (``logprob_share``, checks only: the seed-compatible clipped
#: share 1 − exp(−max(0, drop))). The measures declare these (``Measure.column``) in a layer above
#: this one; tests/architecture/test_measure_names.py holds the two lists to what they declare
ATTRIBUTIONS = ("influence", "logprob_share", "logprob_drop", "jsd", "surrogate_weight")
#: the columns of the free controls, as the control measures declare them
CONTROLS = ("retrieval_rank", "retrieval_score", "answer_similarity", "question_similarity", "random_control")
MIN_VERDICT_QUESTIONS = 10
SUBSETS = ("all", "answered", "answered_context_dependent")
PRIMARY = "answered_context_dependent"


def _gold_values(rows: list[Mapping[str, Any]], name: str) -> tuple[float, float] | None:
    column = "retrieval_rank" if name == "retrieval_rank" else name
    measure = PanelColumn("random" if name == "random_control" else name, name, column)
    return question_scores(rows, measure)


def _per_question(questions: Sequence[Mapping[str, Any]], passages: Sequence[Mapping[str, Any]],
                  checks: Sequence[Mapping[str, Any]], attributions: Sequence[str] = ATTRIBUTIONS,
                  ) -> dict[str, dict[str, dict[str, float]]]:
    """qid -> metric -> measure -> value."""
    by_q: dict[str, list[Mapping[str, Any]]] = defaultdict(list)
    for p in passages:
        by_q[p["question_id"]].append(p)
    has = {c for p in passages for c, v in p.items() if v is not None}
    names = [n for n in (*attributions, *CONTROLS) if n in has or n in ("retrieval_rank", "random_control")]
    out: dict[str, dict[str, dict[str, float]]] = {}
    for q in questions:
        qid = q["question_id"]
        if q.get("error") is not None or qid not in by_q:
            continue
        values: dict[str, dict[str, float]] = defaultdict(dict)
        rows = sorted(by_q[qid], key=lambda r: r["retrieval_rank"])
        if any(r.get("is_gold") for r in rows):
            for n in names:
                got = _gold_values(rows, n)
                if got is not None:
                    values["recovery_at_1"][n], values["auc"][n] = got
        out[qid] = values
    for c in checks:
        values = out.get(c["question_id"])
        if values is None:
            continue
        if c.get("lds") is not None:
            values["lds"][c["measure"]] = float(c["lds"])
        for k, d in zip(c.get("top_k") or (), c.get("top_k_drop") or ()):
            if d is not None and d == d:
                values[f"top{k}_drop"][c["measure"]] = float(d)
    return out


def _metric_table(per_q: Mapping[str, Mapping[str, Mapping[str, float]]], qids: list[str], metric: str,
                  n_boot: int, seed: int, alpha: float, attributions: Sequence[str] = ATTRIBUTIONS,
                  ) -> dict[str, Any] | None:
    present = {m for q in qids for m in per_q[q].get(metric, {})}
    if not present:
        return None
    attrs = [m for m in attributions if m in present]
    ctrls = [m for m in CONTROLS if m in present]
    measures = attrs + ctrls
    use = [q for q in qids if all(m in per_q[q].get(metric, {}) for m in measures)]
    table: dict[str, Any] = {"n": len(use), "measures": {}, "vs_controls": {}}
    if not use:
        return table
    boot = np.random.default_rng(seed).integers(0, len(use), size=(n_boot, len(use)))
    arr = {m: np.array([per_q[q][metric][m] for q in use]) for m in measures}
    for m in measures:
        table["measures"][m] = bootstrap_ci(arr[m], boot) | {"control": m in ctrls}
    for c in ctrls:
        diffs = {a: arr[a] - arr[c] for a in attrs}
        pvals = {}
        for a, d in diffs.items():
            means = d[boot].mean(axis=1)
            pvals[a] = min(1.0, 2 * min(float((means <= 0).mean()), float((means >= 0).mean())))
        adjusted = dict(zip(attrs, holm([pvals[a] for a in attrs])))
        for a, d in diffs.items():
            table["vs_controls"].setdefault(a, {})[c] = {
                "difference": bootstrap_ci(d, boot), "p": pvals[a], "p_holm": adjusted[a],
                "beats": bool(d.mean() > 0 and adjusted[a] < alpha)}
    if attrs:
        best = max(attrs, key=lambda a: table["measures"][a]["mean"])
        table["best"] = best
        table["best_beats_every_control"] = (
            None if len(use) < MIN_VERDICT_QUESTIONS or not ctrls
            else all(v["beats"] for v in table["vs_controls"][best].values()))
    return table


def evidence_panel(questions: Sequence[Mapping[str, Any]], passages: Sequence[Mapping[str, Any]],
                   checks: Sequence[Mapping[str, Any]] = (), *, n_boot: int = 2000, seed: int = 0,
                   alpha: float = 0.05, attributions: Sequence[str] = ATTRIBUTIONS) -> dict[str, Any]:
    """``summary.json``'s ``evidence`` block (see the module docstring). ``attributions``: the
    measures compared with the controls (one Holm family), by default every one a run can have."""
    per_q = _per_question(questions, passages, checks, attributions)
    subsets: dict[str, list[str]] = {name: [] for name in SUBSETS}
    for q in questions:
        qid = q["question_id"]
        if qid not in per_q:
            continue
        subsets["all"].append(qid)
        # a table read back without answer text carries the flag itself
        ok = next((q[k] for k in ("answer_correct", "answered") if q.get(k) is not None), None)
        if ok is None:
            ok = answered(q.get("baseline_answer"), q.get("gold_answers"))
        if ok:
            subsets["answered"].append(qid)
            if q.get("context_dependent"):
                subsets[PRIMARY].append(qid)
    metrics = sorted({m for v in per_q.values() for m in v},
                     key=lambda m: ("recovery_at_1", "auc", "lds").index(m) if m in ("recovery_at_1", "auc", "lds")
                     else 3 + int(m[3:-5]))
    out: dict[str, Any] = {"primary": PRIMARY, "n_bootstrap": n_boot, "seed": seed, "alpha": alpha,
                           "context_dependent": sum(bool(q.get("context_dependent")) for q in questions),
                           "context_measured": sum(q.get("context_dependent") is not None for q in questions),
                           "subsets": {}}
    for name, qids in subsets.items():
        tables = {m: t for m in metrics
                  if (t := _metric_table(per_q, qids, m, n_boot, seed, alpha, attributions)) is not None}
        out["subsets"][name] = {"n_questions": len(qids), "metrics": tables}
    return out


def evidence_lines(panel: Mapping[str, Any] | None, subsets: Sequence[str] | None = None) -> list[str]:
    """Plain-words lines of the panel (CLI and report): per subset (default: the primary one, or
    ``all`` while it is empty) and metric, the best attribution measure, its mean and interval, the
    strongest control's, and the verdict."""
    if not panel:
        return []
    out = [f"context dependent: {panel['context_dependent']} of {panel['context_measured']} questions "
           "(the others' answers come without the passages: no passage is 'used' there)"]
    if subsets is None:
        subsets = [PRIMARY if panel["subsets"][PRIMARY]["n_questions"] else "all"]
    for name, sub in ((n, panel["subsets"][n]) for n in subsets):
        for metric, t in sub["metrics"].items():
            best = t.get("best")
            if best is None or not t["n"]:
                continue
            ctrls = {m: v for m, v in t["measures"].items() if v["control"]}
            top = max(ctrls, key=lambda m: ctrls[m]["mean"]) if ctrls else None
            b = t["measures"][best]
            verdict = {True: "beats every control", False: "does NOT beat every control",
                       None: "no verdict (under 10 questions)"}[t.get("best_beats_every_control")]
            line = f"{name} ({t['n']} q), {metric}: {best} {b['mean']:.3f} [{b['low']:.3f}, {b['high']:.3f}]"
            if top is not None:
                c = ctrls[top]
                line += f" vs best control {top} {c['mean']:.3f} [{c['low']:.3f}, {c['high']:.3f}]"
            out.append(f"{line}: {verdict}")
    return out
