"""The across-questions verdict of ``ragray interpret`` at one K: are the explanations faithful?

Each question's case compares its DEL_MOST and DEL_LEAST similarities with its own random draws
(:mod:`ragray.faithfulness.cases`). The verdict asks the same across questions with an exact
two-sided **sign test** of the random draws' *median* minus the arm's similarity, one sign per
tested question, at the level ``decision.alpha``. Not the mean: DEL_MOST is one subset, and
where the random draws are skewed (most removals change nothing, a few remove the evidence) one
uninformative subset sits above their mean far more often than below it. Measured on a
known-truth set (the answer copied into two passages, so the loo explainer ranks every unit 0 and
its "top" units are a tie-broken random pick): the paired Wilcoxon test against the mean called
that explainer *inverted* at top-3 (0 of 7 below the mean, p 0.031); the sign test against the
median finds no difference (ties at the median drop out). Under the null that DEL_MOST is just
another random subset, it is below the median with probability at most ½ and above it with at
most ½, so the sign test holds its level whatever the shape of the draws.

- ``undecided``: fewer tested questions than the test needs to reach p < α at all — the exact
  two-sided signed-rank p-value is at least 2 / 2ⁿ, so α = 0.05 needs n ≥ 6 (:func:`min_questions`).
  Never a verdict: the counts are shown, not judged;
- ``faithful``: removing the explainer's top units lowers the similarity below the random
  median (p < α, more questions below than above) and removing its bottom units does not —
  case A across questions;
- ``mixed``: both the top and the bottom units hurt more than random removals: the ranking does
  not separate what matters from what does not;
- ``inverted``: removing the top units hurts *less* than the random median (p < α);
- ``not_shown``: enough questions, and no significant difference between the top units and
  random ones (or no difference at all: every question's answer moved the same). This is the
  absence of a demonstrated effect, not proof of unfaithfulness;
- ``by_construction``: no test at all. At K = 1 the ``loo`` explainer's ranking *is* the deletion
  experiment: its first unit is the single removal that changed the answer most, DEL_MOST@1 is
  that very call and the random arm is the other single removals, so DEL_MOST beats random
  whenever any removal changes anything (min ≤ mean), and DEL_LEAST never does (max ≥ mean). The
  same holds for the ``logprob`` explainer in ``--mode logprob`` (the arm's similarity is a
  function of the log-prob drop it ranks by), and for the ``surrogate`` explainer (fitted on the
  random-deletion arm) at a K whose own draws were all it had to fit on: its ranking is otherwise
  fitted on the *other* K's draws for each K it is tested at (the experiment's
  ``_held_out_orders``), since fitted on a K's own draws it knows which of them changed the
  answer. Such questions are left out of the verdict's test (:func:`circular`, or the case row's
  ``by_construction``); when every question is, the K is ``by_construction``.

The verdict's ``p_value`` is this sign test's, on the questions it keeps: it differs from the K's
Wilcoxon and McNemar columns (the SPEC's statistics, against the random mean).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, Literal, TypedDict

from ragray.faithfulness.attribution import FITTED_ON_RANDOM_ARM
from ragray.faithfulness.stats import McNemar, min_questions

__all__ = ["STATES", "KVerdict", "circular", "k_verdict", "verdict_words"]

State = Literal["faithful", "mixed", "inverted", "not_shown", "undecided", "by_construction"]
STATES: tuple[State, ...] = ("faithful", "mixed", "inverted", "not_shown", "undecided", "by_construction")


class KVerdict(TypedDict):
    state: State
    n_tested: int
    min_questions: int  # tested questions the test needs to be able to decide at alpha
    alpha: float
    #: questions where removing the top units lowered the similarity below the random median
    n_most_worse: int
    p_value: float  # the sign test of DEL_MOST against the random median
    n_circular: int  # questions left out: their test holds by construction (:func:`circular`)
    explainer: str


def circular(explainer: str, mode: str, k: int | None) -> bool:
    """Whether DEL_MOST vs random at this K re-measures what the explainer ranked by (K = 1 with
    the ``loo`` explainer, or the ``logprob`` explainer in logprob mode)."""
    return k == 1 and (explainer == "loo" or (explainer == "logprob" and mode == "logprob"))


def _direction(test: McNemar, alpha: float) -> int:
    """+1 when the arm is significantly below the random median (hurts more), −1 above, else 0."""
    if test["p_value"] >= alpha or test["b10"] == test["b01"]:
        return 0
    return 1 if test["b10"] > test["b01"] else -1


def k_verdict(n_tested: int, most: McNemar, least: McNemar, alpha: float, *, n_circular: int = 0,
              explainer: str = "") -> KVerdict:
    """The verdict of one K from the sign tests (:func:`~ragray.faithfulness.stats.sign_test` of
    random median − arm similarity) of DEL_MOST and DEL_LEAST over the ``n_tested`` questions it
    keeps, and the count left out as circular."""
    need = min_questions(alpha)
    state: State
    if n_tested == 0 and n_circular:
        state = "by_construction"
    elif n_tested < need:
        state = "undecided"
    elif (m := _direction(most, alpha)) > 0:
        state = "mixed" if _direction(least, alpha) > 0 else "faithful"
    elif m < 0:
        state = "inverted"
    else:
        state = "not_shown"
    return KVerdict(state=state, n_tested=n_tested, min_questions=need, alpha=alpha, n_most_worse=most["b10"],
                    p_value=most["p_value"], n_circular=n_circular, explainer=explainer)


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
    p = f"{v['p_value']:.3g}"
    left_out = (f"; {v['n_circular']} question{'s' if v['n_circular'] != 1 else ''} left out, where the test "
                "re-measures what the explainer ranked by" if v.get("n_circular") else "")
    evidence = f"below the random removals' median in {worse} of {n} questions, sign test p {p}{left_out}"
    if v["state"] == "by_construction" and v.get("explainer") in FITTED_ON_RANDOM_ARM:
        return (f"explanations at {label}: not tested — the {v['explainer']} explainer had only this K's random "
                "removals to be fitted on, so it knows which of them changed the answer (list more k_values: "
                "each K is then tested with a fit on the others)")
    if v["state"] == "by_construction":
        return (f"explanations at {label}: not tested — the {v['explainer']} explainer's first unit is the single "
                "removal that changed the answer most, so removing it beats random single removals by "
                "construction (the other K test it)")
    if v["state"] == "undecided":
        return (f"explanations at {label}: UNDECIDED — {n} question{'s' if n != 1 else ''} tested, and a test "
                f"across questions needs at least {v['min_questions']} to decide at p < {v['alpha']:g} "
                f"(removing the top units: {evidence})")
    return f"explanations at {label}: {_WORDS[v['state']]} ({evidence})"
