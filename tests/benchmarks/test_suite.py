"""The one-command benchmark suite's orchestration, with stand-in section scripts (the real
sections are the benchmarks themselves), and the acceptance figures read from result JSONs."""

from __future__ import annotations

import json

import pytest

from benchmarks import suite
from benchmarks.acceptance import acceptance

WRITES = """
import argparse, json
ap = argparse.ArgumentParser(); ap.add_argument("--out"); ap.add_argument("--questions")
a = ap.parse_args()
json.dump({"summary": {"naive_hf_generate_fp32": {"calls_per_s": 0.1},
                       "ragray_bf16": {"calls_per_s": 0.9, "speedup_vs_naive": 9.0}}}, open(a.out, "w"))
print("section ran with", a.questions)
"""
FAILS = "import sys\nprint('something broke in the middle')\nsys.exit(3)\n"


@pytest.fixture
def sections(tmp_path, monkeypatch):
    (tmp_path / "writes.py").write_text(WRITES)
    (tmp_path / "fails.py").write_text(FAILS)
    fake = (
        suite.Section("generation", str(tmp_path / "writes.py"), lambda a, _: ["--questions", str(a.questions)]),
        suite.Section("limits", str(tmp_path / "fails.py"), lambda a, _: []),
        suite.Section("scaling", str(tmp_path / "writes.py"), lambda a, _: []),
    )
    monkeypatch.setattr(suite, "SECTIONS", fake)
    monkeypatch.setattr(suite, "NAMES", tuple(s.name for s in fake))
    return tmp_path


def test_a_failing_section_is_recorded_and_the_rest_still_run(sections, capsys) -> None:
    results = sections / "results"
    code = suite.main(["--questions", "2", "--results", str(results), "--skip", "scaling"])
    assert code == 1
    data = json.loads((results / "suite.json").read_text())
    assert data["options"]["sections"] == ["generation", "limits"]
    assert data["machine"]["cores"] and "commit" in data["machine"]
    gen, lim = data["sections"]["generation"], data["sections"]["limits"]
    assert gen["status"] == "ok" and gen["json"] == "generation.json"
    assert "section ran with 2" in (results / "logs" / "generation.log").read_text()
    assert lim["status"] == "failed" and lim["returncode"] == 3
    assert "something broke in the middle" in lim["error"]
    speed = data["acceptance"]["ablation_calls_speedup_vs_naive"]
    assert speed["value"] == 9.0 and speed["met"] is True and speed["path"] == "ragray_bf16"
    assert "[2/2] limits: failed" in capsys.readouterr().out


def test_only_runs_the_named_sections_and_keeps_the_others_earlier_rows(sections) -> None:
    results = sections / "out"
    assert suite.main(["--only", "scaling", "--results", str(results)]) == 0
    assert list(json.loads((results / "suite.json").read_text())["sections"]) == ["scaling"]
    assert suite.main(["--only", "generation", "--results", str(results)]) == 0
    data = json.loads((results / "suite.json").read_text())
    assert data["options"]["sections"] == ["generation"]
    assert data["options"]["kept_from_earlier_runs"] == ["scaling"]
    assert "earlier_run" in data["sections"]["scaling"] and "earlier_run" not in data["sections"]["generation"]
    assert data["acceptance"]["ablation_calls_speedup_vs_naive"]["value"] == 9.0


@pytest.mark.parametrize("argv", [["--only", "nope"], ["--questions", "0"]])
def test_bad_arguments_are_refused(sections, argv, capsys) -> None:
    with pytest.raises(SystemExit) as exc:
        suite.parse_args(argv)
    assert exc.value.code == 2
    err = capsys.readouterr().err
    assert "nope" in err or "--questions must be at least 1, got 0" in err


def test_acceptance_reads_each_target_from_the_section_results(tmp_path) -> None:
    (tmp_path / "retrieval.json").write_text(json.dumps({"bm25": [
        {"dataset": "a", "speedup_index_plus_queries": 25.0, "identical_top10_share": 1.0},
        {"dataset": "b", "speedup_index_plus_queries": 19.0, "identical_top10_share": 0.99}]}))
    (tmp_path / "scaling.json").write_text(json.dumps({"cluster": {"physical_cores": 2, "runs": {
        "1_nodes": {"nodes": 1, "efficiency_vs_1_node": 1.0},
        "2_nodes": {"nodes": 2, "efficiency_vs_1_node": 0.95},
        "3_nodes": {"nodes": 3, "efficiency_vs_1_node": 0.6}}}}))
    (tmp_path / "contextcite.json").write_text(json.dumps(
        {"workload": {"ablations": 32}, "summary": {
            "speedup": 2.5, "same_solver_spearman_mean": 1.0, "fastest_ragray_dtype": "bfloat16",
            "ragray": {"float32": {"speedup": {"float32": 1.2, "bfloat16": 0.6}},
                       "bfloat16": {"speedup": {"float32": 2.5, "bfloat16": 1.3}}}}}))
    out = acceptance(tmp_path, ["retrieval", "scaling", "contextcite", "generation"])
    bm25 = out["bm25_speedup_vs_rank_bm25"]
    assert (bm25["value"], bm25["met"], bm25["identical_top10_share"]) == (19.0, False, 0.99)
    cluster = out["ray_cluster_efficiency"]  # 3 nodes share 2 cores: judged at 2
    assert (cluster["value"], cluster["nodes"], cluster["met"]) == (0.95, 2, True)
    cc = out["logprob_speedup_vs_contextcite"]
    assert cc["met"] is False and cc["speedup_same_dtype"] == {"float32": 1.2, "bfloat16": 1.3}
    assert "ablation_calls_speedup_vs_naive" not in out  # no generation.json
    assert acceptance(tmp_path, ["retrieval"]).keys() == {"bm25_speedup_vs_rank_bm25"}
    (tmp_path / "gpu_8b.json").write_text(json.dumps({  # measured on a GPU machine, read whatever ran
        "device": "NVIDIA H200", "ragray": {"calls_per_s": 34.6}, "x_naive_logprob": 10.4,
        "x_naive_lean": 5.4, "share_of_exact_reuse_bound": 0.585, "share_of_no_reuse_bound": 0.975}))
    gpu = acceptance(tmp_path, ["retrieval"])
    assert gpu["gpu_8b_calls_per_s"]["met"] and gpu["gpu_8b_speedup_vs_naive_logprob"]["met"]
    assert gpu["gpu_8b_share_of_exact_reuse_bound"]["met"] is False
