"""Did a change between two runs move the verdicts, or is it noise? Two influence runs compared
question by question on the questions both measured.

Per metric, on the questions with a value in both runs: the two means, their difference (B − A)
and a paired two-sided test — exact McNemar for the yes/no columns (misaligned, answered
correctly, top-1 passage used), Wilcoxon signed-rank for usage nDCG — Holm-corrected over the
metrics compared. States:

- ``changed``: the Holm-adjusted p is below α;
- ``within noise``: enough questions, no significant change (the difference shown is not
  evidence of one);
- ``undecided``: fewer questions in common than a paired exact test needs to reach p < α at all
  (6 at α = 0.05: McNemar's and the signed-rank test's smallest two-sided p is 2 / 2ⁿ);
- ``no questions in common``.

"answered correctly" pairs answerable questions only (on an unanswerable one the column says
whether the model declined, another measure).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Literal

from ragray.metrics.stats import holm, mcnemar_exact, min_questions, paired_tests

__all__ = ["PAIRED_METRICS", "PairedChange", "paired_changes"]

#: (label, questions column, kind) of the per-question measures compared
PAIRED_METRICS: tuple[tuple[str, str, Literal["binary", "continuous"]], ...] = (
    ("misaligned", "misaligned", "binary"),
    ("answered correctly", "answer_correct", "binary"),
    ("usage nDCG", "usage_ndcg", "continuous"),
    ("top-1 passage used", "top1_used", "binary"),
)

State = Literal["changed", "within noise", "undecided", "no questions in common"]


@dataclass(frozen=True)
class PairedChange:
    metric: str
    column: str
    n: int  # questions with a value in both runs
    a: float | None  # mean (share for yes/no) in run A over those questions
    b: float | None
    delta: float | None  # b − a
    p_value: float | None  # two-sided, Holm-adjusted over the metrics compared
    test: str
    state: State


def _values(questions: Sequence[Mapping[str, Any]], column: str) -> dict[str, Any]:
    skip_unanswerable = column == "answer_correct"
    return {q["question_id"]: q.get(column) for q in questions if q.get(column) is not None
            and not (skip_unanswerable and q.get("answerable") is False)}


def paired_changes(questions_a: Sequence[Mapping[str, Any]], questions_b: Sequence[Mapping[str, Any]],
                   alpha: float = 0.05) -> list[PairedChange]:
    """Each of :data:`PAIRED_METRICS` compared between two runs' question rows (module docstring)."""
    need = min_questions(alpha)
    found = []
    for label, column, kind in PAIRED_METRICS:
        va, vb = _values(questions_a, column), _values(questions_b, column)
        common = [q for q in va if q in vb]
        xs, ys = [float(va[q]) for q in common], [float(vb[q]) for q in common]
        if not common:
            p, test = None, "-"
        elif kind == "binary":
            p, test = mcnemar_exact([bool(x) for x in xs], [bool(y) for y in ys])["p_value"], "McNemar (exact)"
        else:
            p, test = paired_tests(ys, xs)["wilcoxon"]["p_value"], "Wilcoxon signed-rank"
            p = 1.0 if p is None else p  # every difference zero: nothing changed
        a = sum(xs) / len(xs) if xs else None
        b = sum(ys) / len(ys) if ys else None
        found.append((label, column, len(common), a, b, test, p))
    tested = [i for i, f in enumerate(found) if f[6] is not None]
    adjusted = dict(zip(tested, holm([found[i][6] for i in tested])))
    out = []
    for i, (label, column, n, a, b, test, _) in enumerate(found):
        p = adjusted.get(i)
        state: State = ("no questions in common" if n == 0 else "undecided" if n < need
                        else "changed" if p is not None and p < alpha else "within noise")
        out.append(PairedChange(label, column, n, a, b, None if a is None or b is None else b - a, p, test, state))
    return out
