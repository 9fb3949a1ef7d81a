"""Known truth for the interaction-aware attribution: single passage, either of two (OR), both
needed (AND), none, noise only — on the fit itself and through the influence loop with a
generator whose answer log-probability is a known function of the passages in the prompt."""

from __future__ import annotations

import json
import math
import zlib

import numpy as np
import pytest

from ragray.attribution.base import MEASURES, Evidence, Scored, measure_for_mode
from ragray.attribution.design import design_size, design_subsets
from ragray.attribution.interactions import COMPLEMENTS, KEEP_ALONE_WEIGHT, OVERLAPPING, SUBSTITUTES, fit_interactions
from ragray.config import load_config
from ragray.generation.scripted import ScriptedGenerator
from ragray.pipeline import run_influence

K = 5


def scored(value, k=K, jitter=0.0, seed=0, budget=None):
    """The design's contexts of a k-passage question whose answer's log-prob is ``value(kept)``
    plus seeded jitter of scale ``jitter`` per context."""
    rng = np.random.default_rng(seed)
    return [(s.kept, value(s.kept) + rng.normal(0.0, jitter)) for s in design_subsets(k, "q", budget)]


def fit(value, **kw):
    jitter = kw.pop("jitter", 0.3)
    return fit_interactions(K, scored(value, jitter=jitter, seed=kw.pop("seed", 0)), context_threshold=1.0, **kw)


def test_the_design_is_full_empty_each_left_out_each_kept_alone_then_pairs_up_to_the_budget():
    d = design_subsets(4, "q")
    full = frozenset(range(4))
    assert [s.kept for s in d] == [full, frozenset(), *(full - {i} for i in range(4)), *(frozenset({i}) for i in range(4))]
    assert len(d) == design_size(4) == 10
    more = design_subsets(6, "q", budget=20)
    assert len(more) == 20 and more[:14] == design_subsets(6, "q")
    extra = [s.kept for s in more[14:]]
    assert all(extra[i] | extra[i + 1] == frozenset(range(6)) and not extra[i] & extra[i + 1] for i in (0, 2, 4))
    assert design_subsets(6, "q", budget=5) == design_subsets(6, "q")  # the budget never cuts the design
    assert design_size(1) == len(design_subsets(1, "q")) == 2
    assert len(design_subsets(6, "q", budget=512)) == 64  # no more than the subsets there are


@pytest.mark.parametrize("key", ["budget", "masks", "check_subsets"])
def test_a_call_count_a_client_could_send_is_bounded(key):
    """influence.* is open to HTTP clients: no key of it can ask for unbounded model calls."""
    from ragray.errors import ConfigError

    with pytest.raises(ConfigError, match=key):
        load_config(None, [f"influence.{key}=100000"])
    assert getattr(load_config(None, [f"influence.{key}=512"]).influence, key) == 512


def test_one_passage_carries_the_answer():
    r = fit(lambda s: -5.0 if 2 in s else -20.0)
    assert r.used == (False, False, True, False, False) and r.group == (None,) * K
    assert r.credit[2] == pytest.approx(15.0, abs=0.5) and r.influence[2] > 0.9


def test_either_of_two_copies_suffices_each_gets_its_share_and_they_are_one_group():
    r = fit(lambda s: -5.0 if s & {0, 3} else -20.0)
    assert r.used == (True, False, False, True, False)
    # each copy: KEEP_ALONE_WEIGHT of what it gives alone (15 nats), nothing lost without it
    share = KEEP_ALONE_WEIGHT * 15.0
    assert r.credit[0] == pytest.approx(share, abs=0.6) and r.credit[3] == pytest.approx(share, abs=0.6)
    assert r.influence[0] == pytest.approx(r.influence[3], abs=0.1) and r.influence[0] > 0.4
    assert r.drop_one[0] == pytest.approx(0.0, abs=1.5)  # drop-one alone sees neither copy
    assert r.group[0] == r.group[3] == 1 and r.relation[0] == r.relation[3] == SUBSTITUTES


@pytest.mark.parametrize("copies", [3, 5, 8])
def test_evidence_in_many_passages_is_one_group_of_substitutes(copies):
    """A corpus that states the fact in every paragraph: each copy alone gives the whole answer and
    none is missed. The pairwise fit spreads that thin (with 10 passages it grouped none); read
    from the design, the copies are one group, 'either suffices', and the rest stays out."""
    k = 10
    holders = set(range(0, 2 * copies, 2)) if 2 * copies <= k else set(range(copies))
    value = lambda s: -5.0 if s & holders else -20.0  # noqa: E731
    r = fit_interactions(k, scored(value, k=k, jitter=0.3), context_threshold=1.0)
    assert {i for i in range(k) if r.used[i]} == holders
    assert {r.group[i] for i in holders} == {1} and {r.relation[i] for i in holders} == {SUBSTITUTES}
    assert all(r.group[i] is None for i in range(k) if i not in holders)


def test_a_passage_whose_part_another_carries_shares_evidence_but_does_not_suffice_for_it():
    """Passage 1 carries the answer; passage 3 alone gives part of it, nothing beside 1 (a bridge
    paragraph that names the answer's entity). They share evidence (strongly negative γ: one
    group, counted once), but 'either suffices' would be false: without 1 the answer is lost."""
    r = fit(lambda s: -5.0 if 1 in s else (-10.0 if 3 in s else -20.0))
    assert r.used[1] and r.used[3] and r.drop_one[1] > 5 and r.drop_one[3] == pytest.approx(0.0, abs=1.5)
    assert r.group[1] == r.group[3] is not None and r.relation[1] == r.relation[3] == OVERLAPPING


def test_two_passages_each_partly_enough_and_each_missed_are_needed_together():
    """Two facts that each give a third of the answer alone and are both missed when left out:
    neither suffices alone and each carries what the other cannot — complements, read from the
    design (the pairwise γ here is only 5 nats, half of either main effect, and linked nothing)."""
    r = fit(lambda s: -20.0 + 5.0 * len(s & {1, 4}) + (5.0 if {1, 4} <= s else 0.0))
    assert r.used[1] and r.used[4] and r.group[1] == r.group[4] is not None
    assert r.relation[1] == r.relation[4] == COMPLEMENTS
    before = fit_interactions(K, scored(lambda s: -20.0 + 5.0 * len(s & {1, 4}) + (5.0 if {1, 4} <= s else 0.0)),
                              context_threshold=1.0, needed_together=False)
    assert before.relation[1] != SUBSTITUTES


def test_a_bridge_pair_each_missed_neither_enough_alone_reads_needed_together():
    """A HotpotQA bridge: each paragraph alone lifts the answer a little (3 nats), both together
    15; leaving either out loses 12. Both used, one group, 'needed together'; the inert rest apart."""
    r = fit(lambda s: -20.0 + 3.0 * len(s & {0, 2}) + (9.0 if {0, 2} <= s else 0.0))
    assert r.used == (True, False, True, False, False)
    assert r.group[0] == r.group[2] is not None and r.relation[0] == COMPLEMENTS
    assert all(r.group[i] is None for i in (1, 3, 4))


def test_two_passages_needed_together_are_both_credited_and_grouped():
    r = fit(lambda s: -5.0 if {1, 4} <= s else -20.0)
    assert r.used == (False, True, False, False, True)
    assert r.keep_alone[1] == pytest.approx(0.0, abs=1.5)  # neither suffices alone
    assert r.group[1] == r.group[4] is not None and r.relation[1] == COMPLEMENTS


def test_an_answer_the_passages_do_not_change_uses_none():
    r = fit(lambda s: -5.0)
    assert not r.context_dependent and r.used == (False,) * K


def test_jitter_alone_is_rarely_use():
    """Every context moves the log-prob at random by a normal 1 nat (heavier than SmolLM2's drop-one
    jitter) and each passage adds 0.4 nats: the answer depends on the passages, but none carries
    it. Over 300 seeded questions at the default bar, under 5% of passages are marked used (the
    false-positive rate docs/trust.md states is measured here and on real off-topic passages)."""
    cfg = load_config(None, []).influence
    marked = 0
    for seed in range(300):
        r = fit_interactions(K, scored(lambda s: -9.0 + 0.4 * len(s), jitter=1.0, seed=seed), context_threshold=1.0,
                             noise_z=cfg.noise_z, min_effect=cfg.min_effect, min_share=cfg.min_share,
                             lead_z=cfg.lead_z, lead_share=cfg.lead_share, drop_z=cfg.drop_z, drop_floor=cfg.drop_floor)
        marked += sum(r.used)
    assert marked / (300 * K) < 0.05


def test_the_leader_is_used_where_jitter_hides_it_from_the_bar_every_passage_takes():
    """Passage 0 carries 3 nats (alone and left out); the four inert passages move the log-prob by
    ±0.8–0.9 nats when left out, so σ ≈ 1.26 and the bar 3σ ≈ 3.8 is over its credit of 3. The
    answer depends on the passages, so the top passage needs only 2σ ≈ 2.5: it alone is used."""
    full, v_all, v_none = frozenset(range(K)), -7.0, -10.0
    points = [(full, v_all), (frozenset(), v_none), (full - {0}, v_none), (frozenset({0}), v_all)]
    points += [(full - {i}, v_all - d) for i, d in zip(range(1, K), (-0.9, 0.9, -0.8, 0.8))]
    points += [(frozenset({i}), v_none + e) for i, e in zip(range(1, K), (0.1, -0.1, 0.2, -0.2))]
    r = fit_interactions(K, points, context_threshold=1.0)
    assert r.noise == pytest.approx(1.26, abs=0.01) and r.bar > r.credit[0] == pytest.approx(3.0)
    assert r.lead_bar == pytest.approx(2 * r.noise) and r.used == (True, False, False, False, False)
    assert fit_interactions(K, points, context_threshold=1.0, lead_z=None).used == (False,) * K


def test_a_passage_the_answer_misses_is_used_though_its_credit_is_under_a_nat():
    """The passages lift the answer by 1.6 nats: passage 2 gives 0.8 of them, and any of the other four
    gives the other 0.8 (copies of one fact), jitter 0.05 per context. Passage 2's credit (0.25 x 0.8
    alone + 0.75 x 0.8 left out) is under the 1-nat floor every passage and the leader take, but
    leaving it out costs the most, far over 3 jitters and 0.25 nats: with the leave-out rule on
    (``drop_z`` 3, version 5's; off by default) it is used, and the copies, each missed by nothing,
    are not; at the default it is not."""
    value = lambda s: -6.0 + 0.8 * (2 in s) + 0.8 * bool(s - {2})  # noqa: E731
    r = fit(value, jitter=0.05, drop_z=3.0)
    assert r.context_dependent and r.credit[2] < 1.0 <= r.bar and r.drop_one[2] == pytest.approx(0.8, abs=0.2)
    assert r.used == (False, False, True, False, False) and r.drop_bar < r.drop_one[2]
    assert fit(value, jitter=0.05).used == (False,) * K


def test_a_leave_out_loss_within_jitter_is_not_use():
    """Passage 2 gives 0.4 nats and the copies 0.8, jitter 0.5 per context: the largest leave-out
    loss no longer stands 3 jitters clear, so under 5% of passages are used over 100 seeds, where
    drop-one's relative rule marks at least one passage on every context-dependent answer."""
    value = lambda s: -6.0 + 0.4 * (2 in s) + 0.8 * bool(s - {2})  # noqa: E731
    marked = sum(sum(fit(value, jitter=0.5, seed=seed, drop_z=3.0).used) for seed in range(100))
    assert marked / (100 * K) < 0.05


def test_a_used_passage_stands_clear_of_jitter_that_would_pass_the_old_relative_bar():
    """The old rule marked a passage used at 0.75 x the question's largest drop: here the jitter of
    an inert passage is as large as the carrying passage's drop-one loss (copies hide most of it)."""
    r = fit(lambda s: (-5.0 if s & {0, 1} else -20.0) + (1.5 if 3 not in s else 0.0), jitter=0.2)
    assert r.used[0] and r.used[1] and not r.used[3] and not r.used[2]


def test_the_interactions_measure_is_the_default_and_reads_evidence():
    assert measure_for_mode("interactions").name == "interactions"
    cfg = load_config(None, []).influence
    measure = MEASURES.get("interactions")(cfg)
    ev = Evidence(K, tuple(Scored(kept, lp, "design") for kept, lp in scored(lambda s: -5.0 if 2 in s else -20.0)))
    credit = measure.scores(ev)
    assert int(np.argmax(credit)) == 2 and measure.calls(K) == 2 * (K + 1)


# -- through the loop -----------------------------------------------------------------------------


class Facts(ScriptedGenerator):
    """Answers "tern"; its log-prob is −5 when the prompt's passages hold the facts the rule needs
    (FACT_A, FACT_B markers), −20 otherwise, plus a seeded jitter per distinct prompt."""

    def __init__(self, rule, jitter=0.0):
        super().__init__()
        self.rule, self.jitter = rule, jitter

    def generate(self, prompts):
        out = super().generate(prompts)
        return [type(g)("tern", g.prompt_tokens, 1, 0.0) for g in out]

    def logprobs(self, prompts, answers):
        self.score_batches = [*getattr(self, "score_batches", []), len(prompts)]
        out = []
        for p in prompts:
            text = p[-1].content
            noise = (zlib.crc32(text.encode()) % 1000 / 1000 - 0.5) * 2 * self.jitter
            out.append((-5.0 if self.rule({f for f in ("FACT_A", "FACT_B") if f in text}) else -20.0) + noise)
        return out


def dataset(tmp_path, texts):
    row = {"id": "q", "question": "Which ferry sails to Kell?", "answers": ["tern"],
           "passages": [{"id": f"p{i}", "title": f"t{i}", "text": t} for i, t in enumerate(texts)]}
    path = tmp_path / "qa.jsonl"
    path.write_text(json.dumps(row) + "\n", encoding="utf-8")
    return path


CASES = {
    "single": (lambda f: "FACT_A" in f, ["Ferries.", "The Tern FACT_A", "Kell.", "Tickets.", "Gulls."],
               [False, True, False, False, False], "measured", "misaligned"),  # the retriever's #1 is unused
    "either": (lambda f: bool(f), ["The Tern FACT_A", "Ferries.", "Kell.", "The Tern again FACT_B", "Gulls."],
               [True, False, False, True, False], "measured", "aligned"),
    "both": (lambda f: f == {"FACT_A", "FACT_B"}, ["Ferries FACT_A", "Kell FACT_B", "Gulls.", "Tickets.", "Tide."],
             [True, True, False, False, False], "measured", "aligned"),
    "none": (lambda f: True, ["Ferries FACT_A", "Kell.", "Gulls.", "Tickets.", "Tide."],
             [False] * 5, "context_ignored", None),
}


@pytest.mark.parametrize("case", sorted(CASES))
def test_the_loop_marks_what_the_known_rule_uses(tmp_path, case):
    rule, texts, used, state, verdict = CASES[case]
    path = dataset(tmp_path, texts)
    cfg = load_config(None, [f"data.path={path}", "generation.backend=scripted", "retrieval.retriever=given",
                             "retrieval.scope=per_question"])
    res = run_influence(cfg, tmp_path / "r", generator=Facts(rule, jitter=0.3), progress=False)
    (record,) = res.records
    by_id = {p.passage_id: p for p in record.passages}
    assert [by_id[f"p{i}"].used for i in range(5)] == used
    q = record.question
    assert q.state == state and q.influence_mode == "interactions"
    assert q.misaligned is (None if verdict is None else verdict == "misaligned")
    grouped = [by_id[f"p{i}"].group for i in range(5) if used[i]]
    if case in ("either", "both"):
        assert grouped[0] is not None and grouped[0] == grouped[1] and "shared_evidence" in q.flags
        relation = "either suffices" if case == "either" else "needed together"
        page = (tmp_path / "r" / "report.html").read_text(encoding="utf-8")
        assert page.count('class="mk group"') == 2 and f"({relation})" in page
    if case == "none":
        assert q.context_dependent is False and "top1_ignored" not in q.flags


def test_noise_only_in_the_loop_is_not_use(tmp_path):
    """A generator whose log-prob is jitter around a small rise with every passage: the answer
    depends on the passages (gain over the closed book) but no passage is used, and the question
    is neither aligned nor misaligned."""

    class Drift(Facts):
        def logprobs(self, prompts, answers):
            return [-9.0 + 0.4 * p[-1].content.count("\n[") + (zlib.crc32(p[-1].content.encode()) % 1000 / 1000 - 0.5) * 2
                    for p in prompts]

    path = dataset(tmp_path, ["Ferries.", "Kell.", "Gulls.", "Tickets.", "Tide."])
    cfg = load_config(None, [f"data.path={path}", "generation.backend=scripted", "retrieval.retriever=given",
                             "retrieval.scope=per_question"])
    (record,) = run_influence(cfg, tmp_path / "r", generator=Drift(None), progress=False).records
    assert not any(p.used for p in record.passages) and record.question.misaligned is None
    assert record.question.state in ("diffuse", "context_ignored")
    assert math.isfinite(record.question.noise_scale) and record.question.used_bar >= 1.0


def test_states_agree_with_context_dependence():
    """A context-dependent answer is never 'does not depend on the passages', whatever the credits;
    an answer that does not depend on them is never aligned or misaligned, and carries no
    top-1-ignored or buried-evidence flag."""
    from ragray.metrics.influence import analyze_influence

    cfg = load_config(None, []).influence
    dependent = analyze_influence([1, 2, 3], [0.0, 0.0, 0.0], cfg, used=[False] * 3, group=[None] * 3,
                                  context_dependent=True)
    assert dependent.state == "diffuse" and dependent.alignment is None
    ignored = analyze_influence([1, 2, 3], [0.1, 0.0, 0.9], cfg, context_dependent=False)
    assert ignored.state == "context_ignored" and ignored.alignment is None
    assert ignored.flags == ("context_ignored",)
    grouped = analyze_influence([1, 2, 3], [0.5, 0.0, 0.5], cfg, used=[True, False, True], group=[1, None, 1],
                                context_dependent=True)
    assert grouped.alignment.misaligned is False and grouped.alignment.usage_ndcg == 1.0
    assert "shared_evidence" in grouped.flags and "buried_evidence" not in grouped.flags


def test_a_budget_adds_random_subsets_scored_in_the_same_call(tmp_path):
    """influence.budget above 2(k + 1) adds complementary pairs of random subsets: recorded as
    design rows, counted in n_calls, fitted, and the known answer is still the one used."""
    rule, texts, used, _, _ = CASES["either"]
    path = dataset(tmp_path, texts)
    cfg = load_config(None, [f"data.path={path}", "generation.backend=scripted", "retrieval.retriever=given",
                             "retrieval.scope=per_question", "influence.budget=18"])
    gen = Facts(rule, jitter=0.3)
    (record,) = run_influence(cfg, tmp_path / "r", generator=gen, progress=False).records
    # ONE scoring call for the drop-one arms and the whole design, the empty context included
    assert record.question.n_calls == 18 and gen.score_batches == [18]
    design = [s for s in record.subsets if s.purpose == "design"]
    assert len(design) == 5 + 6  # kept alone, then three complementary pairs
    assert [p.used for p in sorted(record.passages, key=lambda p: p.retrieval_rank)] == used


def test_a_group_reads_as_copies_only_when_the_text_repeats():
    """"A or its copy" for the same passage twice; chunks of one document share its title, not
    their text: "2 passages of A"; passages of different titles are named each."""
    from ragray.report.run_console import group_words

    def p(pid, title, text, rank, influence=0.4):
        return {"passage_id": pid, "title": title, "text": text, "retrieval_rank": rank, "influence": influence,
                "relation": "either suffices"}

    copy = [p("a", "Lighthouse", "Lit in 1871.", 1), p("b", "Lighthouse", "Lit in  1871.", 4)]
    assert group_words(copy) == "Lighthouse or its copy (either suffices; 0.80, #1 #4)"
    chunks = [p("c0", "1973 oil crisis", "The embargo began.", 2), p("c1", "1973 oil crisis", "It was lifted.", 3)]
    assert group_words(chunks) == "2 passages of 1973 oil crisis (either suffices; 0.80, #2 #3)"
    other = [p("x", "Ferries", "MV Sula.", 1), p("y", "Fleet", "MV Sula again.", 2)]
    assert group_words(other) == "Ferries or Fleet (either suffices; 0.80, #1 #2)"
    many = [p(f"m{i}", f"Title {i}", f"Text {i}.", i + 1, 0.1) for i in range(10)]  # one fact in ten articles
    assert group_words(many) == "Title 0 or Title 1 or 8 more (either suffices; 1.00, #1 #2 #3 …)"


def test_a_diffuse_answer_names_the_passages_that_carry_it_together():
    """Three passages each add 1.5 nats (under the 2-nat bar), two do nothing: the answer depends
    on the passages (4.5 nats), none is used, and the three carry it together; a used answer
    names no carriers."""
    r = fit(lambda s: -20.0 + 1.5 * len(s & {0, 2, 3}), jitter=0.05)
    assert r.context_dependent and not any(r.used)
    assert set(r.carried_by) <= {0, 2, 3} and len(r.carried_by) >= 2
    assert sum(r.influence[i] for i in r.carried_by) >= 0.5
    assert fit(lambda s: -5.0 if 2 in s else -20.0).carried_by == ()


def test_the_console_names_the_carriers_of_a_diffuse_answer():
    from ragray.report.run_console import verdict_words

    words = verdict_words({"state": "diffuse", "context_dependent": True, "carried_by": [2, 5]})
    assert "together #2 #5 carry the answer" in words
    assert "no single passage" in verdict_words({"state": "diffuse", "context_dependent": True})
