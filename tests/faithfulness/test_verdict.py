"""The across-questions verdict of `ragray interpret`: known-truth runs with the scripted
generator (answers that need one known passage, answers that ignore the context) and the
decision rule on hand-made test results."""

import hashlib
import json
import re

import pyarrow.parquet as pq

import pytest

from ragray.adapters.cli import main
from ragray.metrics.stats import min_questions, sign_test, stratified_rank_test
from ragray.faithfulness.verdict import circular, family_verdicts, k_verdict
from ragray.generation.scripted import ScriptedGenerator
from ragray.pipeline import run_interpret
from ragray.report.interpret_console import headline, interpret_rows
from tests.faithfulness.test_interpret import FAST, cfg, record


def used(i):  # the answer is in passage i % 10: a faithful explanation ranks it first
    return record(f"used{i}", f"Which ferry sails to Kell on day {i}?",
                  {i % 10: f"The ferry to Kell is the Tern{i}. ANSWER=tern{i} It sails at noon."})


def ignored(i):  # the model ignores the context: no explanation can beat random removals
    return record(f"ignored{i}", f"Who founded garden number {i}?", {})


def interpret(tmp_path, rows, name, *extra):
    path = tmp_path / f"{name}.jsonl"
    path.write_text("".join(json.dumps(r) + "\n" for r in rows), encoding="utf-8")
    return run_interpret(cfg(path, "faithfulness.random_repeats=20", *extra), tmp_path / name, progress=False,
                         generator=ScriptedGenerator())


def test_answers_that_need_one_passage_are_faithful_with_enough_questions(tmp_path):
    res = interpret(tmp_path, [used(i) for i in range(7)], "used")
    s = res.summary
    # top-1 with the loo explainer is no test: its first unit is the removal that changed the answer most
    assert s.per_k["top-1"]["verdict"]["state"] == "by_construction"
    assert s.per_k["top-1"]["verdict"]["n_circular"] == 7 and s.per_k["top-1"]["cases"]["A"]["count"] == 7
    reasons = {(c["question_id"], c["k_label"]): c["reason"] for c in pq.read_table(res.out / "cases.parquet").to_pylist()}
    assert "by construction for the loo explainer at K = 1" in reasons[("used0", "top-1")]
    assert "by construction" not in reasons[("used0", "top-3")]
    v = s.per_k["top-3"]["verdict"]
    # top-3 and top-20% are tested (one family): a verdict takes the questions a test needs at 0.05 / 2
    assert (v["state"], v["n_tested"], v["n_most_worse"], v["min_questions"], v["n_family"]) == ("faithful", 7, 7, 7, 2)
    assert v["p_holm"] < 0.05 and s.per_k["top-20%"]["verdict"]["state"] == "faithful"
    assert headline(s.per_k).startswith("explanations at top-3: faithful: removing the units the explainer ranks "
                                        "first changes the answer more than removing random ones")
    assert "case A (faithful) in 7 of 7 questions (100%" in headline(s.per_k)
    assert [row[-1] for row in interpret_rows(s.per_k)] == ["not tested (by construction)", "faithful", "faithful"]
    html = (res.out / "report.html").read_text()
    assert "explanations at top-3: faithful" in html and "<td>faithful</td>" in html
    import ragray

    assert "explanations at top-3: faithful" in ragray.load_run(res.out)._repr_html_()  # the notebook card


def test_the_logprob_explainer_is_tested_at_top_1_in_generate_mode(tmp_path):
    s = interpret(tmp_path, [used(i) for i in range(7)], "lp", "faithfulness.explainer=logprob_drop").summary
    v = s.per_k["top-1"]["verdict"]
    assert (v["state"], v["n_tested"], v["n_circular"]) == ("faithful", 7, 0)
    assert headline(s.per_k).startswith("explanations at top-1: faithful")
    # in logprob mode the arm's similarity is a function of the drop it ranks by: circular again
    s = interpret(tmp_path, [used(i) for i in range(7)], "lpm", "faithfulness.explainer=logprob_drop",
                  "faithfulness.mode=logprob").summary
    assert s.per_k["top-1"]["verdict"]["state"] == "by_construction"


def test_four_questions_are_undecided_whatever_they_show(tmp_path):
    s = interpret(tmp_path, [used(i) for i in range(4)], "few").summary
    v = s.per_k["top-3"]["verdict"]
    # every question is case A, but 4 questions are too few for a verdict across questions (2 K tested:
    # as many as an exact paired test needs to reach 0.05 / 2)
    assert s.per_k["top-3"]["cases"]["A"]["count"] == 4
    assert (v["state"], v["n_tested"], v["n_most_worse"]) == ("undecided", 4, 4)
    assert headline(s.per_k).startswith("explanations at top-3: UNDECIDED — 4 questions tested, and a test across "
                                        "questions needs at least 7 to decide at p < 0.05 over 2 K")
    assert interpret_rows(s.per_k)[1][-1] == "UNDECIDED (7 needed)"


def test_a_model_that_ignores_the_context_is_not_shown_faithful(tmp_path):
    s = interpret(tmp_path, [ignored(i) for i in range(7)], "ignored").summary
    v = s.per_k["top-3"]["verdict"]
    assert (v["state"], v["n_tested"], v["n_most_worse"], v["p_value"]) == ("not_shown", 7, 0, 1.0)
    assert headline(s.per_k).startswith("explanations at top-3: not shown faithful")


def test_the_cli_prints_the_answer_first(tmp_path, capsys):
    path = tmp_path / "qa.jsonl"
    path.write_text("".join(json.dumps(used(i)) + "\n" for i in range(6)), encoding="utf-8")
    assert main(["interpret", "--dataset", str(path), "--backend", "scripted", "--repeats", "20", "--k", "top-3",
                 "--out", str(tmp_path / "cli"), "--no-progress", *[a for kv in FAST[:3] for a in ("--set", kv)]]) == 0
    lines = capsys.readouterr().out.splitlines()
    assert lines[0].startswith("ragray interpret: 6 questions")
    assert lines[1].startswith("explanations at top-3: faithful")
    assert any("verdict" in line for line in lines[2:5]) and any(line.startswith("  A faithful") for line in lines)


def ranks(below, above, level=0):
    """The rank test of questions whose arm sits below all 20 of their random draws (hurts more), above
    them all, or (``level``) in their middle."""
    return stratified_rank_test([(0.0, [1.0] * 20)] * below + [(1.0, [0.0] * 20)] * above
                                + [(0.5, [0.0, 1.0] * 10)] * level)


@pytest.mark.parametrize(
    ("most", "least", "n", "state"),
    [
        (ranks(9, 0), ranks(0, 0, 9), 9, "faithful"),
        (ranks(9, 0), ranks(0, 9), 9, "faithful"),  # the bottom units hurt less than random: fine
        (ranks(9, 0), ranks(9, 0), 9, "mixed"),  # the bottom units hurt too
        (ranks(0, 9), ranks(0, 0, 9), 9, "inverted"),
        (ranks(5, 4), ranks(0, 0, 9), 9, "not_shown"),
        (ranks(0, 0, 9), ranks(0, 0, 9), 9, "not_shown"),  # every question in the middle of its draws
        (ranks(5, 0), ranks(0, 0, 5), 5, "undecided"),  # 5 of 5 one way, yet too few questions for a verdict
    ],
)
def test_the_decision_rule(most, least, n, state):
    assert k_verdict(n, most, least, 0.05)["state"] == state


def test_the_k_a_run_tests_are_one_family():
    """Alone at 0.05, 6 questions below all their draws make top-20% faithful; tested with two other K,
    its p is Holm-adjusted (x 3, the smallest of the three) and 6 questions are too few for any K to be
    judged (7: an exact paired test's smallest p, 2 / 2^n, must go below 0.05 / 3)."""
    tests = {"top-1": (6, ranks(2, 2, 2), ranks(0, 0, 6), 0), "top-3": (6, ranks(3, 1, 2), ranks(0, 0, 6), 0),
             "top-20%": (6, ranks(6, 0), ranks(0, 0, 6), 0)}
    alone = k_verdict(*tests["top-20%"][:3], 0.05)
    assert (alone["state"], alone["n_family"]) == ("faithful", 1)
    together = family_verdicts(tests, 0.05)
    assert {k: v["state"] for k, v in together.items()} == dict.fromkeys(tests, "undecided")
    assert together["top-20%"]["p_holm"] == pytest.approx(3 * together["top-20%"]["p_value"])
    assert together["top-20%"]["min_questions"] == 7 and together["top-20%"]["n_family"] == 3
    # a K with no question kept (by construction) is not in the family
    tests["top-1"] = (0, ranks(0, 0), ranks(0, 0), 6)
    together = family_verdicts(tests, 0.05)
    assert together["top-1"]["state"] == "by_construction" and together["top-3"]["n_family"] == 2


def test_evidence_copied_into_two_passages_is_not_called_inverted(tmp_path):
    """The answer sits in two passages: removing either alone changes nothing, so loo ranks every
    unit 0 and its "top" units are a tie-broken random pick. Most random removals keep a copy and
    a few remove both, so one pick sits above the draws' mean far more often than below it: a test
    against the mean called loo inverted here (0 of 7 below it, p 0.031). Against the median it is
    not shown, and the surrogate explainer, which sees the pair, is faithful (at the default 50
    draws per K: its ranking at each K is fitted on the other K's draws, and with 20 a K's fit has
    too few draws that removed both copies)."""
    def dup(i):
        return record(f"dup{i}", f"Which ferry sails to Kell on day {i}?",
                      {i % 10: f"The ferry to Kell is the Tern{i}. ANSWER=tern{i}",
                       (i + 5) % 10: f"Ferry: Tern{i}. ANSWER=tern{i}"})

    loo = interpret(tmp_path, [dup(i) for i in range(7)], "dup-loo").summary
    assert {c["count"] for c in [loo.per_k["top-3"]["cases"]["B"]]} == {7}  # every question: uninformative
    assert loo.per_k["top-3"]["verdict"]["state"] == "not_shown"
    assert loo.per_k["top-3"]["most_vs_random"]["paired"]["mean_difference"]["mean"] < 0  # the mean's artifact
    sur = interpret(tmp_path, [dup(i) for i in range(7)], "dup-sur", "faithfulness.explainer=surrogate",
                    "faithfulness.random_repeats=50").summary
    assert sur.per_k["top-3"]["verdict"]["state"] == sur.per_k["top-20%"]["verdict"]["state"] == "faithful"


class NoiseGenerator(ScriptedGenerator):
    """Answers that are a fixed pseudo-random function of which passages are left: each removal
    changes the answer with chance 1/3, whatever was removed. No unit matters more than another,
    so no explanation can be shown faithful at K > 1."""

    def _answer(self, prompt):
        units = sorted(set(re.findall(r"UNIT\w+", prompt[-1].content)))
        draw = hashlib.sha256(" ".join(units).encode()).digest()[0]
        return "tern" if len(units) == 10 or draw % 3 else f"gull{draw}"


def noise(i):
    return record(f"noise{i}", f"Which bird nests on stack {i}?",
                  {j: f"A note on stack {j}: UNIT{i}x{j}." for j in range(10)})


def test_the_surrogate_explainer_is_tested_on_random_draws_it_was_not_fitted_on(tmp_path):
    """Fitted on every random draw, the surrogate knew which pairs' removal changed a random answer,
    and at top-20% (2 of 10 units: all 45 pairs drawn at 50 repeats) its top pair was one of them:
    "faithful" in 14 of 16 questions (p < 0.001) by construction. Fitted on the other K's draws for
    each K, it is not shown faithful anywhere; a K with no other K's draws to fit on is not tested."""
    rows = [noise(i) for i in range(16)]
    path = tmp_path / "noise.jsonl"
    path.write_text("".join(json.dumps(r) + "\n" for r in rows), encoding="utf-8")
    res = run_interpret(cfg(path, "faithfulness.explainer=surrogate"), tmp_path / "noise", progress=False,
                        generator=NoiseGenerator())
    states = {label: k["verdict"]["state"] for label, k in res.summary.per_k.items() if "verdict" in k}
    assert states == {"top-1": "not_shown", "top-3": "not_shown", "top-20%": "not_shown"}, states
    cases = pq.read_table(res.out / "cases.parquet").to_pylist()
    assert all("fitted on the other K's random draws" in c["reason"] and c["by_construction"] is False for c in cases)
    # one K: nothing else to fit on, so no test (and the words say what to do)
    one = run_interpret(cfg(path, "faithfulness.explainer=surrogate", "faithfulness.k_values=[top-20%]"),
                        tmp_path / "one", progress=False, generator=NoiseGenerator()).summary
    v = one.per_k["top-20%"]["verdict"]
    assert (v["state"], v["n_circular"], v["n_tested"]) == ("by_construction", 16, 0)
    assert headline(one.per_k).startswith("explanations at top-20%: not tested — the surrogate explainer had only "
                                          "this K's random removals to be fitted on")


def test_circular_pairs():
    assert circular("loo", "generate", 1) and circular("loo", "logprob", 1) and circular("logprob_drop", "logprob", 1)
    assert not circular("logprob_drop", "generate", 1) and not circular("surrogate", "generate", 1)
    assert not circular("loo", "generate", 2)


def test_min_questions_is_where_the_exact_signed_rank_test_can_decide():
    assert [min_questions(a) for a in (0.05, 0.01, 0.1, 0.0625)] == [6, 8, 5, 6]
    # exact two-sided minimum p = 2 / 2^n: below alpha at min_questions, not one question earlier
    for a in (0.05, 0.01, 0.1, 0.0625):
        n = min_questions(a)
        assert 2 / 2**n < a <= 2 / 2 ** (n - 1)


@pytest.mark.slow  # over 2 s: outside the fast subset (README)
def test_answers_that_change_at_random_are_not_called_faithful_at_any_k(tmp_path):
    """Known truth: removing two or more units gives a fresh pseudo-random answer for every set (1 in 3
    changed), so no ranking can beat random removals at K >= 2. Most random removals leave the answer
    as it was: the random median is the top similarity, and a sign test against it counted every
    DEL_MOST that changed anything as "below" and none as "above" — here top-20% "faithful" (this
    draw is one of the 12 in 60 where that rule raised a false alarm, benchmarks/bench_verdict_family.py).
    Ranked among each question's own random removals, it is not shown at any K."""
    rows = [{"id": f"r0q{i}", "question": f"Which bird nests on stack {i}?", "answers": ["x"],
             "passages": [{"id": f"r0q{i}-p{j}", "title": "", "text": f"A note on stack {j}: UNIT0x{i}x{j}."}
                          for j in range(10)]} for i in range(12)]
    path = tmp_path / "noise.jsonl"
    path.write_text("".join(json.dumps(r) + "\n" for r in rows), encoding="utf-8")
    res = run_interpret(cfg(path), tmp_path / "noise", progress=False, generator=NoiseGenerator())
    cases = [c for c in pq.read_table(res.out / "cases.parquet").to_pylist() if c["k_label"] == "top-20%"]
    before = sign_test([c["random_median"] - c["sim_most"] for c in cases])
    assert before["b10"] >= 6 and before["b01"] == 0 and before["p_value"] < 0.05  # the rule before: "faithful"
    assert all(c["random_median"] == 1.0 for c in cases)  # the median at the ceiling: nothing can be above it
    states = {label: k["verdict"]["state"] for label, k in res.summary.per_k.items()}
    assert states == {"top-1": "by_construction", "top-3": "not_shown", "top-20%": "not_shown"}, states
