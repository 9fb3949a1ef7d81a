"""The across-questions verdict of ``ragray interpret`` at one K: are the explanations faithful?

Each question's case compares its DEL_MOST and DEL_LEAST similarities with its own random draws
(:mod:`ragray.faithfulness.cases`). The verdict asks the same across questions, with the paired
two-sided Wilcoxon signed-rank test of the random-arm mean against the arm's similarity (one pair
per tested question, :mod:`ragray.faithfulness.summary`), at the level ``decision.alpha``:

- ``undecided``: fewer tested questions than the test needs to reach p < α at all — the exact
  two-sided signed-rank p-value is at least 2 / 2ⁿ, so α = 0.05 needs n ≥ 6 (:func:`min_questions`).
  Never a verdict: the counts are shown, not judged;
- ``faithful``: removing the explainer's top units lowers the similarity more than random
  removals (p < α, positive mean difference) and removing its bottom units does not (not
  significantly more than random) — case A across questions;
- ``mixed``: both the top and the bottom units hurt more than random removals: the ranking does
  not separate what matters from what does not;
- ``inverted``: removing the top units hurts *less* than random removals (p < α);
- ``not_shown``: enough questions, and no significant difference between the top units and
  random ones (or no difference at all: every question's answer moved the same). This is the
  absence of a demonstrated effect, not proof of unfaithfulness;
- ``by_construction``: no test at all. At K = 1 the ``loo`` explainer's ranking *is* the deletion
  experiment: its first unit is the single removal that changed the answer most, DEL_MOST@1 is
  that very call and the random arm is the other single removals, so DEL_MOST beats random
  whenever any removal changes anything (min ≤ mean), and DEL_LEAST never does (max ≥ mean). The
  same holds for the ``logprob`` explainer in ``--mode logprob`` (the arm's similarity is a
  function of the log-prob drop it ranks by). Such questions are left out of the verdict's test
  (:func:`circular`); when every question is, the K is ``by_construction``.

The verdict runs its own paired test on the questions it keeps, so its ``p_value`` and
``n_tested`` can differ from the K's table columns when some questions are circular.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, Literal, TypedDict

from ragray.faithfulness.stats import min_questions

__all__ = ["STATES", "KVerdict", "circular", "k_verdict", "verdict_words"]

State = Literal["faithful", "mixed", "inverted", "not_shown", "undecided", "by_construction"]
STATES: tuple[State, ...] = ("faithful", "mixed", "inverted", "not_shown", "undecided", "by_construction")


class KVerdict(TypedDict):
    state: State
    n_tested: int
    min_questions: int  # tested questions the test needs to be able to decide at alpha
    alpha: float
    #: questions where removing the top units lowered the similarity more than the random mean did
    n_most_worse: int
    p_value: float | None  # the paired Wilcoxon p of DEL_MOST against the random-arm mean
    n_circular: int  # questions left out: their test holds by construction (:func:`circular`)
    explainer: str


def circular(explainer: str, mode: str, k: int | None) -> bool:
    """Whether DEL_MOST vs random at this K re-measures what the explainer ranked by (K = 1 with
    the ``loo`` explainer, or the ``logprob`` explainer in logprob mode)."""
    return k == 1 and (explainer == "loo" or (explainer == "logprob" and mode == "logprob"))


def _significant(side: Mapping[str, Any], alpha: float) -> int:
    """+1 when the arm hurts significantly more than random, −1 significantly less, else 0."""
    p = side["paired"]["wilcoxon"]["p_value"]
    diff = side["paired"]["mean_difference"]["mean"]
    if p is None or diff is None or p >= alpha or diff == 0:
        return 0
    return 1 if diff > 0 else -1


def k_verdict(tests: Mapping[str, Any], n_most_worse: int, alpha: float, *, n_circular: int = 0,
              explainer: str = "") -> KVerdict:
    """The verdict of one K from the paired tests of the questions it keeps (``n_tested``,
    ``most_vs_random``, ``least_vs_random`` as in a ``per_k`` entry), the count of them where
    DEL_MOST hurt more than the random mean, and the count left out as circular."""
    n, need = tests["n_tested"], min_questions(alpha)
    most, least = _significant(tests["most_vs_random"], alpha), _significant(tests["least_vs_random"], alpha)
    state: State
    if n == 0 and n_circular:
        state = "by_construction"
    elif n < need:
        state = "undecided"
    elif most > 0:
        state = "mixed" if least > 0 else "faithful"
    elif most < 0:
        state = "inverted"
    else:
        state = "not_shown"
    return KVerdict(state=state, n_tested=n, min_questions=need, alpha=alpha, n_most_worse=n_most_worse,
                    p_value=tests["most_vs_random"]["paired"]["wilcoxon"]["p_value"], n_circular=n_circular,
                    explainer=explainer)


_WORDS = {
    "faithful": "faithful: removing the units the explainer ranks first changes the answer more than removing "
                "random ones, and removing its last-ranked units does not",
    "mixed": "only partly faithful: removing the explainer's first-ranked units changes the answer more than "
             "removing random ones, but removing its last-ranked units does too",
    "inverted": "NOT faithful: removing the units the explainer ranks first changes the answer less than "
                "removing random ones",
    "not_shown": "not shown faithful: removing the units the explainer ranks first changes the answer no more "
                 "than removing random ones",
}


def verdict_words(label: str, v: Mapping[str, Any]) -> str:
    """One K's verdict in a sentence: the state, then the evidence (or what deciding needs)."""
    n, worse = v["n_tested"], v["n_most_worse"]
    p = "-" if v["p_value"] is None else f"{v['p_value']:.3g}"
    left_out = (f"; {v['n_circular']} question{'s' if v['n_circular'] != 1 else ''} left out, where removing one "
                "unit is what the explainer measured" if v.get("n_circular") else "")
    evidence = f"more than random in {worse} of {n} questions, Wilcoxon p {p}{left_out}"
    if v["state"] == "by_construction":
        return (f"explanations at {label}: not tested — the {v['explainer']} explainer's first unit is the single "
                "removal that changed the answer most, so removing it beats random single removals by "
                "construction (the other K test it)")
    if v["state"] == "undecided":
        return (f"explanations at {label}: UNDECIDED — {n} question{'s' if n != 1 else ''} tested, and a test "
                f"across questions needs at least {v['min_questions']} to decide at p < {v['alpha']:g} "
                f"(removing the top units changed the answer {evidence})")
    return f"explanations at {label}: {_WORDS[v['state']]} ({evidence})"
