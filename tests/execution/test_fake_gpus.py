"""At pure defaults on a Ray with GPUs (two fake ones: Ray's resource, torch sees none), every model
holder asks for one: Ray Data actors, Tune trials and Serve generator replicas each hold their own
GPU with its own ``CUDA_VISIBLE_DEVICES``, and each run records where they ran."""

import json
import time

import pytest

ray = pytest.importorskip("ray")

from ragray.config import load_config  # noqa: E402
from ragray.pipeline import run_influence, run_interpret  # noqa: E402

pytestmark = pytest.mark.ray

ROWS = [
    {"id": f"q{i}", "question": f"Which ferry number {i}?", "answers": ["tern"],
     "passages": [{"id": f"q{i}-p{j}", "text": f"Passage {j} of question {i}." + (" ANSWER=tern" if j == i % 3 else "")}
                  for j in range(3)]}
    for i in range(6)
]


@pytest.fixture(scope="module")
def two_gpus(start_ray):
    start_ray("/tmp/rg-gpus", num_gpus=2)
    yield
    ray.shutdown()


@pytest.fixture()
def dataset(tmp_path):
    path = tmp_path / "qa.jsonl"
    path.write_text("".join(json.dumps(r) + "\n" for r in ROWS), encoding="utf-8")
    return path


def _one_actor_per_gpu(summary):
    """Two actors of one GPU each; those that made records (one may have taken every question
    before the other started) each on its own GPU."""
    assert summary["resources"] == {"count": 2, "cpus": 1.0, "gpus": 1.0}
    placement = summary["placement"]
    assert 1 <= len(placement) <= 2 and len({p["pid"] for p in placement}) == len(placement)
    assert all(len(p["gpu_ids"]) == 1 and p["cuda_visible_devices"] == p["gpu_ids"][0] for p in placement)
    assert len({p["gpu_ids"][0] for p in placement}) == len(placement) and all(p["node_gpus"] == 2 for p in placement)


@pytest.mark.timeout(600)
def test_run_and_interpret_start_one_actor_per_gpu_at_defaults(two_gpus, dataset, tmp_path):
    base = [f"data.path={dataset}", "generation.backend=scripted", "metrics.embedding=false",
            "execution.executor=ray"]  # nothing about resources
    run = run_influence(load_config(None, base), tmp_path / "run", progress=False)
    saved = json.loads((tmp_path / "run" / "summary.json").read_text())
    _one_actor_per_gpu(saved)
    assert sum(p["questions"] for p in saved["placement"]) == 6 and run.summary.resources["count"] == 2
    interpret = run_interpret(load_config(None, [*base, "faithfulness.similarity=rouge_l",
                                                 "faithfulness.measures=[rouge_l]", "faithfulness.k_values=[top-1]",
                                                 "faithfulness.random_repeats=2"]), tmp_path / "interpret",
                              progress=False)
    _one_actor_per_gpu(json.loads((tmp_path / "interpret" / "summary.json").read_text()))
    assert interpret.summary.n_questions == 6


# The packaged model in (fake) GPU actors, device auto -> CPU, one thread each: the driver run in
# tests/cluster/test_gpu_cluster.py (the same run on a real two-node cluster; this one was a copy).


SPEC = """
name: gpus
set: [data.path={data}, generation.backend=scripted, metrics.embedding=false]
retrieval:
  top_k: [1, 2, 3]
"""


@pytest.mark.timeout(600)
def test_a_sweep_runs_one_trial_per_gpu_at_once_and_records_each_trials_gpu(two_gpus, dataset, tmp_path):
    from ragray.adapters.sweep.runner import run_sweep

    spec = tmp_path / "spec.yaml"
    spec.write_text(SPEC.format(data=dataset))
    result = run_sweep(spec, tmp_path / "sweep", verbose=0)
    assert [r["status"] for r in result.rows] == ["done"] * 3
    assert {r["gpus"] for r in result.rows} <= {"0", "1"}
    summary = json.loads((tmp_path / "sweep" / "summary.json").read_text())
    assert summary["resources"] == {"count": 2, "cpus": 1.0, "gpus": 1.0}
    assert len(summary["placement"]) == 3 and all(len(p["gpu_ids"]) == 1 for p in summary["placement"])
    # never more than two trials at once: each trial's span is from its start to its trial.json
    spans = []
    for r in result.rows:
        attempt = json.loads((tmp_path / "sweep" / "trials" / r["trial_id"] / "attempts.jsonl").read_text()
                             .splitlines()[-1])
        spans.append((attempt["started"], (tmp_path / "sweep" / "trials" / r["trial_id"] / "trial.json").stat().st_mtime))
    for start, _ in spans:
        assert sum(s <= start < e for s, e in spans) <= 2


@pytest.mark.timeout(600)
def test_serve_generator_replicas_each_hold_one_gpu(two_gpus, tmp_path):
    from ray import serve

    from ragray.adapters.serving.app import app_from_config

    cfg = load_config(None, ["generation.backend=scripted", "metrics.embedding=false", "serve.generator.num_replicas=2",
                             f"serve.runs_dir={tmp_path / 'runs'}"])
    serve.run(app_from_config(cfg), name="gpus", route_prefix="/gpus")
    try:
        handle = serve.get_deployment_handle("Generator", app_name="gpus")
        seen, deadline = {}, time.monotonic() + 60
        while len(seen) < 2 and time.monotonic() < deadline:
            where = handle.placement.remote().result()
            seen[where["pid"]] = where
        assert sorted(tuple(p["gpu_ids"]) for p in seen.values()) == [("0",), ("1",)]
        # BM25 and no reranker hold no model: no GPU for them
        retriever = serve.get_deployment_handle("Retriever", app_name="gpus").placement.remote().result()
        assert retriever["gpu_ids"] == [] and retriever["node_gpus"] == 2 and not retriever["holds_model"]
    finally:
        serve.delete("gpus")
        serve.shutdown()
