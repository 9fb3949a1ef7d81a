"""`ragray interpret` with the scripted generator: answers depend on known units, so the cases,
importances, controls and costs are known in advance."""

import json
import math
import re

import pyarrow.parquet as pq
import pytest

from ragray.adapters.cli import main
from ragray.pipeline import run_interpret
from ragray.config import load_config
from ragray.errors import ConfigError
from ragray.generation.scripted import ScriptedGenerator
from tests.architecture.summaries import check_summary_file

FILLER = [
    "Kell has a lighthouse built of grey stone.", "Ferries sail daily from the harbour.",
    "Tickets cost five crowns at the pier.", "The museum opens in April.", "Sheep graze on the cliffs.",
    "Fog is common in November.", "The school has forty pupils.", "A bakery sells oat bread.",
    "The church bell was cast in 1802.", "Puffins nest on the north stacks.",
]
FAST = [  # cheap measures: no encoder model in orchestration tests
    "faithfulness.similarity=rouge_l", "faithfulness.measures=[rouge_l,exact_match,token_jaccard,edit,bleu]",
    "faithfulness.attributions=[loo,logprob_drop,surrogate]", "generation.backend=scripted",
]


def record(qid, question, replace):
    texts = list(FILLER)
    for i, t in replace.items():
        texts[i] = t
    return {"id": qid, "question": question, "answers": ["x"],
            "passages": [{"id": f"{qid}-p{i}", "title": "", "text": t} for i, t in enumerate(texts)]}


ROWS = [
    # the answer needs passage 3: a faithful explanation must find it (Case A)
    record("used", "Which ferry sails to Kell?", {3: "The ferry to Kell is the Tern. ANSWER=tern It sails at noon."}),
    # no passage matters: the model ignores the context (Case B)
    record("ignored", "Who founded the garden?", {}),
    # near-duplicate evidence: without passage 1, passage 6 gives almost the same answer (Case C)
    record("dup", "What lives on the skerry?", {
        1: 'Seals haul out here. ANSWER="the grey seal colony on kell"',
        6: 'Many seals. ANSWER="the grey seal colony on kell island"'}),
]


@pytest.fixture()
def dataset(tmp_path):
    path = tmp_path / "qa.jsonl"
    path.write_text("".join(json.dumps(r) + "\n" for r in ROWS), encoding="utf-8")
    return path


def cfg(dataset, *extra):
    return load_config(None, [f"data.path={dataset}", *FAST, *extra])


def read(out, name):
    return pq.read_table(out / f"{name}.parquet").to_pylist()


def cases_of(out):
    return {(c["question_id"], c["k_label"]): c for c in read(out, "cases")}


def test_used_ignored_and_duplicated_evidence_give_cases_a_b_c(dataset, tmp_path):
    res = run_interpret(cfg(dataset), tmp_path / "o", progress=False, generator=ScriptedGenerator())
    cases = cases_of(res.out)
    for k in ("top-1", "top-3", "top-20%"):
        assert cases[("used", k)]["case"] == "A", cases[("used", k)]["reason"]
        assert cases[("ignored", k)]["case"] == "B"
    assert cases[("dup", "top-1")]["case"] == "C"
    # LOO cannot see that p1 and p6 back each other up: at K=3 it removes p1 and two unused
    # passages, while a third of the random draws remove both copies
    assert cases[("dup", "top-3")]["case"] == "inconclusive"
    used = {u["unit_id"]: u for u in read(res.out, "units") if u["question_id"] == "used"}
    assert used["used-p3"]["importance"] == 1.0 and used["used-p3"]["rank"] == 1
    assert used["used-p3"]["bucket"] == "most"
    assert all(u["importance"] == 0.0 for uid, u in used.items() if uid != "used-p3")
    # all three attributions find the used passage
    assert {used["used-p3"][f"importance_{m}"] for m in ("loo", "logprob_drop", "surrogate")} == {1.0}
    qs = {q["question_id"]: q for q in read(res.out, "questions")}
    assert qs["used"]["rho_loo_surrogate"] == pytest.approx(1.0) and qs["used"]["top1_loo_logprob_drop"] == 1.0
    assert qs["used"]["closed_book_answer"] == "unknown" and qs["used"]["parametric"] is False
    assert qs["ignored"]["parametric"] is True and qs["ignored"]["top_passage_id"] is None
    assert qs["dup"]["top_passage_id"] == "dup-p1"
    assert qs["used"]["auc_most"] < 0.1 and qs["used"]["auc_least"] > 0.9
    s = check_summary_file(res.summary, res.out / "summary.json")
    top1 = s["per_k"]["top-1"]
    assert {c: v["count"] for c, v in top1["cases"].items()} == {"A": 1, "B": 1, "C": 1, "inconclusive": 0}
    assert top1["cases"]["A"]["share"] == pytest.approx(1 / 3)
    assert 0 <= top1["cases"]["A"]["low"] < 1 / 3 < top1["cases"]["A"]["high"] <= 1


def test_surrogate_explainer_sees_redundant_evidence(dataset, tmp_path):
    res = run_interpret(cfg(dataset, "faithfulness.explainer=surrogate"), tmp_path / "o", progress=False,
                        generator=ScriptedGenerator())
    dup = {u["unit_id"]: u for u in read(res.out, "units") if u["question_id"] == "dup"}
    ranked = sorted(dup.values(), key=lambda u: u["rank"])
    assert {ranked[0]["unit_id"], ranked[1]["unit_id"]} == {"dup-p1", "dup-p6"}
    assert cases_of(res.out)[("dup", "top-3")]["case"] == "A"  # removing both copies breaks the answer


def test_arms_calls_and_cost(dataset, tmp_path):
    config = cfg(dataset, "faithfulness.k_values=[top-1,top-3]", "faithfulness.random_repeats=20")
    gen = ScriptedGenerator()
    res = run_interpret(config, tmp_path / "o", progress=False, generator=gen)
    arms = [a for a in read(res.out, "arms") if a["question_id"] == "used"]
    by = {}
    for a in arms:
        by.setdefault((a["arm"], a["k_label"]), []).append(a)
    assert len(by[("LOO", None)]) == 10 and len(by[("DEL_RANDOM", "top-1")]) == 10  # exhaustive
    assert len(by[("DEL_RANDOM", "top-3")]) == 20
    assert len({tuple(a["removed_unit_ids"]) for a in by[("DEL_RANDOM", "top-3")]}) == 20
    assert by[("DEL_MOST", "top-1")][0]["removed_unit_ids"] == ["used-p3"]
    assert "used-p3" not in by[("DEL_LEAST", "top-3")][0]["removed_unit_ids"]
    assert by[("DEL_Q", None)][0]["similarity"] == 1.0  # the scripted model ignores the question
    assert set(by) >= {("DEL_NONE", None), ("CLOSED_BOOK", None), ("MOVE_MIDDLE", None), ("MOVE_END", None)}
    for a in arms:
        assert a["changed"] == (a["similarity"] < 0.85)
        assert set(a) >= {"sim_rouge_l", "sim_bleu", "sim_edit", "sim_exact_match", "sim_token_jaccard"}
    q = next(q for q in read(res.out, "questions") if q["question_id"] == "used")
    assert q["calls_requested"] == len(arms)
    # repeated prompts are generated once: random 1-subsets and DEL_MOST/LEAST@1 are LOO calls
    assert q["calls_generated"] < q["calls_requested"]
    assert sum(gen.batches) == sum(x["calls_generated"] for x in read(res.out, "questions"))
    assert len(gen.batches) == 3 * 2  # one generate call per phase per question
    assert q["score_passes"] == 11  # log-prob: baseline + 10 leave-one-out contexts


def test_hierarchical_sentence_and_token_levels_cost_less_and_find_the_unit(tmp_path):
    rows = [record("h", "Which ferry?", {
        i: f"{FILLER[i]} It is {i} miles away. Boats call here." for i in range(10)})]
    rows[0]["passages"][4]["text"] = "Ships come. The ferry is the Tern ANSWER=tern today. Boats call here."
    path = tmp_path / "h.jsonl"
    path.write_text(json.dumps(rows[0]) + "\n", encoding="utf-8")
    flat = run_interpret(cfg(path, "faithfulness.level=sentence", "faithfulness.k_values=[top-1]"),
                         tmp_path / "flat", progress=False, generator=ScriptedGenerator())
    hier = run_interpret(cfg(path, "faithfulness.level=sentence", "faithfulness.hierarchical=true",
                             "faithfulness.k_values=[top-1]"),
                         tmp_path / "hier", progress=False, generator=ScriptedGenerator())
    qf, qh = read(flat.out, "questions")[0], read(hier.out, "questions")[0]
    assert qf["n_units_flat"] == qh["n_units_flat"] == 30 and qf["explainer_calls"] == 30
    assert qh["explainer_calls"] == 10 + 6  # 10 passages, then the sentences of the top 2
    assert qh["closed_book_answer"] == "unknown" and qh["del_q_sim"] == 1.0  # controls come along
    assert {a["arm"] for a in read(hier.out, "arms")} >= {"DEL_NONE", "CLOSED_BOOK", "DEL_Q", "LOO"}
    assert hier.summary.cost.hierarchical_saving == pytest.approx(1 - 16 / 30)
    for res in (flat, hier):
        top = min((u for u in read(res.out, "units") if u["level"] == "sentence"), key=lambda u: u["rank"])
        assert top["unit_id"] == "h-p4#s1" and cases_of(res.out)[("h", "top-1")]["case"] == "A"
    tok = run_interpret(cfg(path, "faithfulness.level=token", "faithfulness.hierarchical=true",
                            "faithfulness.hierarchical_top=1", "faithfulness.k_values=[top-1]"),
                        tmp_path / "tok", progress=False, generator=ScriptedGenerator())
    units = read(tok.out, "units")
    assert next(u["level"] for u in units if u["stage"] == 2) == "token"
    top = min((u for u in units if u["stage"] == 2), key=lambda u: u["rank"])
    assert top["text"] == "ANSWER=tern" and top["unit_id"] == "h-p4#s1.t5"
    assert read(tok.out, "questions")[0]["explainer_calls"] == 10 + 3 + 7


def test_same_seed_same_results_and_resume(dataset, tmp_path):
    config = cfg(dataset, "faithfulness.random_repeats=10")
    a = run_interpret(config, tmp_path / "a", progress=False, generator=ScriptedGenerator())
    b = run_interpret(config, tmp_path / "b", progress=False, generator=ScriptedGenerator())

    class Crash(ScriptedGenerator):
        def generate(self, prompts):
            if any("grey seal" in p[-1].content for p in prompts):
                raise RuntimeError("killed")
            return super().generate(prompts)

    with pytest.raises(RuntimeError):
        run_interpret(config, tmp_path / "c", progress=False, generator=Crash())
    assert len((tmp_path / "c" / "progress.jsonl").read_text().splitlines()) == 2
    c = run_interpret(config, tmp_path / "c", resume=True, progress=False, generator=ScriptedGenerator())
    assert c.n_resumed == 2

    def stable(rows):
        return [{k: v for k, v in r.items() if k not in ("seconds", "latency_s")} for r in rows]

    for name in ("questions", "units", "arms", "cases", "curves"):
        assert stable(read(a.out, name)) == stable(read(b.out, name)) == stable(read(c.out, name))
    other = run_interpret(cfg(dataset, "faithfulness.random_repeats=10", "seed=1"), tmp_path / "d",
                          progress=False, generator=ScriptedGenerator())
    draws = lambda out: [a["removed_unit_ids"] for a in read(out, "arms") if a["arm"] == "DEL_RANDOM"]
    assert draws(other.out) != draws(a.out)


def test_failed_baseline_marks_only_that_question(dataset, tmp_path):
    res = run_interpret(cfg(dataset), tmp_path / "o", progress=False, generator=ScriptedGenerator(fail_on="Tern"))
    qs = {q["question_id"]: q for q in read(res.out, "questions")}
    assert "baseline call failed" in qs["used"]["error"] and qs["ignored"]["error"] is None
    assert res.summary.n_failed == 1 and res.summary.per_k["top-1"]["n_questions"] == 2


def test_too_many_units_is_a_per_question_error(dataset, tmp_path):
    res = run_interpret(cfg(dataset, "faithfulness.level=token", "faithfulness.max_units=20"),
                        tmp_path / "o", progress=False, generator=ScriptedGenerator())
    errors = [q["error"] for q in read(res.out, "questions")]
    assert all("exceed faithfulness.max_units=20" in e and "hierarchical" in e for e in errors)


@pytest.mark.parametrize(
    ("override", "message"),
    [
        ("faithfulness.k_values=[top-0]", "must be top-1 or more"),
        ("faithfulness.k_values=[top3]", "'top3' is not top-N, top-P% or cumulative"),
        ("faithfulness.k_values=[top-101%]", "at most 100%"),
        ("faithfulness.explainer=surrogate", "must also be listed in attributions"),
        ("faithfulness.measures=[bleurt]", "unknown similarity 'bleurt'"),
        ("faithfulness.buckets.most=0.9", "most + least must be <= 1"),
        ("faithfulness.random_repeats=1", "faithfulness.random_repeats must be >= 2, got 1"),
        ("faithfulness.level=word", "faithfulness.level must be one of"),
    ],
)
def test_bad_faithfulness_config(override, message):
    extra = ["faithfulness.attributions=[loo]"] if "explainer" in override else []
    with pytest.raises(ConfigError, match=re.escape(message)):
        load_config(None, [*extra, override])


def test_cli_interpret_prints_cases_and_writes_tables(dataset, tmp_path, capsys):
    out = tmp_path / "cli"
    code = main(["interpret", "--dataset", str(dataset), "--backend", "scripted", "--level", "passage",
                 "--repeats", "8", "--k", "top-1", "--k", "top-3", "--out", str(out), "--no-progress",
                 *[a for kv in FAST[:3] for a in ("--set", kv)]])
    text = capsys.readouterr().out
    assert code == 0 and "ragray interpret: 3 questions" in text and "top-3" in text
    assert {"questions.parquet", "units.parquet", "arms.parquet", "cases.parquet", "curves.parquet",
            "summary.json", "config.yaml", "questions.csv"} <= {p.name for p in out.iterdir()}
    s = json.loads((out / "summary.json").read_text())
    assert list(s["per_k"]) == ["top-1", "top-3"] and s["random_repeats"] == 8
    assert main(["interpret", "--dataset", str(dataset), "--k", "best", "--out", str(tmp_path / "x")]) == 2
    assert "faithfulness.k_values" in capsys.readouterr().err


def test_logprob_mode_generates_only_the_baseline(dataset, tmp_path):
    gen = ScriptedGenerator()
    res = run_interpret(cfg(dataset, "faithfulness.mode=logprob", "faithfulness.k_values=[top-1,top-3]"),
                        tmp_path / "o", progress=False, generator=gen)
    qs = read(res.out, "questions")
    assert all(q["calls_generated"] == 1 and q["mode"] == "logprob" for q in qs)
    assert sum(gen.batches) == 3
    cases = cases_of(res.out)
    assert cases[("used", "top-1")]["case"] == cases[("used", "top-3")]["case"] == "A"
    assert cases[("ignored", "top-1")]["case"] == "B"
    arms = [a for a in read(res.out, "arms") if a["question_id"] == "used"]
    for a in arms:
        if a["arm"] != "DEL_NONE":
            assert a["answer"] is None and a["sim_rouge_l"] is None and a["logprob"] in (0.0, -10.0)
            # the share of the baseline answer's probability the arm keeps
            assert a["similarity"] == pytest.approx(math.exp(a["logprob"]))
    control = ("DEL_Q", "CLOSED_BOOK", "MOVE_MIDDLE", "MOVE_END")  # prompts unlike any deletion
    distinct = {a["arm"] if a["arm"] in control else tuple(a["removed_unit_ids"]) for a in arms}
    assert next(q for q in qs if q["question_id"] == "used")["score_passes"] == len(distinct)


def test_an_endpoint_that_cannot_score_only_loses_the_logprob_comparison(dataset, tmp_path):
    from ragray.errors import BackendError

    class NoScore(ScriptedGenerator):
        def logprobs(self, prompts, answers):
            raise BackendError("this endpoint cannot score")

    res = run_interpret(cfg(dataset), tmp_path / "o", progress=False, generator=NoScore())
    qs = read(res.out, "questions")
    assert all(q["error"] is None and q["rho_loo_logprob_drop"] is None for q in qs)
    assert cases_of(res.out)[("used", "top-1")]["case"] == "A"
    assert all(u["importance_logprob_drop"] is None for u in read(res.out, "units"))
    failed = run_interpret(cfg(dataset, "faithfulness.explainer=logprob_drop"), tmp_path / "p", progress=False,
                           generator=NoScore())
    assert all("cannot score" in q["error"] for q in read(failed.out, "questions"))
