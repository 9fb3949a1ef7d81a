"""The one validity panel a user reads: does this run's influence find the gold passages better
than every measure that costs no model call?

Built from the evidence statistics (:func:`ragray.metrics.evidence.evidence_panel`) of the run, in
plain words: one row per distinct measure (two measures with the same numbers everywhere, e.g.
log-prob mode's influence and its log-prob drop, share a row), the subsets defined in a sentence,
and ONE verdict about the measure the run reports (``influence``), never the best of several
(that would pick a winner after seeing the numbers):

- ``PASS``: on the primary subset, influence beats every free control (paired bootstrap,
  Holm-corrected, p < alpha, on the panel's metric);
- ``FAIL``: it does not beat at least one of them (named);
- ``UNDECIDED``: fewer than :data:`~ragray.metrics.evidence.MIN_VERDICT_QUESTIONS` questions in
  the primary subset (the numbers are shown, no verdict);
- ``NOT MEASURED``: no question has a gold and a non-gold passage among its retrieved ones.

The metric is the AUC against the gold passages (a gold passage scored above a non-gold one, ties
½): it uses every passage, where "gold ranked first" rests on one. The primary subset is the
questions answered correctly (the answer contains a gold answer) whose answer depends on the
passages (log-prob modes measure that with a closed-book pass); where dependence is not measured
(loo mode), the questions answered correctly.

With ``influence.edit_test`` the panel also holds ``edit_test``
(:func:`ragray.metrics.edit_panel.edit_test_block`): ``used`` and the free controls scored against
where the answer followed an edit of the passage; it needs gold answers, not gold passage ids, and
gives no verdict of its own.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from ragray.metrics.edit_panel import edit_test_line
from ragray.metrics.evidence import MIN_VERDICT_QUESTIONS, PRIMARY

__all__ = ["METRIC", "MEASURE_NAMES", "SUBSET_WORDS", "validity_summary", "panel_lines"]

METRIC = "auc"
METRIC_WORDS = "how often a gold passage scores above a non-gold one (AUC; 0.5 = chance)"

#: evidence column -> plain name ("influence" is named by the run's mode)
MEASURE_NAMES = {
    "influence": "influence",
    "logprob_share": "log-prob share",
    "logprob_drop": "log-prob drop without the passage",
    "jsd": "next-token change without the passage (JSD)",
    "surrogate_weight": "surrogate weight (random subsets)",
    "retrieval_rank": "the retriever's order",
    "retrieval_score": "the retriever's score",
    "answer_similarity": "answer–passage similarity",
    "question_similarity": "question–passage similarity",
    "random_control": "random",
}

#: evidence subset -> (name, definition)
SUBSET_WORDS = {
    "all": ("all questions", "every question with a gold and a non-gold passage among its retrieved ones"),
    "answered": ("answered correctly", "the answer contains a gold answer"),
    PRIMARY: ("answered correctly from the passages",
              "answered correctly, and without the passages the model would not give this answer"),
}


def _primary(evidence: Mapping[str, Any]) -> str:
    return PRIMARY if evidence.get("context_measured") else "answered"


def _rows(evidence: Mapping[str, Any], keys: list[str], influence_name: str) -> list[dict[str, Any]]:
    """One row per distinct measure over the subsets ``keys`` (measures equal everywhere merged)."""
    tables = {k: evidence["subsets"][k]["metrics"].get(METRIC) or {} for k in keys}
    names = [m for m in MEASURE_NAMES if any(m in t.get("measures", {}) for t in tables.values())]
    rows: list[dict[str, Any]] = []
    seen: dict[tuple, dict[str, Any]] = {}
    for m in names:
        values = {}
        for k, t in tables.items():
            v = t.get("measures", {}).get(m)
            values[k] = None if v is None else {"mean": v["mean"], "low": v["low"], "high": v["high"]}
        control = any(t.get("measures", {}).get(m, {}).get("control") for t in tables.values())
        name = influence_name if m == "influence" else MEASURE_NAMES[m]
        key = (control, tuple(sorted((k, tuple(sorted(v.items())) if v else None) for k, v in values.items())))
        if key in seen and any(v is not None for v in values.values()):
            seen[key]["name"] += f" = {name}"
            seen[key]["measures"].append(m)
            continue
        row = {"name": name, "measures": [m], "control": control, "values": values, "beats_every_control": None}
        seen[key] = row
        rows.append(row)
    return rows


def validity_summary(evidence: Mapping[str, Any] | None, influence_name: str = "influence",
                     reason: str | None = None, edit_test: Mapping[str, Any] | None = None) -> dict[str, Any]:
    """``summary.json``'s ``panel``: the evidence statistics in plain words with one verdict, and
    ``edit_test`` (:func:`ragray.metrics.edit_panel.edit_test_block`) where the run made the edit
    test — it needs gold answers, not gold passages, so it stands beside any verdict."""
    panel = _gold_panel(evidence, influence_name, reason)
    return panel if edit_test is None else {**panel, "edit_test": dict(edit_test)}


def _gold_panel(evidence: Mapping[str, Any] | None, influence_name: str, reason: str | None) -> dict[str, Any]:
    """The panel against gold passages."""
    keys = ["all", "answered", PRIMARY]
    base = {"metric": METRIC_WORDS, "subsets": [], "rows": [], "primary": None}
    if not evidence:
        return {**base, "available": False, "verdict": "NOT MEASURED",
                "reason": reason or "no evidence statistics in this run",
                "sentence": f"{reason or 'no evidence statistics in this run'}."}
    primary = _primary(evidence)
    if not evidence.get("context_measured"):
        keys.remove(PRIMARY)
    subsets = [{"key": k, "name": SUBSET_WORDS[k][0], "definition": SUBSET_WORDS[k][1],
                "n": int((evidence["subsets"][k]["metrics"].get(METRIC) or {}).get("n", 0))} for k in keys]
    rows = _rows(evidence, keys, influence_name)
    out = {**base, "subsets": subsets, "rows": rows, "primary": primary}
    table = evidence["subsets"][primary]["metrics"].get(METRIC)
    if not evidence["subsets"]["all"]["metrics"].get(METRIC):
        why = "no question has a gold and a non-gold passage among its retrieved ones"
        return {**out, "available": False, "verdict": "NOT MEASURED", "reason": why, "sentence": f"{why}."}
    n = int(table["n"]) if table else 0
    pname = SUBSET_WORDS[primary][0]
    vs = (table or {}).get("vs_controls", {}).get("influence", {})
    for row in rows:
        if "influence" in row["measures"] and vs and n >= MIN_VERDICT_QUESTIONS:
            row["beats_every_control"] = all(v["beats"] for v in vs.values())
    if n < MIN_VERDICT_QUESTIONS or not vs:
        verdict = "UNDECIDED"
        sentence = (f"{n} question{'s' if n != 1 else ''} {pname} ({MIN_VERDICT_QUESTIONS} needed "
                    "for a verdict); the numbers below are shown, not judged.")
    else:
        mine = table["measures"]["influence"]
        lost = [c for c, v in vs.items() if not v["beats"]]
        best_ctrl = max((c for c in vs), key=lambda c: table["measures"][c]["mean"])
        c = table["measures"][best_ctrl]
        head = (f"On {n} questions {pname}, {influence_name} scores a gold passage above the others "
                f"{mine['mean']:.2f} [{mine['low']:.2f}, {mine['high']:.2f}]")
        if not lost:
            verdict = "PASS"
            sentence = (f"{head}, beating every free control (the strongest, {MEASURE_NAMES[best_ctrl]}: "
                        f"{c['mean']:.2f} [{c['low']:.2f}, {c['high']:.2f}]).")
        else:
            verdict = "FAIL"
            names = ", ".join(f"{MEASURE_NAMES[x]} {table['measures'][x]['mean']:.2f}" for x in lost)
            sentence = (f"{head}, but does not beat {names}: on this data a measure that costs no "
                        "model call finds the gold passages as well.")
    return {**out, "available": True, "reason": None, "verdict": verdict, "sentence": sentence}


def _ci(v: Mapping[str, Any] | None) -> str:
    if not v or v.get("mean") is None:
        return "-"
    return f"{v['mean']:.2f} [{v['low']:.2f}, {v['high']:.2f}]"


def panel_lines(panel: Mapping[str, Any] | None) -> tuple[list[str], list[list[str]]]:
    """The panel as console text: the verdict lines, and the table (header row first)."""
    if not panel:
        return ["validity: not measured (run written before the validity panel)"], []
    lines = [f"validity against gold passages: {panel['verdict']} — {panel['sentence']}"]
    if (edit := edit_test_line(panel.get("edit_test"))) is not None:
        lines.append(edit)
    if not panel.get("rows"):
        return lines, []
    lines.append(f"  measure: {panel['metric']}; subsets: " + "; ".join(
        f"{s['name']} = {s['definition']}" for s in panel["subsets"][1:]))
    header = ["measure", *(f"{s['name']} ({s['n']})" for s in panel["subsets"])]
    table = [header]
    for row in panel["rows"]:
        name = row["name"] + (" (free control)" if row["control"] else "")
        table.append([name, *(_ci(row["values"].get(s["key"])) for s in panel["subsets"])])
    return lines, table
