"""What ``ragray interpret`` prints after its run line: the answer first (are the explanations
faithful at the first K, or what deciding needs), then the cases and tests per K with each K's
verdict, a legend, the controls, the explainers' agreement and the cost.

:func:`interpret_rows` and :func:`headline` are pure (tested); :func:`print_interpret` prints.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from ragray.console import print_table
from ragray.faithfulness.verdict import verdict_words
from ragray.rows.summaries import FaithfulnessSummary

__all__ = ["COLUMNS", "LEGEND", "STATE_LABELS", "headline", "interpret_rows", "print_interpret", "verdict_label"]

COLUMNS = ("K", "A", "B", "C", "inc.", "sim most", "random", "least", "Wilcoxon p", "McNemar p", "verdict")
STATE_LABELS = {"faithful": "faithful", "mixed": "mixed", "inverted": "inverted", "not_shown": "not shown",
                "by_construction": "not tested (by construction)"}
LEGEND = ("  A faithful (the top units matter, the bottom ones do not) · B no better than random · "
          "C redundant evidence (the answer survives) · inc. inconclusive; each question is judged against its "
          "own random removals, the verdict across questions (sim most ranked among each question's random removals, "
          "Holm over the K tested)")


def _f(value: object, spec: str = ".3f") -> str:
    return "-" if value is None else format(value, spec)


def _p(value: object) -> str:
    return "-" if value is None else f"{value:.3g}"


def verdict_label(v: Mapping[str, Any] | None) -> str:
    """A K's verdict in a table cell."""
    if not v:  # a summary written before verdicts existed
        return "-"
    if v["state"] == "undecided":
        return f"UNDECIDED ({v['min_questions']} needed)"
    return STATE_LABELS[v["state"]]


def interpret_rows(per_k: Mapping[str, Mapping[str, Any]]) -> list[list[object]]:
    """One row per K: case counts, mean similarities, the paired tests' p-values, the verdict."""
    rows: list[list[object]] = []
    for label, k in per_k.items():
        c = {name: v["count"] for name, v in k["cases"].items()}
        mv = k["most_vs_random"]
        rows.append([label, c["A"], c["B"], c["C"], c["inconclusive"], _f(k["sim_most_mean"]),
                     _f((k["random_mean"] or {}).get("mean")), _f(k["sim_least_mean"]),
                     _p(mv["paired"]["wilcoxon"]["p_value"]), _p(mv["mcnemar"]["p_value"]), verdict_label(k.get("verdict"))])
    return rows


def headline(per_k: Mapping[str, Mapping[str, Any]]) -> str | None:
    """The verdict of the first K that tests the explainer, in a sentence, with its case A share
    (None without a K)."""
    if not per_k:
        return None
    tested = [(label, k) for label, k in per_k.items() if (k.get("verdict") or {}).get("state") != "by_construction"]
    label, k = (tested or list(per_k.items()))[0]
    a, n = k["cases"]["A"], k["n_questions"]
    share = "" if a["share"] is None else f" ({a['share']:.0%}, 95% CI {a['low']:.0%}..{a['high']:.0%})"
    cases = f"; case A (faithful) in {a['count']} of {n} question{'s' if n != 1 else ''}{share}"
    return (verdict_words(label, k["verdict"]) if k.get("verdict") else f"explanations at {label}") + cases


def print_interpret(s: FaithfulnessSummary) -> None:
    """The headline, the per-K table with its legend, then controls, agreement and cost."""
    if line := headline(s.per_k):
        print(line)
    print_table(list(COLUMNS), interpret_rows(s.per_k), numeric=range(1, 10))
    print(LEGEND)
    ctl, cost = s.controls, s.cost
    if ctl is not None:
        print(f"  controls: parametric {_f(ctl.parametric_rate)}, position-sensitive "
              f"{_f(ctl.position_sensitive_rate)}, sim without question {_f(ctl.del_q_sim_mean)}")
    for pair, v in s.agreement.items():
        print(f"  agreement {pair}: Spearman {_f(v['mean_spearman'])}, top-1 {_f(v['top1_agreement'])}")
    if cost is not None:
        print(f"  cost per question: {_f(cost.calls_generated_per_question, '.1f')} model calls "
              f"({_f(cost.calls_requested_per_question, '.1f')} arm calls), "
              f"{_f(cost.score_passes_per_question, '.1f')} scoring passes, "
              f"{_f(cost.seconds_per_question, '.1f')} s")
