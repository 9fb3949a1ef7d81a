"""`ragray run` end to end with the real SmolLM2 model on HotpotQA and on the demo set."""

import json
import os
import signal
import subprocess
import sys
import time

import pyarrow.parquet as pq
import pytest

from ragray.generation.engine_counts import ENGINE_COUNTS
from ragray.pipeline import run_influence
from ragray.config import load_config

pytestmark = pytest.mark.slow

K = 10


def read(out, name):
    return pq.read_table(out / f"{name}.parquet").to_pylist()


@pytest.mark.realdata
def test_hotpotqa_two_questions_smollm2(shared_data, tmp_path):
    cfg = load_config(None, [f"data.path={shared_data / 'hotpotqa_distractor_dev.jsonl'}",
                             "data.limit=2", f"retrieval.top_k={K}", "influence.mode=generate"])
    res = run_influence(cfg, tmp_path / "h", progress=False)
    qs, ps, calls = (read(res.out, n) for n in ("questions", "passages", "calls"))
    assert len(qs) == 2 and all(q["error"] is None for q in qs)
    for q in qs:
        mine = [c for c in calls if c["question_id"] == q["question_id"]]
        assert len(mine) == K + 1 and mine[0]["arm"] == "baseline"  # exactly k + 1 calls
        assert q["baseline_answer"] == mine[0]["answer"]
        if q["state"] == "measured":
            assert -1 <= q["spearman_rho"] <= 1
        else:
            assert q["spearman_rho"] is None and q["divergent"] is None
        infl = {p["passage_id"]: p["influence"] for p in ps if p["question_id"] == q["question_id"]}
        assert len(infl) == K and all(0 <= v <= 1 for v in infl.values())
        # an ablation that leaves the answer unchanged has influence exactly 0, and vice versa
        for c in mine[1:]:
            (removed,) = c["removed_passage_ids"]
            assert (infl[removed] == 0) == (c["answer"].strip() == q["baseline_answer"].strip())
    s = json.loads((res.out / "summary.json").read_text())
    assert s["n_calls"] == 2 * (K + 1) and s["model"].startswith("smollm2") and s["backend"] == "transformers"


def _ragray(*args, cwd):
    env = {**os.environ, "TQDM_DISABLE": "1"}
    return subprocess.Popen([sys.executable, "-m", "ragray.adapters.cli", *args], cwd=cwd, env=env,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                            start_new_session=True)


def _stable(rows):
    return [{k: v for k, v in r.items() if k not in ("seconds", "latency_s", *ENGINE_COUNTS)} for r in rows]


def test_kill_and_resume_loses_and_duplicates_nothing(tmp_path):
    # uncached: the reference run would otherwise answer the interrupted one at once
    args = ["run", "--limit", "3", "--top-k", "4", "--set", "generation.max_tokens=12", "--set", "cache.calls=false",
            "--set", "cache.embeddings=false", "--no-progress"]
    full = _ragray(*args, "--out", str(tmp_path / "full"), cwd=tmp_path)
    assert full.wait(timeout=900) == 0, full.stderr.read()

    cut = _ragray(*args, "--out", str(tmp_path / "cut"), cwd=tmp_path)
    log = tmp_path / "cut" / "progress.jsonl"
    deadline = time.monotonic() + 900
    while time.monotonic() < deadline and (not log.exists() or not log.read_text().count("\n")):
        time.sleep(0.2)
    os.killpg(cut.pid, signal.SIGKILL)  # no chance to clean up, like an OOM kill
    cut.wait(timeout=60)
    finished = log.read_text().count("\n")
    assert 1 <= finished < 3, "the kill should land mid-run"

    resumed = _ragray(*args, "--out", str(tmp_path / "cut"), "--resume", cwd=tmp_path)
    out, err = resumed.communicate(timeout=900)
    assert resumed.returncode == 0, err
    assert f"({finished} resumed)" in out
    for name in ("questions", "passages", "calls"):
        a, b = read(tmp_path / "cut", name), read(tmp_path / "full", name)
        assert _stable(a) == _stable(b)
    ids = [q["question_id"] for q in read(tmp_path / "cut", "questions")]
    assert len(ids) == len(set(ids)) == 3


@pytest.mark.realdata
def test_hotpotqa_logprob_mode_smollm2(shared_data, tmp_path):
    cfg = load_config(None, [f"data.path={shared_data / 'hotpotqa_distractor_dev.jsonl'}",
                             "data.limit=2", f"retrieval.top_k={K}", "influence.mode=logprob"])
    res = run_influence(cfg, tmp_path / "lp", progress=False)
    qs, ps, calls = (read(res.out, n) for n in ("questions", "passages", "calls"))
    assert all(q["error"] is None and q["n_calls"] == K + 1 for q in qs)
    assert all(0.0 <= p["influence"] <= 1.0 for p in ps) and len(ps) == 2 * K
    assert all(c["answer"] is None for c in calls if c["arm"] != "baseline")
    # a real model's answer probability moves when any passage is removed: influence is graded
    assert len({round(p["influence"], 6) for p in ps}) > 2
    assert res.summary.influence_mode == "logprob"


def test_every_measure_and_check_with_the_packaged_model(tmp_path):
    """jsd mode, the surrogate and the checks on one demo question with SmolLM2 (transformers)."""
    cfg = load_config(None, ["data.limit=1", "retrieval.top_k=5", "influence.mode=jsd", "influence.masks=8",
                             "influence.check_subsets=8", "influence.check_top_k=[1,2]"])
    res = run_influence(cfg, tmp_path / "e", progress=False)
    (q,) = read(res.out, "questions")
    ps, checks = read(res.out, "passages"), read(res.out, "checks")
    assert q["error"] is None and q["influence_mode"] == "jsd" and q["scored_tokens"] > 0
    assert q["logprob_all"] < 0 and q["logprob_none"] is not None and isinstance(q["context_dependent"], bool)
    assert q["surrogate_passes"] >= 1 and q["check_passes"] >= 1
    assert all(p["jsd"] >= 0 and p["surrogate_weight"] is not None for p in ps)
    # jsd mode's influence is the mean JSD per token in bits
    for p in ps:
        assert p["influence"] == pytest.approx(p["jsd"] / q["scored_tokens"] / 0.6931471805599453, abs=1e-9)
    # the top-1 drop of the raw drop-one measure IS its largest drop (the same scored arm)
    drop = next(c for c in checks if c["measure"] == "logprob_drop")
    assert drop["top_k_drop"][0] == pytest.approx(max(p["logprob_drop"] for p in ps), abs=1e-6)
    assert all(c["lds"] is None or -1 <= c["lds"] <= 1 for c in checks)
    assert {c["measure"] for c in checks} >= {"logprob_drop", "jsd", "surrogate_weight", "retrieval_rank",
                                              "answer_similarity", "question_similarity", "random_control"}
    s = json.loads((res.out / "summary.json").read_text())
    assert s["evidence"]["subsets"]["all"]["n_questions"] == 1
