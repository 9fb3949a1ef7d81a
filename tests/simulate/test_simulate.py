"""Simulation mode: every scenario is flagged as designed, with exactly a real run's schema."""

import json

import numpy as np
import pyarrow.parquet as pq
import pytest

from ragray.adapters.cli import main
from ragray.config import load_config
from ragray.errors import InputError
from ragray.simulate import WIDTH, design, simulate
from ragray.rows.influence import CallRow, PassageRow, QuestionRow
from tests.architecture.summaries import check_summary_file

QUESTIONS_SCHEMA, PASSAGES_SCHEMA, CALLS_SCHEMA = (r.arrow_schema() for r in (QuestionRow, PassageRow, CallRow))

K = 10


def run(tmp_path, scenario, n=30, seed=3, overrides=()):
    out = tmp_path / scenario
    result = simulate(out, n_questions=n, k=K, scenario=scenario, seed=seed, base=load_config(None, list(overrides)),
                      progress=False)
    check_summary_file(result.summary, out / "summary.json")
    plan = json.loads((out / "simulation.json").read_text())
    questions = {q["question_id"]: q for q in pq.read_table(out / "questions.parquet").to_pylist()}
    passages = pq.read_table(out / "passages.parquet").to_pylist()
    return out, plan, questions, passages


def expected_flags(influence, cfg):
    """The flags a question of known influence must carry (SPEC §9), computed independently."""
    infl = np.asarray(influence)
    if np.all(infl == 0):
        return {"context_ignored"}
    from scipy.stats import rankdata, spearmanr

    flags = set()
    discount = 1 / np.log2(np.arange(2, len(infl) + 2))
    if infl.max() > cfg.epsilon and (infl @ discount) / (np.sort(infl)[::-1] @ discount) < cfg.misalignment_threshold:
        flags.add("misaligned")
    if np.all(infl == infl[0]):
        return flags
    rho = spearmanr(np.arange(1, len(infl) + 1), rankdata(-infl)).statistic
    if rho < cfg.divergence_threshold:
        flags.add("divergent")
    if rho < 0:
        flags.add("inverted")
    if infl[0] <= cfg.epsilon < infl.max():
        flags.add("top1_ignored")
    if infl.max() / infl.sum() >= cfg.dominance_threshold:
        flags.add("single_passage_dominance")
    if int(np.argmax(infl)) + 1 > cfg.buried_fraction * len(infl):
        flags.add("buried_evidence")
    return flags


def check_as_designed(plan, questions, passages, cfg):
    for qid, q in plan["questions"].items():
        measured = [p["influence"] for p in sorted((p for p in passages if p["question_id"] == qid),
                                                   key=lambda p: p["retrieval_rank"])]
        assert measured == pytest.approx(q["influence"], abs=1e-9), qid  # the loop measures the design
        flags = set(questions[qid]["flags"]) - {"position_driven"}  # needs the control order: tested apart
        assert flags == expected_flags(q["influence"], cfg), (qid, q["scenario"])


@pytest.mark.parametrize("scenario", ["aligned", "inverted", "random", "dominant", "ignored", "mixed"])
def test_each_scenario_is_measured_and_flagged_as_designed(tmp_path, scenario):
    out, plan, questions, passages = run(tmp_path, scenario)
    cfg = load_config(None).influence
    check_as_designed(plan, questions, passages, cfg)
    qs = list(questions.values())
    summary = json.loads((out / "summary.json").read_text())
    assert summary["simulated"]["scenario"] == scenario and summary["n_questions"] == 30
    if scenario == "aligned":
        assert all(q["spearman_rho"] > 0.95 and q["flags"] == [] for q in qs)
    elif scenario == "inverted":
        assert all(q["spearman_rho"] < -0.95 for q in qs)
        assert all({"divergent", "inverted", "buried_evidence"} <= set(q["flags"]) for q in qs)
        assert summary["divergent_rate"] == 1.0 and summary["flag_counts"]["inverted"] == 30
    elif scenario == "random":
        assert abs(summary["mean_spearman"]) < 0.3 and summary["divergent_rate"] >= 0.7
    elif scenario == "dominant":
        assert all("single_passage_dominance" in q["flags"] and q["dominance"] > 0.5 for q in qs)
        assert all("top1_ignored" not in q["flags"] for q in qs)
    elif scenario == "ignored":
        assert all(q["state"] == "context_ignored" and q["flags"] == ["context_ignored"] for q in qs)
        assert summary["n_measured"] == 0 and summary["mean_spearman"] is None
    else:
        mix = summary["simulated"]["questions_per_scenario"]
        assert sum(mix.values()) == 30 and len(mix) >= 4


def test_the_output_has_exactly_a_real_runs_schema_and_is_marked(tmp_path):
    out, _, _, _ = run(tmp_path, "mixed", n=5)
    for name, schema in (("questions", QUESTIONS_SCHEMA), ("passages", PASSAGES_SCHEMA), ("calls", CALLS_SCHEMA)):
        assert pq.read_schema(out / f"{name}.parquet").equals(schema, check_metadata=False), name
        assert (out / f"{name}.csv").is_file()
    config = load_config(out / "config.yaml")
    assert config.generation.backend == "simulated" and config.retrieval.retriever == "given"
    calls = pq.read_table(out / "calls.parquet").to_pylist()
    assert len(calls) == 5 * (1 + K) and {c["error"] for c in calls} == {None}


def test_log_prob_mode_measures_the_same_influence(tmp_path):
    _, plan, questions, passages = run(tmp_path, "random", n=6, overrides=["influence.mode=logprob_share"])
    check_as_designed(plan, questions, passages, load_config(None).influence)


def test_thresholds_come_from_the_config(tmp_path):
    _, plan, questions, passages = run(tmp_path, "random", n=10, overrides=["influence.divergence_threshold=-0.5"])
    cfg = load_config(None, ["influence.divergence_threshold=-0.5"]).influence
    check_as_designed(plan, questions, passages, cfg)


def test_designs_are_seeded_and_quantized():
    a, b, c = design(8, 5, "mixed", 1), design(8, 5, "mixed", 1), design(8, 5, "mixed", 2)
    assert a == b and a != c
    for q in a["questions"].values():
        assert [len(s) for s in q["slots"]] == [round(v * WIDTH) for v in q["influence"]]
        assert all(0 <= slot < WIDTH for s in q["slots"] for slot in s)
    with pytest.raises(InputError, match="unknown 'upside_down'"):
        design(3, 5, "upside_down", 0)
    with pytest.raises(InputError, match="--k >= 2"):
        design(3, 1, "aligned", 0)


def test_cli(tmp_path, capsys, monkeypatch):
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("RAGRAY_HOME", str(tmp_path / "home"))  # the run history: home/history.sqlite
    out = tmp_path / "sim"
    assert main(["simulate", "--scenario", "inverted", "--questions", "3", "--k", "4", "--out", str(out),
                 "--no-progress"]) == 0
    printed = capsys.readouterr().out
    assert "ragray simulate: 3 simulated questions (inverted 3), k=4" in printed and "inverted 3" in printed
    assert main(["simulate", "--out", str(out), "--no-progress"]) == 2
    assert "already holds a run" in capsys.readouterr().err
    with pytest.raises(SystemExit):
        main(["simulate", "--scenario", "sideways"])
    with pytest.raises(SystemExit):
        main(["simulate", "--k", "1"])
    from ragray.store.history import History

    (record,) = History(f"sqlite:///{tmp_path / 'home' / 'history.sqlite'}").list_runs()
    assert record.kind == "run" and record.name == "simulated-inverted" and record.summary["simulated"]


@pytest.mark.parametrize("scenario", ["aligned_sparse", "buried_sparse"])
def test_sparse_scenarios_separate_the_seeds_rule_from_the_verdict(tmp_path, scenario):
    out, plan, questions, passages = run(tmp_path, scenario, n=20)
    check_as_designed(plan, questions, passages, load_config(None).influence)
    qs = list(questions.values())
    summary = json.loads((out / "summary.json").read_text())
    assert summary["divergent_rate"] == 1.0  # the seed's rule fires on every question of both
    if scenario == "aligned_sparse":
        # one used passage at rank 1, nine tied at 0: rho = its ceiling ≈ 0.52, yet perfectly aligned
        assert all(q["spearman_rho"] == pytest.approx(q["rho_ceiling"]) and q["usage_ndcg"] == 1.0 for q in qs)
        assert summary["alignment"]["misaligned_rate"] == 0.0 and summary["alignment"]["top1_used_rate"] == 1.0
        assert summary["alignment"]["divergent_not_misaligned"] == 20
        report = (out / "report.html").read_text()
        assert "20 questions flagged Divergent by the older rule" in report
        assert report.count('data-verdict="aligned"') == 20 and "badge divergent" not in report.split("<h2>Plots")[0]
    else:
        assert all(q["misaligned"] and q["flags"][0] == "misaligned" for q in qs)
        assert summary["alignment"]["misaligned_rate"] == 1.0
        assert summary["alignment"]["relies_on_lower_rank_rate"] == 1.0
        assert summary["alignment"]["divergent_not_misaligned"] == 0


@pytest.mark.parametrize("mode", ["loo", "logprob_share"])
@pytest.mark.parametrize("control", ["reversed", "shuffled"])
def test_position_control_flags_slot_driven_questions_only(tmp_path, mode, control):
    overrides = [f"influence.position_control={control}", f"influence.mode={mode}"]
    out, plan, questions, passages = run(tmp_path, "positional", n=8, overrides=overrides)
    check_as_designed(plan, questions, passages, load_config(None).influence)  # retrieval order as designed
    summary = json.loads((out / "summary.json").read_text())
    if control == "reversed":  # a shuffle may leave the last three slots' passages in place
        assert all(q["position_driven"] and "position_driven" in q["flags"] for q in questions.values())
        assert summary["position"]["position_driven_rate"] == 1.0
        # content influence: each passage's mean over both orders (symmetric under reversal)
        for p in passages:
            assert p["content_influence"] == pytest.approx((p["influence"] + p["influence_control"]) / 2)
    else:
        assert summary["position"]["position_driven_rate"] >= 0.5
    assert summary["position"]["control"] == control
    per_q = K + 1 if mode == "loo" else K + 2  # log-prob: k + 1 scored arms and a generated baseline
    assert summary["position"]["control_calls"] == 8 * per_q
    assert summary["position"]["control_call_share"] == pytest.approx(per_q / (K + 1 + per_q))
    calls = pq.read_table(out / "calls.parquet").to_pylist()
    assert {c["arm"] for c in calls} == {"baseline", "drop", "control_baseline", "control_drop"}

    out2, _, aligned, _ = run(tmp_path, "aligned_sparse", n=8, overrides=overrides)
    assert not any(q["position_driven"] for q in aligned.values())
    assert json.loads((out2 / "summary.json").read_text())["position"]["position_driven_rate"] == 0.0


def test_without_position_control_the_report_says_so(tmp_path):
    out, _, questions, passages = run(tmp_path, "positional", n=3)
    assert all(q["position_driven"] is None and q["position_control"] == "none" for q in questions.values())
    assert all(p["influence_control"] is None for p in passages)
    assert "influence may follow the slot, not the passage" in (out / "report.html").read_text()
