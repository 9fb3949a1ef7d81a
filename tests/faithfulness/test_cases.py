"""The Case A / B / C / inconclusive rule on fixed similarities."""

import pytest
from scipy import stats

from ragray.config import DecisionConfig
from ragray.faithfulness.cases import compare_to_random, decide_case

D = DecisionConfig()


def test_exhaustive_random_arm_is_known_exactly():
    rand = [1.0] * 9 + [0.0]  # 10 passages, one used: every 1-subset once
    res = decide_case(0.0, 1.0, rand, population=10, decision=D)
    assert res.case == "A"
    assert res.random_mean == pytest.approx(0.9) and res.random_low == res.random_high == pytest.approx(0.9)
    assert res.most.status == "below" and res.least.status == "above"
    assert res.rank_p_most == pytest.approx(0.1)  # 1 of the 10 subsets hurts as much


def test_sampled_random_arm_uses_a_t_test_with_finite_population_correction():
    rand = [0.0] * 15 + [1.0] * 35  # 50 of C(10, 3) = 120 subsets, 30% contain the used unit
    res = decide_case(0.0, 1.0, rand, population=120, decision=D)
    assert res.case == "A"
    plain = stats.ttest_1samp(rand, 0.2, alternative="greater").pvalue  # without the FPC
    cmp = compare_to_random(0.2, rand, None, D)
    assert cmp.p_below == pytest.approx(plain)
    with_fpc = compare_to_random(0.2, rand, 120, D)
    assert with_fpc.p_below < cmp.p_below  # the FPC narrows the standard error


def test_model_ignoring_context_is_case_b():
    res = decide_case(1.0, 1.0, [1.0] * 10, population=10, decision=D)
    assert res.case == "B" and res.most.status == res.least.status == "similar"


def test_redundant_evidence_is_case_c():
    rand = [1.0] * 9 + [0.92]
    res = decide_case(0.92, 1.0, rand, population=10, decision=D)
    assert res.case == "C" and "redundant" in res.reason


@pytest.mark.parametrize(
    ("most", "least", "rand", "words"),
    [
        (0.0, 0.0, [0.5, 0.6, 0.4, 0.5, 0.55, 0.45], "also hurts"),  # least below too
        (1.0, 0.0, [0.5, 0.6, 0.4, 0.5, 0.55, 0.45], "inverted"),  # most above random
        (0.5, 1.0, [0.5, 0.6, 0.4, 0.5, 0.55, 0.45], "does not differ"),
    ],
)
def test_inconclusive_cases_say_why(most, least, rand, words):
    res = decide_case(most, least, rand, population=None, decision=D)
    assert res.case == "inconclusive" and words in res.reason


def test_min_effect_guards_against_tiny_significant_differences():
    rand = [1.0] * 49 + [0.99]
    res = decide_case(0.98, 1.0, rand, population=None, decision=D)
    assert res.most.p_below < 0.05 and res.most.effect < D.min_effect
    assert res.most.status == "similar"
    loose = decide_case(0.98, 1.0, rand, population=None, decision=DecisionConfig(min_effect=0.0))
    assert loose.most.status == "below"


def test_attribution_methods_are_measures_of_the_one_registry_in_a_fixed_order():
    from ragray.attribution.base import Changed, Evidence, Scored
    from ragray.faithfulness.attribution import attribution_order, explainers

    assert attribution_order() == ("loo", "logprob_drop", "surrogate")
    assert [m.name for m in explainers().values()] == ["loo", "logprob_drop", "surrogate"]
    full = frozenset(range(3))
    changed = tuple(Changed(full - {i}, c, "drop") for i, c in enumerate([1.0, 0.0, 0.5]))
    scored = (Scored(full, -1.0, "full"),
              *(Scored(full - {i}, lp, "drop") for i, lp in enumerate([-3.0, -1.0, -2.0])))
    evidence = Evidence(3, scored, changed)
    measure = {n: m() for n, m in explainers().items()}
    assert measure["loo"].scores(evidence) == [1.0, 0.0, 0.5]
    assert measure["logprob_drop"].scores(evidence) == [2.0, 0.0, 1.0]
    assert [m.calls(3) for m in measure.values()] == [3, 4, 0]
    assert [n for n, m in measure.items() if m.needs_generated_arms] == ["loo"]