"""The shared-evidence report on records of known truth: the figures count what the marks do,
the edit test scores marks against where the answer moved, the split never moves."""

from __future__ import annotations

import math

import pytest

from benchmarks import shared_evidence_report as report
from benchmarks.protocol import split_of
from ragray.attribution.design import design_subsets


def record(name, roles, value, *, right=True, edits=None, sim=None):
    """A text-free record whose scored contexts follow ``value(kept)`` exactly (the design's contexts)."""
    k = len(roles)
    full = frozenset(range(k))
    contexts = {s.kept: value(s.kept) for s in design_subsets(k, "q")}
    v_all, v_none = contexts[full], contexts[frozenset()]
    passages = [{"id": f"p{i}", "rank": i + 1, "role": r, "logprob_drop": v_all - contexts[full - {i}],
                 "keep_alone_gain": contexts[frozenset({i})] - v_none,
                 "answer_similarity": (sim or [0.0] * k)[i]} for i, r in enumerate(roles)]
    return {"id": f"{name}:x", "set": name, "split": "test", "answer_correct": right,
            "context_dependent": v_all - v_none >= 1.0, "answer_elsewhere": False, "logprob_all": v_all,
            "logprob_none": v_none, "n_calls": len(contexts), "passages": passages,
            "contexts": [[sorted(s), lp] for s, lp in contexts.items()], "edits": edits}


def data():
    off = record("offtopic_squad", ["gold", "distractor", "offtopic", "offtopic", "distractor"],
                 lambda s: -20.0 + 10.0 * (0 in s) + 0.3 * (2 in s),
                 edits={"unedited": "original", "cases": [{"edited": [0], "every_copy": True, "outcome": "substitute"}]},
                 sim=[0.1, 0.9, 0.0, 0.0, 0.0])
    dup = record("dup_exact_squad", ["gold", "copy", "distractor", "distractor"],
                 lambda s: -20.0 + 12.0 * bool(s & {0, 1}),
                 edits={"unedited": "original", "cases": [
                     {"edited": [0], "every_copy": False, "outcome": "original"},
                     {"edited": [1], "every_copy": False, "outcome": "original"},
                     {"edited": [0, 1], "every_copy": True, "outcome": "substitute"}]})
    bridge = record("bridge_hotpot", ["support", "support", "distractor", "distractor", "distractor"],
                    lambda s: -20.0 + 3.0 * len(s & {0, 1}) + 9.0 * ({0, 1} <= s))
    out = {name: [] for name in report.SETS}
    for r in (off, dup, bridge):
        out[r["set"]].append(r)
    return out


def test_the_figures_count_what_each_mark_does_on_known_truth():
    d = data()
    new, before = report.figures(d, report.interactions()), report.figures(d, report.drop_one())
    # the copies: each alone gives the answer, neither is missed; the default credits them, drop-one cannot
    assert new["gold_copy_used_on_right_answers"]["k"] == 1 and before["gold_copy_used_on_right_answers"]["k"] == 0
    assert new["gold_recall_right_context_dependent"] == {**report.share(1, 1)}
    assert new["offtopic_marked_used"]["k"] == 0 and new["offtopic_marked_used"]["n"] == 2
    assert new["bridge_both_supporting_used"]["k"] == 1 and new["bridge_needed_together"]["k"] == 1
    groups = report.grouping(d, report.interactions())
    assert groups["gold_and_copy_one_group"]["k"] == 1 and groups["bridge_supports_called_substitutes"]["k"] == 0


def test_the_edit_test_scores_marks_against_where_the_answer_moved():
    e = report.edit_figures(data(), {"default": report.interactions(), "drop_one": report.drop_one(),
                                     "answer_similarity_top1": report.top1("answer_similarity")})
    pooled = e["pooled"]
    # a copy edited alone, the other still holding the answer, is no label (the model may have used
    # either); the lone holder whose edit moved the answer is a positive
    assert pooled["passages_labelled"] == 1 and pooled["moved"] == 1
    assert pooled["methods"]["default"]["recall"]["share"] == 1.0
    assert pooled["methods"]["default"]["precision"] == report.share(1, 1)
    assert pooled["methods"]["answer_similarity_top1"]["recall"]["share"] == 0.0  # its top passage held no answer
    assert pooled["every_copy_moved_some_copy_used"] == report.share(1, 1)


def test_the_frontier_holds_every_candidate_bar_and_drop_one():
    rows = report.frontier(data(), report.BEFORE)
    assert len(rows) == len(report.GRID) + len(report.DROP_ONE_FRACTIONS)
    assert sum(r["default"] for r in rows) == 1 and "lead_z" not in rows[0] and "drop_z" not in rows[0]
    leads = report.V4.leads
    rows = report.frontier(data(), report.BEFORE, report.V4, leads[-1])
    assert len(rows) == len(report.GRID) * len(leads) + len(report.DROP_ONE_FRACTIONS)
    assert [(r["lead_z"], r["lead_share"]) for r in rows if r["default"]] == [leads[-1]]
    drops = report.V5.drops
    rows = report.frontier(data(), report.BEFORE, report.V5, report.V5.leads[0], drops[1])
    assert len(rows) == len(report.GRID) * len(drops) + len(report.DROP_ONE_FRACTIONS)
    assert [(r["drop_z"], r["drop_floor"]) for r in rows if r["default"]] == [drops[1]]


def test_the_tune_choice_follows_the_registered_objective():
    v = report.CURRENT
    chosen, lead, drop, rows = report.choose(data())
    assert len(rows) == len(report.GRID) * len(v.leads) * len(v.drops) and chosen in report.GRID
    assert lead in v.leads and drop in v.drops
    best = max(r["score"] for r in rows)
    assert any(math.isclose(r["score"], best) for r in rows
               if (r["noise_z"], r["min_effect"], r["min_share"]) == chosen
               and (None if r.get("lead_z") is None else (r["lead_z"], r["lead_share"])) == lead
               and (None if r.get("drop_z") is None else (r["drop_z"], r["drop_floor"])) == drop)


def test_the_leader_finds_the_gold_that_jitter_hides_from_the_bar_and_marks_no_off_topic_passage():
    """Version 4's known truth: the gold carries 3 nats; the other passages' left-out moves (±0.8–0.9)
    put the 3σ bar over its credit. Version 3's bar misses it; the leader (2σ) marks it alone."""
    moves = {1: 0.9, 2: -0.9, 3: 0.8, 4: -0.8}
    full = frozenset(range(5))
    r = record("offtopic_squad", ["gold", "offtopic", "offtopic", "distractor", "distractor"],
               lambda s: -10.0 + 3.0 * (0 in s) + next((v for i, v in moves.items() if s == full - {i}), 0.0))
    d = {name: [r] if name == "offtopic_squad" else [] for name in report.SETS}
    v3 = report.figures(d, report.interactions(3.0, 1.0, 0.1, None, None))
    v4 = report.figures(d, report.interactions(3.0, 1.0, 0.1, (2.0, 0.25), None))
    assert v3["gold_recall_right_context_dependent"]["k"] == 0 and v4["gold_recall_right_context_dependent"]["k"] == 1
    assert v4["offtopic_marked_used"]["k"] == 0


def test_the_leave_out_rule_finds_a_gold_the_answer_misses_under_a_nat_and_marks_no_off_topic_passage():
    """Version 5's known truth: the passages lift the answer by 1.6 nats, half of it from the gold
    (missed by 0.8 when left out) and half from either of two distractors that repeat each other;
    the off-topic passages do nothing. No credit reaches the 1-nat floor, so versions 3 and 4 mark
    nothing; the leave-out rule marks the gold alone."""
    r = record("offtopic_squad", ["gold", "offtopic", "offtopic", "distractor", "distractor"],
               lambda s: -10.0 + 0.8 * (0 in s) + 0.8 * bool(s & {3, 4}))
    d = {name: [r] if name == "offtopic_squad" else [] for name in report.SETS}
    v4 = report.figures(d, report.interactions(3.0, 1.0, 0.1, (2.0, 0.25), None))
    v5 = report.figures(d, report.interactions(3.0, 1.0, 0.05, (2.0, 0.25), (3.0, 0.25)))
    assert v4["gold_recall_right_context_dependent"]["k"] == 0 and v5["gold_recall_right_context_dependent"]["k"] == 1
    assert v5["offtopic_marked_used"] == report.share(0, 2)


@pytest.mark.parametrize("item", ["offtopic_squad:5727", "bridge_hotpot:5a8b", "dup_exact_hotpot:5ab3"])
def test_the_split_is_a_hash_of_the_id_and_items_read_before_stay_in_tune(item):
    assert split_of(item) == split_of(item) in ("tune", "test")
    assert split_of(item, frozenset({item})) == "tune"
    ids = [f"offtopic_squad:{i}" for i in range(3000)]
    share = sum(split_of(i) == "tune" for i in ids) / len(ids)
    assert 0.3 < share < 0.37  # one in three, by hash


def test_version_3_never_chooses_a_bar_over_its_false_alarm_cap_and_version_2_keeps_its_rule():
    rows = {(r["noise_z"], r["min_effect"], r["min_share"]): r for r in report.choose(data(), report.V2)[-1]}
    v3_chosen, v3_lead, v3_drop, v3_rows = report.choose(data(), report.V3)
    assert v3_lead is None and v3_drop is None and all("lead_z" not in r and "drop_z" not in r for r in v3_rows)
    for r in v3_rows:
        if (r["offtopic_marked_used_right_answers"] or 0) > report.V3_CAP:
            assert r["score"] == -math.inf
    assert (v3_rows[report.GRID.index(v3_chosen)]["offtopic_marked_used_right_answers"] or 0) <= report.V3_CAP
    # version 2's objective: recall minus 4 x false alarms over 5%, unchanged
    assert all(math.isclose(r["score"], report.recall_sum(r_fig) - 4 * max(0.0, (r_fig["offtopic_marked_used_right_answers"]["share"] or 0) - 0.05))
               for key, r in rows.items()
               for r_fig in [report.figures(data(), report.interactions(*key, None, None), 2)])


def test_off_topic_passages_that_hold_the_answer_are_counted_apart_from_version_3_on():
    d = data()
    d["offtopic_squad"][0]["passages"][2]["holds_answer"] = True
    v3, v2 = report.figures(d, report.interactions(), 3), report.figures(d, report.interactions(), 2)
    assert v3["offtopic_marked_used_right_answers_not_holding_answer"]["n"] == 1
    assert v3["offtopic_marked_used_right_answers"]["n"] == 2
    assert "offtopic_marked_used_right_answers_not_holding_answer" not in v2


def test_the_default_is_version_4s_rule_and_version_5_is_withdrawn():
    """What users run is the rule the published result leads with: version 6 reads version 4's
    registered choice, fixed, and it is ragray's defaults (no leave-out rule); version 5 is kept as
    read, under ``withdrawn``."""
    from ragray.config import load_config

    c = load_config(None, []).influence
    bar, lead, drop = report.registered_rule(report.CURRENT)
    assert report.CURRENT is report.V6 and report.WITHDRAWN == (report.V5,)
    assert report.registered_rule(report.V4) == (bar, lead, drop)
    assert (bar, lead, drop) == ((c.noise_z, c.min_effect, c.min_share), (c.lead_z, c.lead_share), None)
    assert c.drop_z is None and report.registered_rule(report.V5)[2] == (3.0, 0.25)


def test_the_decision_sets_both_rules_side_by_side_on_the_split_fresh_to_both(monkeypatch):
    """On version 5's known truth (the gold missed by 0.8 nats when left out, under every floor) the
    decision's table shows what each rule does: version 5 finds the gold, version 4 does not, and the
    paired recall says so; the whole part is labelled post hoc."""
    r = record("offtopic_squad", ["gold", "offtopic", "offtopic", "distractor", "distractor"],
               lambda s: -10.0 + 0.8 * (0 in s) + 0.8 * bool(s & {3, 4}))
    reads = []
    monkeypatch.setattr(report, "load", lambda *splits: reads.append(splits) or
                        {name: [r] if name == "offtopic_squad" else [] for name in report.SETS})
    d = report.decision()
    assert d["post_hoc"] is True and d["decision"].endswith("shared_evidence_decision.json")
    assert reads == [(report.V5.test,), (report.V4.test, report.V5.test)]
    both = d["fresh_to_both"]
    assert set(both["figures"]) == {"version_4", "version_5", "drop_one", "drop_one_0.9"}
    assert [both["figures"][m]["gold_recall_right_context_dependent"]["k"] for m in ("version_4", "version_5")] == [0, 1]
    paired = both["gold_recall_version_4_minus_version_5"]
    assert (paired["n"], paired["only_first"], paired["only_second"]) == (1, 0, 1)


def test_republishing_is_refused_before_the_current_versions_test_read(monkeypatch):
    """``republish`` writes reads already recorded again; a version never read must go through ``test``
    (which records the read), so republishing cannot stand in for a test read."""
    import benchmarks.protocol as protocol

    monkeypatch.setattr(protocol, "test_reads", lambda name: [])
    monkeypatch.setattr(report, "compute", lambda: pytest.fail("computed without a recorded read"))
    monkeypatch.setattr("sys.argv", ["shared_evidence_report.py", "republish"])
    with pytest.raises(SystemExit, match="has no recorded read"):
        report.main()


def test_the_plain_reading_says_when_a_split_is_too_small_and_when_the_cheaper_rule_is_level():
    """The reading of the published result: an off-topic share over 5% whose interval spans 5% is
    called undecided at its size; drop-one at its strictest fraction level with the default on both
    figures is called level. Changing the counts changes the words."""
    import copy
    import json

    from benchmarks.shared_evidence_docs import reading

    published = json.loads((report.REPO / "benchmarks/results/shared_evidence.json").read_text())

    def with_offtopic(result, k, n):
        r = copy.deepcopy(result)
        lo, hi = report.wilson(k, n)
        r["test"]["default"]["offtopic_marked_used_right_answers"] = {"k": k, "n": n, "share": k / n, "ci95": [lo, hi]}
        return r

    def text(result):
        return " ".join(reading(result))

    small = text(with_offtopic(published, 1, 18))
    assert "the 5% goal is **not met**" in small and "18 passages cannot decide it" in small
    large = text(with_offtopic(published, 60, 600))  # 10%, interval above 5%: decided
    assert "the 5% goal is **not met**" in large and "cannot decide it" not in large
    assert "cannot decide it" not in text(with_offtopic(published, 0, 18))  # met

    level = with_offtopic(published, 0, 18)  # the strictest drop-one rule then has the fewest false alarms
    rec = level["test"]["default"]["gold_recall_right_context_dependent"]
    strict_level = max((r for r in level["frontier"] if r["rule"] == "drop-one"), key=lambda r: r["fraction"])
    strict_level["gold_recall"] = dict(rec)
    strict_level["offtopic_right"] = dict(level["test"]["default"]["offtopic_marked_used_right_answers"])
    assert "level with the default on both" in text(level)
    strict_level["gold_recall"] = {**rec, "k": rec["k"] - 1, "share": (rec["k"] - 1) / rec["n"]}
    assert "level with the default on both" not in text(level)
