"""`ragray run` end to end with the real SmolLM2 model on HotpotQA and on the demo set."""

import json

import pyarrow.parquet as pq
import pytest

from ragray.metrics.similarity import get_similarity
from ragray.pipeline import run_influence
from ragray.config import load_config

pytestmark = pytest.mark.slow

K = 3  # of the 10 paragraphs per question: each generate-mode question is k + 1 generations


def read(out, name):
    return pq.read_table(out / f"{name}.parquet").to_pylist()


@pytest.mark.realdata
def test_hotpotqa_two_questions_smollm2(shared_data, tmp_path):
    cfg = load_config(None, [f"data.path={shared_data / 'hotpotqa_distractor_dev.jsonl'}",
                             "data.limit=2", f"retrieval.top_k={K}", "influence.mode=loo"])
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
        # an ablation whose answer is the same to the run's similarity (rouge_l on normalized
        # tokens: quotes and case do not count) has influence exactly 0, and vice versa
        same = get_similarity("rouge_l")
        for c in mine[1:]:
            (removed,) = c["removed_passage_ids"]
            assert (infl[removed] == 0) == (same(c["answer"], q["baseline_answer"]) == 1.0)
    s = json.loads((res.out / "summary.json").read_text())
    assert s["n_calls"] == 2 * (K + 1) and s["model"].startswith("smollm2") and s["backend"] == "transformers"


@pytest.mark.realdata
def test_hotpotqa_logprob_mode_smollm2(shared_data, tmp_path):
    cfg = load_config(None, [f"data.path={shared_data / 'hotpotqa_distractor_dev.jsonl'}",
                             "data.limit=2", f"retrieval.top_k={K}", "influence.mode=logprob_share"])
    res = run_influence(cfg, tmp_path / "lp", progress=False)
    qs, ps, calls = (read(res.out, n) for n in ("questions", "passages", "calls"))
    assert all(q["error"] is None and q["n_calls"] == K + 1 for q in qs)
    assert all(0.0 <= p["influence"] <= 1.0 for p in ps) and len(ps) == 2 * K
    assert all(c["answer"] is None for c in calls if c["arm"] != "baseline")
    # a real model's answer probability moves when any passage is removed: influence is graded
    assert len({round(p["influence"], 6) for p in ps}) > 2
    assert res.summary.influence_mode == "logprob_share"


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
