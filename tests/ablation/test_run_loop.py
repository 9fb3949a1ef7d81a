"""`ragray run` orchestration with the scripted generator: calls, influence, errors, resume."""

import json
import math
from dataclasses import replace
import re

import pyarrow.parquet as pq
import pytest

from ragray.adapters.cli import main
from ragray.pipeline import run_influence
from ragray.config import load_config
from ragray.errors import BackendError, InputError
from ragray.generation.scripted import ScriptedGenerator
from ragray.metrics.summary import describe_mode


def record(qid, question, texts, gold=()):
    return {
        "id": qid, "question": question, "answers": ["tern"],
        "passages": [{"id": f"{qid}-p{i}", "title": "", "text": t} for i, t in enumerate(texts)],
        "gold_passage_ids": list(gold),
    }


@pytest.fixture()
def dataset(tmp_path):
    rows = [
        # the ferry passage carries the answer: removing it changes the answer, the rest do not
        record("q1", "Which ferry sails to Kell?", [
            "The ferry to Kell is the Tern ANSWER=tern", "Kell has a lighthouse.",
            "Ferries sail daily.", "Tickets cost five crowns."], gold=["q1-p0"]),
        # the answer sits in the passage BM25 ranks last (it shares no word with the question)
        record("q2", "Which bird nests on Myrrin?", [
            "Which bird nests on Myrrin is a question birders of Myrrin ask.",
            "Nesting season on Myrrin: a bird count.",
            "Birds of Myrrin.", "Puffins arrive in spring ANSWER=puffin"]),
        # no passage carries an answer: every ablation gives the same answer
        record("q3", "Who founded the garden?", ["Gardens grow.", "Founders found.", "Garden gates."]),
        # redundant evidence: the first marker wins, the second takes over when it is removed
        record("q4", "What is the mill's grain?", [
            "The mill grinds barley ANSWER=barley", "Barley again ANSWER=barley", "Mills turn."]),
    ]
    path = tmp_path / "qa.jsonl"
    path.write_text("".join(json.dumps(r) + "\n" for r in rows), encoding="utf-8")
    return path


def config(dataset, *extra):
    return load_config(None, [f"data.path={dataset}", "generation.backend=scripted", *extra])


def read(out, name):
    return pq.read_table(out / f"{name}.parquet").to_pylist()


@pytest.mark.slow  # over 2 s: outside the fast subset (README)
def test_influence_of_used_and_unused_passages(dataset, tmp_path):
    gen = ScriptedGenerator()
    res = run_influence(config(dataset, "influence.mode=loo"), tmp_path / "r", generator=gen, progress=False)
    qs = {q["question_id"]: q for q in read(res.out, "questions")}
    ps = read(res.out, "passages")
    calls = read(res.out, "calls")
    # exactly k + 1 calls per question, sent as one batch per question
    assert gen.batches == [5, 5, 4, 4]
    assert [c["arm"] for c in calls if c["question_id"] == "q1"] == ["baseline"] + ["drop"] * 4
    infl = {p["passage_id"]: p["influence"] for p in ps}
    assert qs["q1"]["baseline_answer"] == "tern" and infl["q1-p0"] == 1.0
    assert infl["q1-p1"] == infl["q1-p2"] == infl["q1-p3"] == 0.0  # answer unchanged -> 0
    assert qs["q1"]["state"] == "measured" and qs["q1"]["baseline_em"] == 1.0
    assert qs["q2"]["spearman_rho"] < 0 and "buried_evidence" in qs["q2"]["flags"]
    assert "inverted" in qs["q2"]["flags"] and qs["q2"]["divergent"] is True
    assert qs["q3"]["state"] == "context_ignored" and qs["q3"]["spearman_rho"] is None
    assert infl["q4-p0"] == 0.0 and infl["q4-p1"] == 0.0  # redundancy hides both
    assert qs["q4"]["state"] == "context_ignored"
    s = json.loads((res.out / "summary.json").read_text())
    assert s["n_questions"] == 4 and s["n_calls"] == 18 and s["n_measured"] == 2
    assert s["states"] == {"measured": 2, "context_ignored": 2}
    assert s["flag_counts"]["context_ignored"] == 2 and s["errors"] == 0
    # drop arms follow retrieval rank order
    by_rank = sorted((p for p in ps if p["question_id"] == "q3"), key=lambda p: p["retrieval_rank"])
    removed = [c["removed_passage_ids"] for c in calls if c["question_id"] == "q3"]
    assert removed == [[]] + [[p["passage_id"]] for p in by_rank]


@pytest.mark.slow  # over 2 s: outside the fast subset (README)
def test_outputs_carry_passage_text_use_and_correctness(dataset, tmp_path):
    """passages: title, text, used (influence.used_rule); questions: answer_correct by gold
    containment, dtype (old logs' ``precision`` still read); no file for the checks that were off."""
    res = run_influence(config(dataset, "influence.mode=loo"), tmp_path / "r", generator=ScriptedGenerator(),
                        progress=False)
    ps = {p["passage_id"]: p for p in read(res.out, "passages")}
    assert ps["q1-p0"]["text"] == "The ferry to Kell is the Tern ANSWER=tern" and ps["q1-p0"]["title"] == ""
    assert ps["q1-p0"]["used"] is True and ps["q1-p1"]["used"] is False
    assert not any(p["used"] for p in ps.values() if p["question_id"] == "q3")  # the answer ignores context
    qs = {q["question_id"]: q for q in read(res.out, "questions")}
    assert qs["q1"]["answer_correct"] is True and qs["q3"]["answer_correct"] is False
    # the stage through the loop: a right answer; a wrong one the passages do not change
    assert qs["q1"]["stage"] == "right" and qs["q3"]["stage"] in ("memory", "retrieval") and qs["q3"]["stage_why"]
    assert "precision" not in qs["q1"] and "dtype" in qs["q1"]
    columns = list(read(res.out, "questions")[0])  # appended, in this order
    assert columns[-16:] == ["answer_correct", "dtype", "forward_passes", "host_syncs", "tokens_computed",
                             "tokens_minimum", "padding_tokens", "answerable", "declined", "decline_margin",
                             "carried_by", "edit_calls", "edit_unedited", "edit_reproduces", "stage", "stage_why"]
    assert qs["q1"]["forward_passes"] is None  # a scripted generator counts nothing: null, not 0
    assert not (res.out / "checks.csv").exists() and not (res.out / "checks.parquet").exists()
    from ragray.rows.influence import QuestionRow
    assert QuestionRow.from_dict({"question_id": "x", "precision": "float32"}).dtype == "float32"


def test_failed_calls_are_recorded_and_the_run_goes_on(dataset, tmp_path):
    gen = ScriptedGenerator(fail_on="Nesting season")  # every q2 prompt still holding passage 1
    res = run_influence(config(dataset), tmp_path / "r", generator=gen, progress=False)
    q2 = next(q for q in read(res.out, "questions") if q["question_id"] == "q2")
    assert q2["state"] == "error" and "scripted failure" in q2["error"]
    assert res.summary.errors == 1 and res.summary.n_questions == 4


class Exploding(ScriptedGenerator):
    def __init__(self, after, exc):
        super().__init__()
        self.after, self.exc = after, exc

    def generate(self, prompts):
        if len(self.batches) == self.after:
            raise self.exc
        return super().generate(prompts)


def test_backend_exception_is_recorded(dataset, tmp_path):
    res = run_influence(config(dataset), tmp_path / "r", generator=Exploding(1, BackendError("503 forever")),
                        progress=False)
    q2 = read(res.out, "questions")[1]
    assert q2["state"] == "error" and q2["error"] == "503 forever" and q2["n_calls"] == 0


def _stable(rows):
    return [{k: v for k, v in r.items() if k not in ("seconds", "latency_s")} for r in rows]


def test_interrupted_run_resumes_to_the_same_result(dataset, tmp_path):
    cfg = config(dataset, "influence.mode=loo")
    full = run_influence(cfg, tmp_path / "full", generator=ScriptedGenerator(), progress=False)
    with pytest.raises(KeyboardInterrupt):
        run_influence(cfg, tmp_path / "cut", generator=Exploding(2, KeyboardInterrupt()), progress=False)
    log = (tmp_path / "cut" / "progress.jsonl").read_text().splitlines()
    assert len(log) == 2
    # a torn half-written line (killed mid-write) must not break the resume
    with open(tmp_path / "cut" / "progress.jsonl", "a") as fh:
        fh.write('{"question": {"question_id": "q3", "que')
    gen = ScriptedGenerator()
    res = run_influence(cfg, tmp_path / "cut", generator=gen, resume=True, progress=False)
    assert res.n_resumed == 2 and gen.batches == [4, 4]  # only q3 and q4 were redone
    for name in ("questions", "passages", "calls"):
        assert _stable(read(res.out, name)) == _stable(read(full.out, name))
    assert len((tmp_path / "cut" / "progress.jsonl").read_text().splitlines()) == 4


def test_resume_guards(dataset, tmp_path):
    run_influence(config(dataset), tmp_path / "r", generator=ScriptedGenerator(), progress=False)
    with pytest.raises(InputError, match="already holds a run; pass --resume"):
        run_influence(config(dataset), tmp_path / "r", generator=ScriptedGenerator(), progress=False)
    with pytest.raises(InputError, match="--resume: the config differs.*retrieval.top_k 10 there, 2 now"):
        run_influence(config(dataset, "retrieval.top_k=2"), tmp_path / "r",
                      generator=ScriptedGenerator(), resume=True, progress=False)


def test_resume_by_a_ragray_with_added_settings_names_them(dataset, tmp_path, caplog):
    """A run directory saved before a setting existed (its config.yaml lacks the key) resumes, with a
    warning and a file naming each added setting and the value the new questions take."""
    import yaml

    cfg = config(dataset, "influence.mode=loo")
    run_influence(cfg, tmp_path / "r", generator=ScriptedGenerator(), progress=False)
    # an untouched resume says nothing
    run_influence(cfg, tmp_path / "r", generator=ScriptedGenerator(), resume=True, progress=False)
    assert not (tmp_path / "r" / "settings_added_on_resume.json").exists()
    assert "settings existed" not in caplog.text
    saved = tmp_path / "r" / "config.yaml"
    data = yaml.safe_load(saved.read_text())
    del data["influence"]["surrogate_fit"], data["cache"]
    saved.write_text(yaml.safe_dump(data))
    with caplog.at_level("WARNING", logger="ragray.pipeline.questions"):
        res = run_influence(cfg, tmp_path / "r", generator=ScriptedGenerator(), resume=True, progress=False)
    assert res.n_resumed == 4
    added = json.loads((tmp_path / "r" / "settings_added_on_resume.json").read_text())
    assert added["influence.surrogate_fit"] == cfg.influence.surrogate_fit
    assert added["cache"] == cfg.model_dump(mode="json")["cache"]  # a whole section added: named once
    assert len(added) == 2
    assert "was started before these settings existed: influence.surrogate_fit=" in caplog.text


def test_cli_run_prints_summary(dataset, tmp_path, capsys):
    code = main(["run", "--dataset", str(dataset), "--backend", "scripted", "--out", str(tmp_path / "c"),
                 "--no-progress"])
    out = capsys.readouterr().out
    assert code == 0
    lines = out.splitlines()
    assert lines[1].startswith("#  question") and "passages the answer used" in lines[1]
    assert re.match(r"1\s+Which ferry sails to Kell\?\s+yes\s+q1-p0 \(1\.00, #1 gold\)\s+\|\s+aligned$", lines[2])
    assert re.search(r"^2 .*q2-p3 \(1\.00, #4( gold)?\)\s+\|\s+MISALIGNED", lines[3])
    # either copy of the mill's answer suffices: drop-one sees neither, the keep-alone contexts see both
    assert re.search(r"^4 .*q4-p0 or q4-p1 \(either suffices; 1\.00, #1( gold)? #2( gold)?\)\s+\|\s+aligned$", lines[5])
    # q3's model says "unknown": a decline, though the set has a gold answer; the legend says what that mark means
    assert re.search(r"^3 .*\bno, declined\b", lines[4]) and lines[6].startswith("(correct: yes / no")
    assert lines[7] == "" and lines[8].startswith("misaligned: 1 of 3 questions (33%, 95% CI")  # one headline after the table
    assert lines[9].startswith("answered correctly: 1 of 4 answerable (the answer contains a gold answer")
    assert "validity against gold passages: " in out and "(free control)" in out
    assert re.search(r"Spearman rule \(original, rho < 0.7\)\s+divergent rate", out)
    assert out.index("misaligned: ") < out.index("Spearman rule")  # the tie-robust verdict leads
    assert re.search(r"influence measured by\s+keep-alone \+ drop-one with interactions \(auto: the backend scores log-probabilities\)", out)
    assert "position control" in out and "influence may follow the slot" in out
    assert "{'" not in out  # no raw dicts
    assert f"report: {tmp_path / 'c' / 'report.html'}" in out and "next: open" in out
    assert (tmp_path / "c" / "questions.csv").read_text().count("\n") == 5
    assert main(["run", "--resume", "--dataset", str(dataset)]) == 2
    assert "--resume needs --out" in capsys.readouterr().err


def test_logprob_mode_generates_only_the_baseline(dataset, tmp_path):
    gen = ScriptedGenerator()
    res = run_influence(config(dataset, "influence.mode=logprob_share"), tmp_path / "lp", generator=gen, progress=False)
    assert gen.batches == [1, 1, 1, 1]  # one generated answer per question, the rest scored
    ps = {p["passage_id"]: p["influence"] for p in read(res.out, "passages")}
    # the scripted model gives the baseline answer log-prob 0 when the prompt supports it, else -10
    assert ps["q1-p0"] == pytest.approx(1 - math.exp(-10)) and ps["q1-p1"] == 0.0
    assert ps["q4-p0"] == 0.0  # redundant evidence: the other copy still supports the answer
    calls = [c for c in read(res.out, "calls") if c["question_id"] == "q1"]
    assert len(calls) == 5 and calls[0]["answer"] == "tern" and all(c["answer"] is None for c in calls[1:])
    q1 = next(q for q in read(res.out, "questions") if q["question_id"] == "q1")
    assert q1["n_calls"] == 5 and q1["state"] in ("measured", "constant_influence", "too_few_passages")


class CannotScore(ScriptedGenerator):
    """A chat-only endpoint: generates, but has no prompt log-probabilities."""

    def scoring_problem(self):
        return "no /completions with echo here"

    def logprobs(self, prompts, answers):
        raise BackendError("no /completions with echo here")


def test_auto_mode_scores_where_the_backend_can(dataset, tmp_path):
    gen = ScriptedGenerator()
    res = run_influence(config(dataset), tmp_path / "auto", generator=gen, progress=False)
    assert gen.batches == [1, 1, 1, 1]  # the default scores log-probs: only baselines are generated
    qs = read(res.out, "questions")
    assert {q["influence_mode"] for q in qs} == {"interactions"} and {q["influence_mode_note"] for q in qs} == {None}
    s = res.summary
    assert (s.influence_mode, s.influence_mode_requested, s.influence_mode_note) == ("interactions", "auto", None)
    assert s.validity["subsets"]["all"]["measures"]["influence"]["label"] == "keep-alone + drop-one with interactions"


def test_auto_mode_generates_where_the_backend_cannot_score_and_says_why(dataset, tmp_path):
    gen = CannotScore()
    res = run_influence(config(dataset), tmp_path / "auto", generator=gen, progress=False)
    assert gen.batches == [5, 5, 4, 4]  # every arm generated, nothing scored
    qs = {q["question_id"]: q for q in read(res.out, "questions")}
    assert {q["influence_mode"] for q in qs.values()} == {"loo"} and qs["q1"]["error"] is None
    assert qs["q1"]["influence_mode_note"] == "auto chose loo (regenerated answers): no /completions with echo here"
    infl = {p["passage_id"]: p["influence"] for p in read(res.out, "passages")}
    assert infl["q1-p0"] == 1.0 and infl["q1-p1"] == 0.0
    s = res.summary
    assert (s.influence_mode, s.influence_mode_requested) == ("loo", "auto")
    assert s.influence_mode_note == "auto chose loo (regenerated answers): no /completions with echo here"
    assert s.validity["subsets"]["all"]["measures"]["influence"]["label"] == "drop-one rouge_l"
    report = (res.out / "report.html").read_text()
    assert 'data-key="influence_mode" data-value="&quot;loo&quot;"' in report
    assert "auto chose loo (regenerated answers): no /completions with echo here" in report


def test_an_explicit_mode_is_never_probed(dataset, tmp_path):
    gen = CannotScore()
    res = run_influence(config(dataset, "influence.mode=loo"), tmp_path / "g", generator=gen, progress=False)
    assert res.summary.influence_mode == "loo" and res.summary.influence_mode_note is None
    bad = run_influence(config(dataset, "influence.mode=logprob_share"), tmp_path / "l", generator=CannotScore(),
                        progress=False)
    assert bad.summary.errors == 4  # asked for log-prob on a backend that cannot: every question says so
    assert all("no /completions" in e["error"] for e in bad.summary.error_questions)


def test_a_resumed_run_whose_backend_changed_reports_mixed_modes(dataset, tmp_path):
    with pytest.raises(KeyboardInterrupt):
        run_influence(config(dataset), tmp_path / "r", generator=Exploding(2, KeyboardInterrupt()), progress=False)
    res = run_influence(config(dataset), tmp_path / "r", generator=CannotScore(), resume=True, progress=False)
    s = res.summary
    assert s.influence_mode == "mixed" and s.influence_mode_counts == {"interactions": 2, "loo": 2}
    label, note = describe_mode(s)
    assert label == "drop-one (mixed)"
    assert note == "2 questions interactions, 2 questions loo; auto chose loo (regenerated answers): no /completions with echo here"


class InBf16(ScriptedGenerator):
    @property
    def precision(self):
        return "bfloat16"


def test_the_run_records_the_precision_and_warns_on_bf16_log_probs(dataset, tmp_path):
    """bf16 log-probabilities move influences and verdicts against fp32 (benchmarks/bench_dtype.py):
    the run says which dtype it measured in, and warns beside the influence mode in bf16."""
    res = run_influence(config(dataset), tmp_path / "b", generator=InBf16(), progress=False)
    s = res.summary
    assert s.precision == "bfloat16" and {r.question.dtype for r in res.records} == {"bfloat16"}
    label, note = describe_mode(s)
    assert label == "keep-alone + drop-one with interactions, bfloat16"
    assert note.startswith("bfloat16: a verdict can come from rounding") and "generation.dtype=float32" in note
    plain = run_influence(config(dataset), tmp_path / "s", generator=ScriptedGenerator(), progress=False)
    assert plain.summary.precision is None  # a backend that does not know its dtype says nothing
    assert describe_mode(replace(plain.summary, precision="float32")) == (
        "keep-alone + drop-one with interactions, float32", "auto: the backend scores log-probabilities")
    generate = describe_mode(replace(s, influence_mode="loo", influence_mode_requested="loo"))
    assert generate == ("drop-one rouge_l, bfloat16", None)  # the warning is about log-probabilities


def test_resuming_a_finished_run_loads_no_model(dataset, tmp_path, monkeypatch):
    first = run_influence(config(dataset), tmp_path / "r", progress=False)
    import ragray.pipeline.executors as executors

    monkeypatch.setattr(executors, "open_generator", lambda _: pytest.fail("a model was loaded for no question"))
    again = run_influence(config(dataset), tmp_path / "r", resume=True, progress=False)
    assert again.n_resumed == len(first.records) == 4
    assert [r.question for r in again.records] == [r.question for r in first.records]


def test_question_rows_carry_the_retrieval_ranking_metrics(dataset, tmp_path):
    """q1's gold passage is retrieved (hit 1, recall 1, its reciprocal rank); q2 has no gold ids:
    every ranking metric is null, never 0."""
    res = run_influence(config(dataset, "retrieval.top_k=3"), tmp_path / "k", progress=False)
    q1, q2 = res.records[0], res.records[1]
    rank = next(p.retrieval_rank for p in q1.passages if p.passage_id == "q1-p0")
    assert q1.question.retrieval_k == 3 and q1.question.hit_at_k == 1.0 and q1.question.recall_at_k == 1.0
    assert q1.question.mrr == 1.0 / rank
    assert (q2.question.hit_at_k, q2.question.recall_at_k, q2.question.mrr, q2.question.ndcg_at_10) == (None,) * 4


def test_question_rows_count_what_the_ablations_cost(dataset, tmp_path):
    """Log-prob: k + 1 arms asked for, only the baseline generated, every arm scored once;
    interactions (the default): the same arms, and the empty context and each passage alone scored
    once more each (2(k + 1) contexts); loo: every arm generated."""
    lp = run_influence(config(dataset, "influence.mode=logprob_share", "influence.closed_book=false"), tmp_path / "lp",
                       progress=False).records[0].question
    assert (lp.calls_requested, lp.calls_generated, lp.score_passes, lp.n_calls) == (5, 1, 5, 5)
    both = run_influence(config(dataset), tmp_path / "i", progress=False).records[0].question
    assert (both.calls_requested, both.calls_generated, both.score_passes, both.n_calls) == (5, 1, 10, 10)
    gen = run_influence(config(dataset, "influence.mode=loo"), tmp_path / "g", progress=False).records[0].question
    assert (gen.calls_requested, gen.calls_generated, gen.score_passes) == (5, 5, 0)


def test_unanswerable_questions_are_judged_by_declining_and_kept_apart_from_the_verdict(tmp_path):
    """A question without a gold answer in a labelled set is unanswerable: the prompt says how to
    decline, declining is right, a made-up answer is 'answered anyway' with what it leaned on
    shown, and neither gets an alignment verdict."""
    rows = [
        record("a", "Which ferry sails to Kell?", ["The ferry to Kell is the Tern ANSWER=tern", "Kell has a lighthouse."],
               gold=["a-p0"]),
        # nothing answers it: the scripted model says "unknown" (a decline)
        {**record("u1", "Who designed the Palm Vault?", ["Gardens grow.", "Glass houses."]), "answers": []},
        # a passage invites an answer the set says is not there: answered anyway
        # (the retriever ranks a passage the answer does not use first: use and order disagree)
        {**record("u2", "How much is a jar of honey?", ["Honey is sold ANSWER=cheap", "Bees buzz.",
                                                          "How much is a jar? A jar of honey is much honey."]),
         "answers": []},
        # answerable, but the model declines: wrong, and said so
        record("b", "Who keeps the light?", ["Keepers keep.", "Lights shine."]),
    ]
    path = tmp_path / "qa.jsonl"
    path.write_text("".join(json.dumps(r) + "\n" for r in rows), encoding="utf-8")
    gen = ScriptedGenerator()
    res = run_influence(config(path), tmp_path / "r", generator=gen, progress=False)
    qs = {q["question_id"]: q for q in read(res.out, "questions")}
    assert 'reply only: "The passages do not say."' in gen.calls[0][0].content
    assert [qs[i]["answerable"] for i in ("a", "u1", "u2")] == [True, False, False]
    assert [qs[i]["declined"] for i in ("a", "u1", "u2")] == [False, True, False]
    assert [qs[i]["answer_correct"] for i in ("a", "u1", "u2")] == [True, True, False]
    assert qs["a"]["misaligned"] is not None and qs["u1"]["misaligned"] is None and qs["u2"]["misaligned"] is None
    assert qs["u2"]["decline_margin"] is not None and qs["a"]["decline_margin"] is None
    used = {p["passage_id"] for p in read(res.out, "passages") if p["used"]}
    assert "u2-p0" in used  # what the made-up answer leaned on
    assert res.summary.alignment.n_scored <= 2 and qs["u1"]["misaligned"] is None  # unanswerable: no verdict
    # nor a misaligned flag, though what the made-up answer leaned on ranks below an unused passage
    u2_used = {p["retrieval_rank"] for p in read(res.out, "passages") if p["question_id"] == "u2" and p["used"]}
    assert min(u2_used) > 1 and qs["u2"]["usage_ndcg"] < 0.8 and "misaligned" not in qs["u2"]["flags"]
    assert res.summary.flag_counts["misaligned"] == sum(bool(q["misaligned"]) for q in qs.values())
    from ragray.report.run_console import correct_line, correct_words, verdict_words
    assert [correct_words(qs[i]) for i in ("a", "u1", "u2", "b")] == ["yes", "declined", "answered anyway", "no, declined"]
    assert correct_line(list(qs.values())).startswith(
        "answered correctly: 1 of 2 answerable (the answer contains a gold answer; 1 declined); declined 1 of 2 unanswerable")
    assert verdict_words(qs["u2"]).startswith("unanswerable: the answer is made up")


def test_a_question_scores_every_context_in_one_backend_call(tmp_path):
    """Drop-one arms, the kept-alone design, the closed book and the decline phrase go to the
    backend in ONE log-prob call per question (each further call is one more engine round: on a
    GPU a pass and a host wait more for every question in flight)."""

    class Counting(ScriptedGenerator):
        def __init__(self):
            super().__init__()
            self.score_batches = []

        def logprobs(self, prompts, answers):
            self.score_batches.append(sorted(set(answers)))
            return super().logprobs(prompts, answers)

    rows = [record("a", "Which ferry sails to Kell?", ["The ferry to Kell is the Tern ANSWER=tern", "Kell has a lighthouse.",
                                                        "Ferries sail daily."], gold=["a-p0"]),
            {**record("u", "How much is a jar of honey?", ["Honey is sold ANSWER=cheap", "Bees buzz."]), "answers": []}]
    path = tmp_path / "qa.jsonl"
    path.write_text("".join(json.dumps(r) + "\n" for r in rows), encoding="utf-8")
    gen = Counting()
    # defaults (interactions), one question at a time (in flight, calls of several questions merge)
    res = run_influence(config(path, "execution.max_questions_in_flight=1"), tmp_path / "r", generator=gen,
                        progress=False)
    from ragray.generation.prompts import DECLINE_PHRASE

    assert gen.score_batches == [["tern"], sorted(["cheap", DECLINE_PHRASE])]  # one call per question
    subsets = read(res.out, "subsets")
    assert {s["purpose"] for s in subsets if s["question_id"] == "a"} >= {"closed_book", "design"}
    assert next(q for q in read(res.out, "questions") if q["question_id"] == "u")["decline_margin"] is not None
    gen = Counting()  # log-prob mode: drop-one arms and the closed book (no design) in one call too
    res = run_influence(config(path, "execution.max_questions_in_flight=1", "influence.mode=logprob_share"),
                        tmp_path / "lp", generator=gen, progress=False)
    assert len(gen.score_batches) == 2 and {s["purpose"] for s in read(res.out, "subsets")} == {"closed_book"}
