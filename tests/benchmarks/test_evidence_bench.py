"""bench_evidence's plumbing with the scripted model: splits, resumable text-free exports, panels."""

import json

import pytest

from benchmarks import bench_evidence


def records(n):
    out = []
    for i in range(n):
        out.append({"id": f"q{i}", "question": f"Which ferry number {i}?", "answers": [f"tern{i}"],
                    "passages": [{"id": f"q{i}-p{j}", "title": "", "text": f"Ferry {j} ANSWER=tern{i}" if j == 0
                                  else f"Gulls {j} nest {i}."} for j in range(7)],
                    "gold_passage_ids": [f"q{i}-p0"]})
    return out


def test_a_tune_run_exports_no_dataset_text_and_resumes_from_the_export(tmp_path, monkeypatch):
    data = tmp_path / "set.jsonl"
    data.write_text("".join(json.dumps(r) + "\n" for r in records(160)), encoding="utf-8")
    monkeypatch.setitem(bench_evidence.SPLITS, "tune", (0, 3))
    args = ["--data", str(data), "--name", "toy", "--scope", "per_question", "--variants", "numbered_full",
            "--runs", str(tmp_path / "runs"), "--export", str(tmp_path / "export"), "--out", str(tmp_path / "r.json"),
            "--set", "generation.backend=scripted", "--set", "metrics.embedding=false"]
    assert bench_evidence.main(args) == 0
    exported = tmp_path / "export" / "tune" / "numbered_full" / "toy.jsonl"
    lines = [json.loads(x) for x in exported.read_text().splitlines()]
    assert len(lines) == 3 and all(x["question"]["question"] is None and x["question"]["gold_answers"] is None
                                   for x in lines)
    text = exported.read_text()
    assert "Which ferry" not in text and "Gulls" not in text  # no question or passage text
    result = json.loads((tmp_path / "r.json").read_text())
    panel = result["variants"]["numbered_full"]["sets"]["toy"]["panel"]
    # the one carrying passage is found, and its removal takes the whole answer
    t = panel["subsets"]["all"]["metrics"]["top1_drop"]
    assert t["measures"]["logprob_drop"]["mean"] == 10.0
    assert panel["subsets"]["answered"]["n_questions"] == 3  # gold answers restored from the data set
    # a fresh checkout (no run directory) resumes from the export: nothing is asked again
    fresh = [str(tmp_path / "runs2") if a == str(tmp_path / "runs") else a for a in args]
    again = bench_evidence.main(fresh)
    assert again == 0
    result = json.loads((tmp_path / "r.json").read_text())
    assert result["variants"]["numbered_full"]["sets"]["toy"]["resumed"] == 3


def test_exports_carry_no_answer_text_but_keep_whether_it_was_answered(tmp_path, monkeypatch):
    data = tmp_path / "set.jsonl"
    data.write_text("".join(json.dumps(r) + "\n" for r in records(5)), encoding="utf-8")
    monkeypatch.setitem(bench_evidence.SPLITS, "tune", (0, 2))
    bench_evidence.main(["--data", str(data), "--name", "toy", "--scope", "per_question", "--variants",
                         "numbered_full", "--runs", str(tmp_path / "runs"), "--export", str(tmp_path / "export"),
                         "--out", str(tmp_path / "r.json"), "--set", "generation.backend=scripted",
                         "--set", "metrics.embedding=false"])
    exported = (tmp_path / "export" / "tune" / "numbered_full" / "toy.jsonl").read_text()
    assert "tern" not in exported  # neither the gold answer nor the model's answer
    assert all(json.loads(x)["answered"] is True for x in exported.splitlines())


@pytest.fixture()
def boats(tmp_path):
    """A set past the tuning split (160 records) for the tracing benchmark: one answer passage each."""
    rows = [{"id": f"r{i}", "question": f"Which boat {i}?", "answers": [f"Boat{i}"],
             "passages": [{"id": f"r{i}-g", "title": f"T{i}", "text": f"The boat is ANSWER=Boat{i} today."}]
             + [{"id": f"r{i}-d{j}", "title": "", "text": f"Gulls {j} {i}."} for j in range(4)],
             "gold_passage_ids": [f"r{i}-g"]} for i in range(160)]
    data = tmp_path / "set.jsonl"
    data.write_text("".join(json.dumps(r) + "\n" for r in rows), encoding="utf-8")
    return data


def tracing_args(tmp_path, data, candidates: int) -> list[str]:
    """bench_tracing on ``data`` with the scripted model, 4 cases to score, everything under tmp_path."""
    return ["--data", str(data), "--name", "toy", "--candidates", str(candidates), "--usable", "4",
            "--runs", str(tmp_path / "runs"), "--export", str(tmp_path / "export"), "--out", str(tmp_path / "t.json"),
            "--set", "generation.backend=scripted", "--set", "metrics.embedding=false"]


def test_the_tracing_benchmark_keeps_the_answers_that_name_one_source(tmp_path, boats):
    from benchmarks import bench_tracing

    assert bench_tracing.main(tracing_args(tmp_path, boats, candidates=6)) == 0
    result = json.loads((tmp_path / "t.json").read_text())
    # the scripted model answers from the first marker shown: always exactly one candidate answer
    assert result["candidates"] == 6 and result["usable"] == 6 and result["usable_rate"] == 1.0
    panel = result["stage2"]["panel"]["subsets"]["all"]["metrics"]["recovery_at_1"]
    assert panel["n"] == 4 and panel["measures"]["logprob_drop"]["mean"] == 1.0
    assert "Boat" not in (tmp_path / "export" / "stage1.jsonl").read_text()


def test_tracing_stage_2_reads_the_truth_from_the_answer_it_ablates(tmp_path, boats):
    """A stage-1 label from another session (another CPU may decode another answer) is not the
    truth: stage 2 reads which source the answer it ablated took, and counts the changes."""
    from benchmarks import bench_tracing

    args = tracing_args(tmp_path, boats, candidates=6)
    assert bench_tracing.main([*args, "--stage", "1"]) == 0
    stage1 = tmp_path / "export" / "stage1.jsonl"
    truth = [json.loads(x) for x in stage1.read_text().splitlines()]
    flipped = [{**r, "taken": "copy" if r["taken"] == "original" else "original", "answer_sha": "elsewhere"}
               for r in truth]
    stage1.write_text("".join(json.dumps(r) + "\n" for r in flipped), encoding="utf-8")
    assert bench_tracing.main([*args, "--stage", "2"]) == 0
    stage2 = json.loads((tmp_path / "t.json").read_text())["stage2"]
    assert stage2["n"] == 4 and stage2["taken_changed"] == 4 and stage2["stage1_answer_reproduced"] == 0
    # scored against the answer's own source, every drop-one top passage is the taken one
    assert stage2["panel"]["subsets"]["all"]["metrics"]["recovery_at_1"]["measures"]["logprob_drop"]["mean"] == 1.0
    exported = [json.loads(x) for x in (tmp_path / "export" / "stage2.jsonl").read_text().splitlines()]
    assert sorted(r["taken"] for r in exported) == sorted(r["taken"] for r in truth[:4] if r["taken"])
    # --report rebuilds the same panel from the exports alone (no model, another session)
    assert bench_tracing.main([*args, "--report", "--runs", str(tmp_path / "elsewhere")]) == 0
    report = json.loads((tmp_path / "t.json").read_text())["stage2"]
    assert report["panel"] == stage2["panel"] and report["n"] == 4 and report["interim"] is False


def test_more_tracing_candidates_never_change_the_cases_already_built(boats, monkeypatch):
    """Cases are built in fixed blocks of records: a later session's larger --candidates adds
    cases, and the ones already answered (and exported by id) keep their passages."""
    from benchmarks import bench_tracing

    monkeypatch.setattr(bench_tracing, "BLOCK", 4)
    few, more = bench_tracing.cases_for("toy", boats, 6), bench_tracing.cases_for("toy", boats, None)
    assert len(few) == 6 and len(more) == 10
    assert [c.record for c in few] == [c.record for c in more[:6]]


def test_tracing_decodes_again_on_this_cpu_before_stage_2_and_fills_the_quota(tmp_path):
    """Stage-1 answers decoded on another CPU are decoded again here (recheck.jsonl) before a case
    costs a stage-2 run; a case no longer usable here is skipped and the next candidate takes its
    place until --usable cases are scored."""
    from benchmarks import bench_tracing

    # every third boat's answer comes from a marker that names neither candidate: usable nowhere
    rows = [{"id": f"r{i}", "question": f"Which boat {i}?", "answers": [f"Boat{i}"],
             "passages": [{"id": f"r{i}-g", "title": f"T{i}",
                           "text": f"The boat is Boat{i} today. ANSWER=Gulls" if i % 3 == 0 else
                           f"The boat is ANSWER=Boat{i} today."}]
             + [{"id": f"r{i}-d{j}", "title": "", "text": f"Gulls {j} {i}."} for j in range(4)],
             "gold_passage_ids": [f"r{i}-g"]} for i in range(160)]
    data = tmp_path / "set.jsonl"
    data.write_text("".join(json.dumps(r) + "\n" for r in rows), encoding="utf-8")
    args = tracing_args(tmp_path, data, candidates=9)
    assert bench_tracing.main([*args, "--stage", "1"]) == 0
    stage1 = tmp_path / "export" / "stage1.jsonl"
    here = [json.loads(x) for x in stage1.read_text().splitlines()]
    assert {r["cpu"] for r in here} == {bench_tracing.cpu_key()}
    assert 4 <= sum(1 for r in here if r["taken"]) < 9
    # as if another CPU had decoded them, and found every one usable
    elsewhere = [{**r, "cpu": "another CPU", "taken": "original"} for r in here]
    stage1.write_text("".join(json.dumps(r) + "\n" for r in elsewhere), encoding="utf-8")
    assert bench_tracing.main([*args, "--stage", "2"]) == 0
    stage2 = json.loads((tmp_path / "t.json").read_text())["stage2"]
    rechecked = [json.loads(x) for x in (tmp_path / "export" / "recheck.jsonl").read_text().splitlines()]
    assert stage2["n"] == 4 and stage2["n_run"] == 4 and stage2["no_longer_usable"] == 0
    assert stage2["skipped_on_recheck"] == sum(1 for r in rechecked if not r["taken"]) == 2
    assert len(rechecked) == 6 and {r["cpu"] for r in rechecked} == {bench_tracing.cpu_key()}
    assert "Boat" not in (tmp_path / "export" / "recheck.jsonl").read_text()
    # the quota is met: another session runs nothing more, and --report says it is not interim
    assert bench_tracing.main([*args, "--stage", "2"]) == 0
    assert len((tmp_path / "export" / "stage2.jsonl").read_text().splitlines()) == 4
    assert bench_tracing.main([*args, "--report"]) == 0
    assert json.loads((tmp_path / "t.json").read_text())["stage2"]["interim"] is False


@pytest.mark.slow  # over 2 s: outside the fast subset (README)
def test_the_test_split_runs_in_rounds_of_parts_and_reports_from_the_exports(tmp_path, monkeypatch):
    data = tmp_path / "set.jsonl"
    data.write_text("".join(json.dumps(r) + "\n" for r in records(8)), encoding="utf-8")
    monkeypatch.setitem(bench_evidence.SPLITS, "test", (2, 7))
    monkeypatch.setattr(bench_evidence, "PARTS", {"frozen": (0, 2, []),
                                                  "frozen_no_surrogate": (2, 5, ["influence.masks=0"])})
    common = ["--phase", "test", "--data", str(data), "--name", "toy", "--scope", "per_question",
              "--export", str(tmp_path / "export"), "--set", "generation.backend=scripted",
              "--set", "metrics.embedding=false"]
    assert bench_evidence.main([*common, "--chunk", "2", "--runs", str(tmp_path / "runs"),
                                "--out", str(tmp_path / "r.json")]) == 0
    result = json.loads((tmp_path / "r.json").read_text())
    assert result["frozen"]["generation.template"] == "short"  # the frozen settings ran
    # every export written after each round: 2 (part a), then 2 and 3 (part b)
    assert [s["questions_done"] for s in result["sessions"]] == [2, 2, 3]
    assert all(s["cpu"] and s["commit"] for s in result["sessions"])
    ids = {p: [json.loads(x)["question"]["question_id"]
               for x in (tmp_path / "export" / "test" / p / "toy.jsonl").read_text().splitlines()]
           for p in ("frozen", "frozen_no_surrogate")}
    assert ids == {"frozen": ["q2", "q3"], "frozen_no_surrogate": ["q4", "q5", "q6"]}
    with_surrogate = result["variants"]["frozen"]["sets"]["toy"]["panel"]["subsets"]["all"]["metrics"]["lds"]
    every = result["variants"]["frozen_all"]["sets"]["toy"]["panel"]["subsets"]["all"]["metrics"]["lds"]
    assert with_surrogate["n"] == 2 and "surrogate_weight" in with_surrogate["measures"]
    assert every["n"] == 5 and "surrogate_weight" not in every["measures"] and "logprob_drop" in every["measures"]
    # --report on a fresh checkout: no model, the same panels from the committed exports
    assert bench_evidence.main([*common, "--report", "--runs", str(tmp_path / "none"),
                                "--out", str(tmp_path / "again.json")]) == 0
    again = json.loads((tmp_path / "again.json").read_text())
    assert again["variants"] == result["variants"]
    assert not (tmp_path / "none").exists()
    assert again["progress"] == {"complete": True, "parts": {"frozen": {"toy": {"done": 2, "of": 2}},
                                                             "frozen_no_surrogate": {"toy": {"done": 3, "of": 3}}}}
    assert set(again["goals"]) == {"frozen", "frozen_all"}
    assert again["goals"]["frozen"]["faithfulness"]["all"]["met"] is None  # 2 questions: no verdict
    # publishing: the README block shows progress only until every part is complete, then the figures
    readme = tmp_path / "README.md"
    readme.write_text(f"# x\n{bench_evidence.README_BEGIN}\nSTALE-BLOCK\n{bench_evidence.README_END}\ntail\n")
    validity = tmp_path / "validity.json"
    partial = again | {"progress": {"complete": False, "parts": {"frozen": {"toy": {"done": 1, "of": 2}}}}}
    bench_evidence.publish(partial, readme, validity)
    block = readme.read_text()
    assert "1 of 2 questions run" in block and "| variant |" not in block and block.endswith("end -->\ntail\n")
    assert not validity.exists()
    bench_evidence.publish(again, readme, validity)
    block = readme.read_text()
    assert "Test split complete: 5 questions" in block and "| frozen_all | toy |" in block and "STALE-BLOCK" not in block
    assert block.count(bench_evidence.README_BEGIN) == 1
    gold = json.loads(validity.read_text())["gold"]
    assert gold["frozen_all"]["toy"]["all"]["auc"]["n"] == 5 and "pooled" in gold["frozen"]


def test_auto_mode_is_backed_by_the_committed_evidence():
    """The default follows the evidence: ``influence.mode: auto`` gives ``interactions``, whose
    printed influence ranks held-out subsets of the evidence benchmark's test split
    (``shared_evidence.json``) at least as well as drop-one (issue 65: the quantity users see, not
    the model's prediction) and better than ContextCite's Lasso at equal calls; among the measures
    that cost only the drop-one passes (``influence.mode: logprob_share`` and ``jsd``) the clipped
    log-prob share had the best pooled LDS on the frozen variant of the tuning split."""
    from benchmarks.machine import REPO
    from ragray.ablation.loop import resolve_mode
    from ragray.generation.scripted import ScriptedGenerator

    assert resolve_mode("auto", ScriptedGenerator())[0] == "interactions"
    lds = json.loads((REPO / "benchmarks" / "results" / "shared_evidence.json").read_text())["lds"]
    printed = lds["pooled"]["credit_w0.25_printed"]
    assert printed["mean"] >= lds["pooled"]["credit_w0"]["mean"] and lds["printed_minus_drop_one"]["ci95"][0] > 0
    assert printed["mean"] > lds["pooled"]["lasso_2k2"]["mean"]  # ContextCite's Lasso at 2(k + 1) calls
    pilot = json.loads((REPO / "benchmarks" / "results" / "evidence_pilot.json").read_text())
    frozen = bench_evidence._frozen(REPO / "configs" / "evidence_frozen.yaml")
    variant = next(v for v, sets in bench_evidence.VARIANTS.items()
                   if {f"{k}={v}" for k, v in frozen.items()
                       if k not in ("generation.dtype", "influence.surrogate_fit")} == set(sets))
    lds = pilot["variants"][variant]["pooled"]["subsets"]["all"]["metrics"]["lds"]["measures"]
    drop_one_passes_only = ("logprob_share", "jsd")  # the modes that cost the drop-one passes only
    assert max(drop_one_passes_only, key=lambda m: lds[m]["mean"]) == "logprob_share"
    assert lds["surrogate_weight"]["mean"] > lds["logprob_share"]["mean"]  # what the README says of it


def _metric(mean, beats, n=40, control_mean=0.5):
    """A panel metric table whose best measure ``logprob_drop`` has ``mean`` and beats (or not) two controls."""
    verdict = None if n < 10 else beats
    diff = {"mean": mean - control_mean, "low": (mean - control_mean) / 2 if beats else -0.1, "high": mean}
    return {"n": n, "best": "logprob_drop", "best_beats_every_control": verdict,
            "measures": {"logprob_drop": {"mean": mean, "low": mean - 0.05, "high": mean + 0.05, "control": False}},
            "vs_controls": {"logprob_drop": {c: {"difference": diff, "beats": beats}
                                             for c in ("answer_similarity", "question_similarity")}}}


def _variant(lds, top2, auc, n=40, pooled_lds=None):
    def panel(lds_t, top2_t):
        metrics = {"lds": lds_t, "top2_drop": top2_t, "auc": auc}
        return {"subsets": {s: {"metrics": metrics} for s in ("all", "answered_context_dependent")}}

    sets = {name: {"panel": panel(lds[i], top2[i])} for i, name in enumerate(("hotpotqa", "squad", "pubmedqa"))}
    return {"sets": sets, "pooled": panel(pooled_lds or _metric(0.9, True, 3 * n), None)}


def test_the_goals_are_met_only_when_every_set_beats_every_control_and_pooled_lds_reaches_the_bar():
    win = _metric(0.9, True)
    met = bench_evidence.goals(_variant([win] * 3, [win] * 3, _metric(0.8, True)))
    assert met["faithfulness"]["all"]["met"] is True
    assert met["gold_auc_primary_pooled"]["minus"]["question_similarity"]["mean"] == pytest.approx(0.3)
    one_loses = bench_evidence.goals(_variant([win, _metric(0.9, False), win], [win] * 3, _metric(0.8, True)))
    assert one_loses["faithfulness"]["all"]["met"] is False
    low = bench_evidence.goals(_variant([win] * 3, [win] * 3, _metric(0.8, True), pooled_lds=_metric(0.8, True, 120)))
    assert low["faithfulness"]["all"]["met"] is False  # beats every control, but LDS 0.80 < 0.85
    few = bench_evidence.goals(_variant([_metric(0.9, True, n=4)] * 3, [win] * 3, None))
    assert few["faithfulness"]["all"]["met"] is None  # a set under the verdict minimum: undecided, not a pass
    assert few["gold_auc_primary_pooled"]["state"] == "no questions"
    lines = "\n".join(bench_evidence.goal_lines(few))
    assert "UNDECIDED" in lines and "no verdict (too few questions)" in lines


def _additive_record(weights, n_masks=8, n_held=12):
    """An exported record whose answer's log-prob is exactly additive in the passages kept."""
    import itertools
    import random as rnd

    k = len(weights)
    ids = [f"p{i}" for i in range(k)]
    lp = lambda kept: sum(weights[i] for i in kept)  # noqa: E731
    every = [set(c) for r in range(k + 1) for c in itertools.combinations(range(k), r)]
    rnd.Random(0).shuffle(every)
    sub = lambda purpose, kept: {"purpose": purpose, "kept_passage_ids": [ids[i] for i in kept],  # noqa: E731
                                 "logprob": lp(kept)}
    full = set(range(k))
    return {"question": {"question_id": "q", "logprob_all": lp(full)},
            "passages": [{"passage_id": x, "retrieval_rank": i + 1, "logprob_drop": weights[i]} for i, x in enumerate(ids)],
            "subsets": [sub("surrogate", s) for s in every[:n_masks]] + [sub("heldout", s) for s in every[n_masks:n_masks + n_held]],
            "checks": [{"measure": "logprob_drop", "top_k": [1, 2]}]}


def test_the_secondary_surrogate_and_the_additive_ceiling_on_an_additive_answer():
    rec = _additive_record([8.0, 0.5, 4.0, 0.25, 1.0])  # every subset's sum distinct: no ties
    weights, row = bench_evidence.arms_check(rec)
    assert max(weights, key=weights.get) == "p0" and sorted(weights, key=weights.get)[-2] == "p2"
    assert row["lds"] == pytest.approx(1.0) and row["measure"] == bench_evidence.SECONDARY
    assert row["top_k_drop"][0] == pytest.approx(8.0)  # its top passage removed: a drop-one arm, always scored
    assert bench_evidence.additive_ceiling(rec) == pytest.approx(1.0)
    rec["subsets"] = [s for s in rec["subsets"] if s["purpose"] != "surrogate"]
    assert bench_evidence.arms_check(rec) is None  # no masks: no surrogate


@pytest.mark.slow  # over 2 s: outside the fast subset (README)
def test_parts_run_side_by_side_stop_between_rounds_and_match_one_sequential_run(tmp_path, monkeypatch):
    """The lent-GPU path: one process per part (``--parts``), ``--stop-after`` ending at a round's
    end with the export written, a resumed run skipping rounds already exported; the exports equal a
    single sequential run's, and ``compare_exports`` finds no difference between them."""
    data = tmp_path / "set.jsonl"
    data.write_text("".join(json.dumps(r) + "\n" for r in records(8)), encoding="utf-8")
    monkeypatch.setitem(bench_evidence.SPLITS, "test", (2, 7))
    monkeypatch.setattr(bench_evidence, "PARTS", {"frozen": (0, 2, []),
                                                  "frozen_no_surrogate": (2, 5, ["influence.masks=0"])})

    def run(name, *extra):
        return bench_evidence.main(["--phase", "test", "--data", str(data), "--name", "toy", "--scope", "per_question",
                                    "--export", str(tmp_path / name / "export"), "--runs", str(tmp_path / name / "runs"),
                                    "--set", "generation.backend=scripted", "--set", "metrics.embedding=false",
                                    "--chunk", "2", "--out", str(tmp_path / name / "r.json"), *extra])

    def sessions(name, part):
        log = tmp_path / name / "export" / "test" / part / "sessions.jsonl"
        return [json.loads(x)["questions_done"] for x in log.read_text().splitlines()] if log.is_file() else []

    assert run("split", "--parts", "frozen_no_surrogate", "--stop-after", "0", "--run-only") == 0  # past it: nothing
    assert sessions("split", "frozen_no_surrogate") == []
    assert run("split", "--parts", "frozen_no_surrogate", "--run-only") == 0
    assert sessions("split", "frozen_no_surrogate") == [2, 3] and sessions("split", "frozen") == []
    assert not (tmp_path / "split" / "r.json").exists()  # --run-only: no report
    assert run("split") == 0  # the rest: the frozen part; the other part's rounds are all exported
    assert sessions("split", "frozen") == [2] and sessions("split", "frozen_no_surrogate") == [2, 3]
    assert run("one") == 0
    for part in ("frozen", "frozen_no_surrogate"):
        diff = bench_evidence.compare_exports(tmp_path / "split" / "export" / "test" / part / "toy.jsonl",
                                              tmp_path / "one" / "export" / "test" / part / "toy.jsonl")
        assert diff["shared_questions"] == {"frozen": 2, "frozen_no_surrogate": 3}[part]
        assert diff["questions_differing_exactly"] == {}
        assert diff["max_abs_difference"] and max(diff["max_abs_difference"].values()) == 0.0
    split, one = (json.loads((tmp_path / n / "r.json").read_text()) for n in ("split", "one"))
    import csv

    rows = list(csv.DictReader((tmp_path / "one" / "r_table.csv").open()))  # the whole table beside the JSON
    lds = [r for r in rows if (r["variant"], r["set"], r["subset"], r["metric"]) == ("frozen", "toy", "all", "lds")]
    assert {r["measure"] for r in lds} >= {"logprob_drop", "surrogate_weight", "retrieval_rank", "random_control"}
    drop = next(r for r in lds if r["measure"] == "logprob_drop")
    assert drop["control"] == "False" and "minus_retrieval_rank" in drop and "beats_random_control" in drop
    assert next(r for r in lds if r["measure"] == "random_control")["control"] == "True"
    assert {r["set"] for r in rows} == {"toy", "pooled"}
    for v in ("frozen", "frozen_all"):  # the same panels (costs are timings: they differ by run)
        assert split["variants"][v]["pooled"] == one["variants"][v]["pooled"]
        assert split["variants"][v]["sets"]["toy"]["panel"] == one["variants"][v]["sets"]["toy"]["panel"]


def test_compare_exports_reports_each_fields_largest_difference_and_changed_answers(tmp_path):
    def rec(qid, lp, tokens, infl):
        return {"question": {"question_id": qid, "logprob_all": lp, "scored_tokens": tokens, "f1": 0.5},
                "passages": [{"passage_id": "p1", "influence": infl, "logprob_drop": 1.0}],
                "subsets": [{"purpose": "check", "kept_passage_ids": ["p1"], "logprob": lp}],
                "checks": [{"measure": "logprob_share", "control": False, "lds": 0.7}]}

    a, b = tmp_path / "a.jsonl", tmp_path / "b.jsonl"
    a.write_text(json.dumps(rec("q1", -10.0, 5, 0.2)) + "\n" + json.dumps(rec("q2", -3.0, 4, 0.1)) + "\n")
    b.write_text(json.dumps(rec("q1", -10.001, 5, 0.25)) + "\n" + json.dumps(rec("q3", -1.0, 4, 0.1)) + "\n"
                 + json.dumps(rec("q2", -3.0, 6, 0.1)) + "\n")
    diff = bench_evidence.compare_exports(a, b)
    assert diff["shared_questions"] == 2
    assert diff["max_abs_difference"]["question.logprob_all"] == pytest.approx(0.001)
    assert diff["max_abs_difference"]["subset.logprob"] == pytest.approx(0.001)
    assert diff["max_abs_difference"]["passage.influence"] == pytest.approx(0.05)
    assert diff["max_abs_difference"]["check.lds"] == 0.0
    assert diff["questions_differing_exactly"] == {"question.scored_tokens": 1}  # q2's answer changed length


def test_costs_are_reported_per_machine_from_the_session_log(tmp_path):
    """Seconds from a GPU and from a 2-core CPU are not one distribution: the export's questions are
    assigned to the machine whose session log entry first counted them."""
    exported = tmp_path / "frozen" / "toy.jsonl"
    exported.parent.mkdir()
    exported.write_text("".join(json.dumps({"question": {"question_id": f"q{i}"}}) + "\n" for i in range(5)))
    log = [{"set": "toy", "questions_done": 2, "cpu": "AMD EPYC", "cores": 2},
           {"set": "other", "questions_done": 9, "cpu": "AMD EPYC", "cores": 2},
           {"set": "toy", "questions_done": 2, "cpu": "Intel Xeon", "cores": 2},  # resumed, nothing new
           {"set": "toy", "questions_done": 4, "cpu": "Intel Xeon", "cores": 16, "accelerator": "NVIDIA H200"},
           {"set": "toy", "questions_done": 5, "cpu": "AMD EPYC", "cores": 2}]
    (exported.parent / "sessions.jsonl").write_text("".join(json.dumps(e) + "\n" for e in log))
    assert bench_evidence.machines(exported) == {"AMD EPYC (2 cores)": {"q0", "q1", "q4"},
                                                 "NVIDIA H200": {"q2", "q3"}}
    assert bench_evidence.machines(tmp_path / "none.jsonl") == {}


def test_a_best_measure_named_influence_says_which_mode_measured_it():
    """``influence`` alone does not say which measure won: the published name carries the mode."""
    result = {"measures": ["influence.mode=jsd", "influence.masks=24"]}
    mode = bench_evidence.influence_mode(result)
    assert mode == "jsd" and bench_evidence.influence_mode({"measures": []}) is None
    assert bench_evidence.measure_label("influence", mode) == "influence (jsd mode)"
    assert bench_evidence.measure_label("jsd", mode) == "jsd"
    assert bench_evidence.measure_label("influence", None) == "influence"
    cell = {"state": "measured", "n": 12, "measure": "influence", "mean": 0.6, "low": 0.5, "high": 0.7,
            "beats_every_control": False, "weakest_control": "retrieval_rank",
            "weakest_margin": {"mean": -0.2, "low": -0.3, "high": -0.1}}
    lines = bench_evidence.goal_lines({"faithfulness": {}, "gold_auc_primary_pooled": cell}, mode)
    assert lines[0] == ("gold AUC (reported, no bar), answered and context-dependent, pooled: influence (jsd mode) "
                        "0.60 [0.50, 0.70], n = 12, does not beat every control (weakest margin: retrieval_rank "
                        "-0.20 [-0.30, -0.10])")
