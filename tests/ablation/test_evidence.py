"""Known truth for the measures beyond drop-one (SPEC §12) with the scripted model.

The scripted model's log p(answer | prompt) is 0 when the prompt's first ``ANSWER=`` marker gives
that answer, else −10, minus 2 nats per ``DISTRACT`` marker: so which passages the answer depends
on is known exactly."""

import json
import math

import pyarrow.parquet as pq
import pytest

from ragray.ablation.span import answer_span
from ragray.attribution.subsets import draw_subsets, top_k_removed
from ragray.config import load_config
from ragray.errors import ConfigError
from ragray.generation.base import Generation
from ragray.generation.scripted import ScriptedGenerator
from ragray.metrics.attribution_checks import lds
from ragray.pipeline import run_influence


def record(qid, question, texts, answer="tern"):
    return {"id": qid, "question": question, "answers": [answer],
            "passages": [{"id": f"{qid}-p{i}", "title": "", "text": t} for i, t in enumerate(texts)],
            "gold_passage_ids": [f"{qid}-p0"]}


@pytest.fixture()
def dataset(tmp_path):
    rows = [
        # one passage carries the answer; BM25 ranks a question-like distractor first
        record("q1", "Which ferry sails to Kell?", [
            "Tern ANSWER=tern", "Which ferry sails to Kell? Which ferry, which Kell: ferry sails to Kell.",
            "Kell has a lighthouse.", "Tickets cost five crowns.", "Gulls nest on cliffs."]),
        # two passages each suffice: drop-one sees neither, the surrogate credits both
        record("q2", "What is the mill's grain?", [
            "The mill grinds barley ANSWER=barley", "Barley again ANSWER=barley", "Mills turn."], "barley"),
        # no passage carries an answer: the model says the same with no passages
        record("q3", "Who founded the garden?", ["Gardens grow.", "Founders found.", "Garden gates."], "x"),
        # a passage that makes the answer LESS likely
        record("q4", "Which bird nests on Myrrin?", [
            "Puffins ANSWER=puffin", "Myrrin birds DISTRACT", "Myrrin rocks."], "puffin"),
    ]
    path = tmp_path / "qa.jsonl"
    path.write_text("".join(json.dumps(r) + "\n" for r in rows), encoding="utf-8")
    return path


def run(dataset, out, *extra):
    cfg = load_config(None, [f"data.path={dataset}", "generation.backend=scripted", "retrieval.retriever=bm25",
                             "retrieval.scope=per_question", "metrics.embedding=false", *extra])
    res = run_influence(cfg, out, generator=ScriptedGenerator(), progress=False)
    # a feature that is off writes no table: read as no rows
    return {name: pq.read_table(res.out / f"{name}.parquet").to_pylist() if (res.out / f"{name}.parquet").exists()
            else [] for name in ("questions", "passages", "subsets", "checks")}


def by_id(rows, key="passage_id"):
    return {r[key]: r for r in rows}


def test_raw_signal_closed_book_and_context_dependence(dataset, tmp_path):
    t = run(dataset, tmp_path / "r", "influence.mode=logprob_share")
    qs, ps = by_id(t["questions"], "question_id"), by_id(t["passages"])
    assert qs["q1"]["logprob_all"] == 0.0 and qs["q1"]["logprob_none"] == -10.0
    assert qs["q1"]["context_dependent"] is True and qs["q1"]["scored_answer"] == "tern"
    assert qs["q1"]["answer_span"] == "through_gold" and qs["q1"]["scored_tokens"] == 1
    assert ps["q1-p0"]["logprob_drop"] == 10.0 and ps["q1-p0"]["logprob_drop_per_token"] == 10.0
    assert ps["q1-p1"]["logprob_drop"] == 0.0
    # the model answers "unknown" with or without the passages: nothing is used
    assert qs["q3"]["context_dependent"] is False and qs["q3"]["logprob_all"] == qs["q3"]["logprob_none"]
    # removing the distractor makes the answer likelier: a negative raw change, stored; influence clips it
    assert ps["q4-p1"]["logprob_drop"] == -2.0 and ps["q4-p1"]["influence"] == 0.0
    closed = [s for s in t["subsets"] if s["purpose"] == "closed_book"]
    assert len(closed) == 4 and all(s["kept_passage_ids"] == [] for s in closed)
    # checks are off by default: no check rows, no extra passes
    assert t["checks"] == [] and qs["q1"]["check_passes"] is None
    assert not (tmp_path / "r" / "checks.parquet").exists() and not (tmp_path / "r" / "checks.csv").exists()


def test_surrogate_credits_redundant_passages_that_drop_one_cannot_see(dataset, tmp_path):
    t = run(dataset, tmp_path / "s", "influence.mode=surrogate", "influence.masks=8")
    ps, qs = by_id(t["passages"]), by_id(t["questions"], "question_id")
    # drop-one: removing either copy leaves the other: neither looks used (a property, not a bug)
    assert ps["q2-p0"]["logprob_drop"] == 0.0 and ps["q2-p1"]["logprob_drop"] == 0.0
    assert ps["q2-p0"]["surrogate_weight"] > 2 and ps["q2-p1"]["surrogate_weight"] > 2
    assert abs(ps["q2-p2"]["surrogate_weight"]) < 1
    assert ps["q2-p0"]["influence"] > 0.5 and ps["q2-p1"]["influence"] > 0.5  # surrogate mode's influence
    # the one carrying passage ranks first; its weight is about the 10 nats it is worth
    assert ps["q1-p0"]["surrogate_weight"] == pytest.approx(10, abs=1.0)
    assert max(ps[f"q1-p{i}"]["surrogate_weight"] for i in range(1, 5)) < 1
    assert qs["q2"]["surrogate_passes"] > 0 and qs["q2"]["influence_mode"] == "surrogate"
    assert sum(s["purpose"] == "surrogate" for s in t["subsets"] if s["question_id"] == "q2") == 8


def test_jsd_ranks_the_carrying_passage_first(dataset, tmp_path):
    t = run(dataset, tmp_path / "j", "influence.mode=jsd")
    ps = by_id(t["passages"])
    assert ps["q1-p0"]["jsd"] > 0.5 and ps["q1-p0"]["influence"] > 0.5
    assert all(ps[f"q1-p{i}"]["jsd"] == pytest.approx(0.0, abs=1e-9) for i in range(1, 5))
    assert ps["q1-p0"]["influence_rank"] == 1.0


def test_top_k_drop_and_lds_find_what_the_model_used_and_a_relevance_control_does_not(dataset, tmp_path):
    t = run(dataset, tmp_path / "c", "influence.mode=logprob_share", "influence.check_subsets=12",
            "influence.check_top_k=[1,2]")
    checks = {(c["question_id"], c["measure"]): c for c in t["checks"]}
    used = checks[("q1", "logprob_drop")]
    # removing the passage the answer depends on takes the whole answer (10 nats)
    assert used["top_k"] == [1, 2] and used["top_k_drop"][0] == 10.0
    # BM25's top passage is the question-like distractor: removing it changes nothing
    rank = checks[("q1", "retrieval_rank")]
    assert rank["control"] is True and rank["top_k_drop"][0] == 0.0
    assert used["lds"] == pytest.approx(1.0) and used["n_subsets"] == 12
    assert checks[("q1", "random_control")]["lds"] is not None
    # an answer whose log-prob never varies has no LDS for any measure
    assert checks[("q3", "logprob_drop")]["lds"] is None
    q1 = by_id(t["questions"], "question_id")["q1"]
    # every distinct new context is paid once: a top-1 removal is a drop-one arm, the empty subset
    # the closed-book pass and the full set the baseline, all scored already
    ids = [f"q1-p{i}" for i in range(5)]
    known = {frozenset(ids), frozenset()} | {frozenset(ids) - {i} for i in ids}
    new = {frozenset(s["kept_passage_ids"]) for s in t["subsets"]
           if s["question_id"] == "q1" and s["purpose"] in ("heldout", "top_k")} - known
    assert q1["check_passes"] == len(new)


def test_existing_columns_are_unchanged_by_the_new_measures(dataset, tmp_path):
    plain = run(dataset, tmp_path / "p", "influence.mode=logprob_share")
    more = run(dataset, tmp_path / "m", "influence.mode=logprob_share", "influence.masks=8", "influence.check_subsets=8",
               "influence.check_top_k=[1]")
    for a, b in zip(plain["passages"], more["passages"]):
        assert (a["influence"], a["influence_rank"]) == (b["influence"], b["influence_rank"])


def test_answer_spans():
    first = answer_span("first_sentence")
    assert first("It is 31 metres tall. It is painted white.") == "It is 31 metres tall."
    assert first("Version 3.5 shipped. Then more.") == "Version 3.5 shipped."
    assert first("e.g. this one") == "e.g. this one"
    assert answer_span("first_line")("a\nb") == "a" and answer_span("full")(" x ") == " x "
    clause = answer_span("first_clause")
    assert clause("The tower is 31 metres tall, painted plain white, and shows a red flash") == "The tower is 31 metres tall"
    assert clause("about 3,100 species; from tree ferns") == "about 3,100 species"  # a number's comma stays
    assert clause("The answer is: 240\n\nThe passage is:") == "The answer is: 240"
    assert clause("It opened in 1899. It closed.") == "It opened in 1899." and clause(", x") == ", x"
    gold = answer_span("through_gold")
    tower = "The tower is 31 metres tall, painted plain white"
    assert gold(tower, ["31", "31 metres"]) == "The tower is 31 metres"  # the longest gold where one starts
    assert gold("held on the first Saturday of September, and", ["the first Saturday of September"]) \
        == "held on the first Saturday of September"  # articles and case as in contains_gold
    assert gold("It is 1.2 kilometres long, and", ["1.2 km", "1.2 kilometres"]) == "It is 1.2 kilometres"
    assert gold(tower, ["18 metres"]) == tower and gold(tower, []) == tower  # wrong, or no gold: all of it
    assert gold(" wrong \n", ["x"]) == " wrong \n"  # exactly what full scores, whitespace included
    assert gold("The Kell Maritime Museum\n\n[11] The", ["11"]) == "The Kell Maritime Museum\n\n[11] The"
    assert gold("[11] It has 11 rooms, and", ["11"]) == "[11] It has 11"  # the answer's 11, not the marker's
    with pytest.raises(ValueError, match="valid: full, first_sentence, first_line, first_clause, through_gold"):
        answer_span("middle")


def test_subsets_are_seeded_distinct_and_exclude_the_training_masks():
    a = draw_subsets(6, 20, seed=0, question_id="q", purpose="surrogate", shuffle=True)
    b = draw_subsets(6, 20, seed=0, question_id="q", purpose="surrogate", shuffle=True)
    assert a == b and len({s.kept for s in a}) == 20
    held = draw_subsets(6, 30, seed=0, question_id="q", purpose="heldout", exclude={s.kept for s in a})
    assert not {s.kept for s in held} & {s.kept for s in a}
    assert len(draw_subsets(3, 50, seed=0, question_id="q", purpose="heldout")) == 8  # all of 2^3
    assert top_k_removed([0.2, 0.9, 0.9, float("nan")], 2) == (1, 2)
    assert top_k_removed([0.5, 0.5, 0.1], 1) == (0,)  # a tie goes to the better retrieval rank


def test_lds_degenerate_cases():
    kept = [[0], [1], [0, 1], []]
    assert lds([1.0, 0.0], kept, [0.0, -5.0, 0.0, -5.0]) == pytest.approx(1.0)
    assert lds([1.0, 1.0], [[0], [1]] * 2, [0.0, -1.0, 0.0, -1.0]) == 0.0  # constant prediction
    assert lds([1.0, 0.0], kept, [0.0] * 4) is None  # the answer never changes


@pytest.mark.parametrize("setting, message", [
    ("influence.check_top_k=[0]", "check_top_k: every k must be >= 1"),
    ("influence.masks=2", "masks must be 0 or >= 4"),
    ("influence.answer_span=middle", "answer_span"),
])
def test_bad_settings_are_refused(dataset, setting, message):
    with pytest.raises(ConfigError, match=message):
        load_config(None, [f"data.path={dataset}", setting])


def test_lds_of_a_perfect_additive_model_is_one():
    kept = [s for s in ([0], [1], [2], [0, 1], [1, 2], [0, 2], [0, 1, 2])]
    w = [3.0, 1.0, -2.0]
    actual = [sum(w[i] for i in s) for s in kept]
    assert lds(w, kept, actual) == pytest.approx(1.0)
    assert math.isclose(lds([-x for x in w], kept, actual), -1.0)


def test_the_surrogate_fits_on_the_arms_it_already_has_but_never_on_a_held_out_subset():
    from ragray.attribution.base import MEASURES, Evidence, Scored
    from ragray.ablation.checks import heldout_subsets
    from ragray.config import InfluenceConfig

    full = frozenset({0, 1, 2})
    masks = (Scored(frozenset({0}), -1.0, "surrogate"), Scored(frozenset({0, 1}), -2.0, "surrogate"),
             Scored(frozenset({2}), -4.0, "surrogate"), Scored(frozenset({1}), -1.5, "surrogate"))
    arms = (Scored(full, 0.0, "full"), Scored(full - {0}, -5.0, "drop"), Scored(full - {1}, float("nan"), "drop"),
            Scored(full - {2}, -3.0, "drop"))
    evidence = Evidence(3, arms + masks, reserved=frozenset({full - {0}}))
    # the held-out arm and the NaN one are left out of the points a fit may use
    assert evidence.points(("full", "drop")) == [(full, 0.0), (full - {2}, -3.0)]
    with_arms = MEASURES.get("surrogate")(InfluenceConfig(masks=4)).scores(evidence)
    masks_only = MEASURES.get("surrogate")(InfluenceConfig(masks=4, surrogate_fit="masks")).scores(evidence)
    assert with_arms != masks_only
    # the held-out draw is seeded: the surrogate knows it before the check runs
    cfg = InfluenceConfig(check_subsets=8)
    assert heldout_subsets(4, cfg, "q", {full}) == heldout_subsets(4, cfg, "q", {full})


@pytest.mark.parametrize("fit", ["masks", "masks_and_arms"])
def test_either_surrogate_fit_finds_the_carrying_and_the_redundant_passages(dataset, tmp_path, fit):
    t = run(dataset, tmp_path / fit, "influence.mode=surrogate", "influence.masks=8",
            "influence.check_subsets=8", f"influence.surrogate_fit={fit}")
    ps = by_id(t["passages"])
    assert ps["q1-p0"]["surrogate_weight"] == pytest.approx(10, abs=1.0)
    assert ps["q2-p0"]["surrogate_weight"] > 2 and ps["q2-p1"]["surrogate_weight"] > 2
    surrogate = {c["question_id"]: c["lds"] for c in t["checks"] if c["measure"] == "surrogate_weight"}
    assert surrogate["q1"] == pytest.approx(1.0)


def test_the_arms_change_the_fit_where_the_answer_is_not_additive(dataset, tmp_path):
    """q2's answer needs either of two passages (not additive): the seven arms the run scored anyway
    are more points for the fit, so the weights move; the masks-only fit ignores them."""
    weights = {}
    for fit in ("masks", "masks_and_arms"):
        ps = by_id(run(dataset, tmp_path / fit, "influence.mode=surrogate", "influence.masks=4",
                       f"influence.surrogate_fit={fit}")["passages"])
        weights[fit] = [ps[f"q2-p{i}"]["surrogate_weight"] for i in range(3)]
    assert weights["masks"] != pytest.approx(weights["masks_and_arms"], abs=1e-3)


class _ClauseModel(ScriptedGenerator):
    """Known truth for the scored span: the answer is ``HEAD=<w>`` of one passage, then ", " and
    ``TAIL=<w>`` of another (what a small model invents after answering). log p(answer | prompt)
    loses 4 nats when the head's passage is missing and 12 when the tail's is: the tail is longer."""

    @staticmethod
    def _marks(prompt):
        text = prompt[-1].content
        return [m for m in ("31 metres", "painted white") if f"MARK={m.split()[0]}" in text]

    def generate(self, prompts):
        return [Generation(("The tower is 31 metres tall, painted white and red" if self._marks(p) else "unknown"),
                           10, 9, 0.0) for p in prompts]

    def logprobs(self, prompts, answers):
        out = []
        for p, a in zip(prompts, answers):
            marks = self._marks(p)
            lp = 0.0 if "31 metres" in marks else -4.0
            if a.endswith("red"):  # the tail is scored too
                lp += 0.0 if "painted white" in marks else -12.0
            out.append(lp)
        return out


def test_the_default_span_scores_the_part_that_answers_not_the_invented_tail(tmp_path):
    """The retriever ranks the gold passage (the answer's "31 metres") first and the passage the
    invented tail copies from third. Scoring the whole answer credits the tail's passage most and
    calls the right answer MISALIGNED; the default span (through the gold answer) credits the gold
    passage alone."""
    rows = [{"id": "t", "question": "How tall is the tower?", "answers": ["31 metres"],
             "passages": [{"id": "gold", "title": "", "text": "How tall is the tower? The tower MARK=31 metres."},
                          {"id": "other", "title": "", "text": "The tower of the harbour."},
                          {"id": "tail", "title": "", "text": "Myrrin Light is MARK=painted white and red."},
                          {"id": "x", "title": "", "text": "Gulls nest on cliffs."}],
             "gold_passage_ids": ["gold"]}]
    path = tmp_path / "t.jsonl"
    path.write_text("".join(json.dumps(r) + "\n" for r in rows), encoding="utf-8")

    def verdict(*extra):
        cfg = load_config(None, [f"data.path={path}", "generation.backend=scripted", "retrieval.retriever=given",
                                 "metrics.embedding=false", *extra])
        res = run_influence(cfg, tmp_path / ("r" + "".join(extra)), generator=_ClauseModel(), progress=False)
        q = pq.read_table(res.out / "questions.parquet").to_pylist()[0]
        ps = by_id(pq.read_table(res.out / "passages.parquet").to_pylist())
        return q, ps

    q, ps = verdict()
    assert q["answer_span"] == "through_gold" and q["scored_answer"] == "The tower is 31 metres"
    assert q["answer_correct"] is True and q["misaligned"] is False
    assert ps["gold"]["used"] and not ps["tail"]["used"]
    q, ps = verdict("influence.answer_span=full")
    assert q["misaligned"] is True and ps["tail"]["credit"] > ps["gold"]["credit"]
