"""The across-questions verdict of ``ragray interpret`` at one K: are the explanations faithful?

Each question's case compares its DEL_MOST and DEL_LEAST similarities with its own random draws
(:mod:`ragray.faithfulness.cases`). The verdict asks the same across questions with a
**stratified rank test** (:func:`~ragray.metrics.stats.stratified_rank_test`): each question's
DEL_MOST similarity is placed among its own random draws (its mid-rank share: 0 below every draw,
½ in their middle), the shares are summed over the tested questions, and the sum is compared with
its distribution when DEL_MOST is just one more random draw in every question, two-sided, at the
level ``decision.alpha``. It holds its level whatever the draws look like:

- not a test against the random *mean*: DEL_MOST is one subset, and where the draws are skewed
  (most removals change nothing, a few remove the evidence) one uninformative subset sits above
  their mean far more often than below it. On the known-truth set where the answer is copied into
  two passages (the loo explainer then ranks every unit 0, its "top" units a tie-broken random
  pick), the paired Wilcoxon test against the mean called loo *inverted* at top-3 (0 of 7 below
  the mean, p 0.031);
- not a sign test against the random *median* (the rule before): where most random removals leave
  the answer as it was, the median is the top similarity, 1.0, nothing can be above it, and every
  DEL_MOST that changed anything counted as "below". On the known-truth set where each removal
  changes the answer by chance (no unit matters at K ≥ 2; ``benchmarks/bench_verdict_family.py``,
  60 runs of 12 questions) that rule raised a false "faithful" or "mixed" in 12 runs of loo's
  (20%); this test with the K's Holm-adjusted together, in none (``results/archive/verdict_family.json``).

- ``undecided``: fewer tested questions than a verdict across questions takes: as many as an
  exact two-sided paired test needs to reach p < α at all (2 / 2ⁿ < α: n ≥ 6 at α = 0.05,
  :func:`min_questions`; at α over the K tested together, below). One question's own random
  draws can make its DEL_MOST extreme, but a handful of questions says nothing about an explainer.
  Never a verdict: the counts are shown, not judged;
- ``faithful``: removing the explainer's top units lowers the similarity more than its questions'
  random removals do (p < α) and removing its bottom units does not — case A across questions;
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
  same holds for the ``logprob_drop`` explainer in ``--mode logprob`` (the arm's similarity is a
  function of the log-prob drop it ranks by), and for the ``surrogate`` explainer (fitted on the
  random-deletion arm) at a K whose own draws were all it had to fit on: its ranking is otherwise
  fitted on the *other* K's draws for each K it is tested at (the experiment's
  ``_held_out_orders``), since fitted on a K's own draws it knows which of them changed the
  answer. Such questions are left out of the verdict's test (:func:`circular`, or the case row's
  ``by_construction``); when every question is, the K is ``by_construction``.

The verdict's ``p_value`` is this rank test's, on the questions it keeps: it differs from the K's
Wilcoxon and McNemar columns (the SPEC's statistics, against the random mean).

**One family per run.** A run tests its explainer at several K (top-1, top-3, top-20% by default),
and each K's verdict is a claim: judged each at α on its own, some K is called faithful (or
inverted) where none is more often than α. So the DEL_MOST rank tests of the K's a run tests (those
with a question kept) are Holm-adjusted together (:func:`family_verdicts`), ``p_holm``, and a K needs
enough questions for its adjusted p to go below α at all (``min_questions`` at α / the family's
size). DEL_LEAST stays at α unadjusted: it can only turn "faithful" into "mixed". Measured on known
truth (``benchmarks/bench_verdict_family.py``, ``results/archive/verdict_family.json``).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, Literal, TypedDict

from ragray.faithfulness.attribution import fitted_on_random_arm
from ragray.metrics.stats import RankTest, holm, min_questions

__all__ = ["STATES", "KTests", "KVerdict", "circular", "family_verdicts", "k_verdict", "verdict_words"]

State = Literal["faithful", "mixed", "inverted", "not_shown", "undecided", "by_construction"]
STATES: tuple[State, ...] = ("faithful", "mixed", "inverted", "not_shown", "undecided", "by_construction")


class KVerdict(TypedDict):
    state: State
    n_tested: int
    min_questions: int  # tested questions the test needs to be able to decide at alpha
    alpha: float
    #: questions where removing the top units lowered the similarity below the middle of their random draws
    n_most_worse: int
    n_most_better: int  # ... above it
    p_value: float  # the rank test of DEL_MOST among the random draws
    p_holm: float  # p_value Holm-adjusted over the run's tested K (what the state is decided on)
    n_family: int  # the K the run tests (the Holm family; 1: this K alone)
    n_circular: int  # questions left out: their test holds by construction (:func:`circular`)
    explainer: str


#: one K's tests: (questions kept, DEL_MOST's rank test, DEL_LEAST's, questions left out as circular)
KTests = tuple[int, RankTest, RankTest, int]


def circular(explainer: str, mode: str, k: int | None) -> bool:
    """Whether DEL_MOST vs random at this K re-measures what the explainer ranked by (K = 1 with
    the ``loo`` explainer, or the ``logprob_drop`` explainer in logprob mode)."""
    return k == 1 and (explainer == "loo" or (explainer == "logprob_drop" and mode == "logprob"))


def _direction(test: RankTest, p: float, alpha: float) -> int:
    """+1 when the arm sits significantly low among the random draws (hurts more), −1 high, else 0."""
    if p >= alpha or test["statistic"] == test["expected"]:
        return 0
    return 1 if test["statistic"] < test["expected"] else -1


def k_verdict(n_tested: int, most: RankTest, least: RankTest, alpha: float, *, n_circular: int = 0,
              explainer: str = "", p_holm: float | None = None, n_family: int = 1) -> KVerdict:
    """The verdict of one K from the rank tests (:func:`~ragray.metrics.stats.stratified_rank_test`)
    of DEL_MOST and DEL_LEAST among their questions' random draws over the ``n_tested`` questions it
    keeps, and the count left out as circular; DEL_MOST's p Holm-adjusted (``p_holm``) over the
    ``n_family`` K a run tests (:func:`family_verdicts`), or this K alone."""
    need = min_questions(alpha / max(1, n_family))
    p = most["p_value"] if p_holm is None else p_holm
    state: State
    if n_tested == 0 and n_circular:
        state = "by_construction"
    elif n_tested < need:
        state = "undecided"
    elif (m := _direction(most, p, alpha)) > 0:
        state = "mixed" if _direction(least, least["p_value"], alpha) > 0 else "faithful"
    elif m < 0:
        state = "inverted"
    else:
        state = "not_shown"
    return KVerdict(state=state, n_tested=n_tested, min_questions=need, alpha=alpha, n_most_worse=most["n_below"],
                    n_most_better=most["n_above"],
                    p_value=most["p_value"], p_holm=p, n_family=max(1, n_family), n_circular=n_circular,
                    explainer=explainer)


def family_verdicts(tests: Mapping[str, KTests], alpha: float, *, explainer: str = "") -> dict[str, KVerdict]:
    """Every K's verdict (``tests``: K label → :data:`KTests`), DEL_MOST's p-values Holm-adjusted
    over the K with a question kept (the K a run tests; a K with none is not in the family)."""
    family = [label for label, (n, *_) in tests.items() if n > 0]
    adjusted = dict(zip(family, holm([tests[label][1]["p_value"] for label in family])))
    return {label: k_verdict(n, most, least, alpha, n_circular=n_circular, explainer=explainer,
                             p_holm=adjusted.get(label), n_family=len(family))
            for label, (n, most, least, n_circular) in tests.items()}


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
    family = v.get("n_family") or 1  # summaries written before the K were judged together: 1
    holm_p = f", {v['p_holm']:.3g} Holm-adjusted over the {family} K tested" if family > 1 else ""
    if "n_most_better" in v:
        where = f"below its random removals' middle in {worse} of {n} questions (above in {v['n_most_better']}), rank test"
    else:  # a summary written before the rank test (the sign test against the median)
        where = f"below the random removals' median in {worse} of {n} questions, sign test"
    evidence = f"{where} p {p}{holm_p}{left_out}"
    if v["state"] == "by_construction" and fitted_on_random_arm(v.get("explainer")):
        return (f"explanations at {label}: not tested — the {v['explainer']} explainer had only this K's random "
                "removals to be fitted on, so it knows which of them changed the answer (list more k_values: "
                "each K is then tested with a fit on the others)")
    if v["state"] == "by_construction":
        return (f"explanations at {label}: not tested — the {v['explainer']} explainer's first unit is the single "
                "removal that changed the answer most, so removing it beats random single removals by "
                "construction (the other K test it)")
    if v["state"] == "undecided":
        return (f"explanations at {label}: UNDECIDED — {n} question{'s' if n != 1 else ''} tested, and a test "
                f"across questions needs at least {v['min_questions']} to decide at p < {v['alpha']:g}"
                f"{f' over {family} K' if family > 1 else ''} "
                f"(removing the top units: {evidence})")
    return f"explanations at {label}: {_WORDS[v['state']]} ({evidence})"
