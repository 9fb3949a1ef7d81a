"""A mixed cluster at pure defaults: a CPU-only head and a worker with two (fake) GPUs, real `ray
start` nodes on loopback, the packaged models, no resource setting anywhere. Every model holder
asks for a GPU, so they all land on the worker, one per GPU; nothing lands on the head."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import uuid
from pathlib import Path

import pytest

from tests.cluster._cluster import REPO, add_worker, alive_nodes, start_head, stop_cluster, submit

pytest.importorskip("ray")
from ray.job_submission import JobStatus, JobSubmissionClient  # noqa: E402

pytestmark = [pytest.mark.ray, pytest.mark.slow]


@pytest.fixture(scope="module")
def gpu_cluster():
    """`ray start --head --num-cpus 1 --num-gpus 0` + a worker `--num-cpus 2 --num-gpus 2`."""
    cluster = start_head(num_cpus=1, prefix="rggpu-", multi_node=True)
    try:
        add_worker(cluster, num_cpus=2, num_gpus=2)
        nodes = alive_nodes(cluster)
        head = next(n["node_id"] for n in nodes if n.get("is_head_node"))
        yield cluster, head
    finally:
        stop_cluster(cluster)


def _on_the_gpu_worker(placement, head):
    assert placement and all(p["node_id"] != head for p in placement)  # nothing on the CPU-only head
    assert all(len(p["gpu_ids"]) == 1 and p["node_gpus"] == 2 for p in placement)


@pytest.mark.timeout(900)
def test_run_from_a_driver_puts_one_actor_on_each_gpu_and_none_on_the_head(gpu_cluster, tmp_path):
    """The issue's reproduction (a driver joining by address, `--executor ray`), at top-3: placement is
    what it checks (the pure-defaults run on Ray is tests/execution/test_defaults_cli.py's). It is
    also the suite's packaged model in (fake) GPU actors: Ray gave each a GPU, torch sees no CUDA."""
    cluster, head = gpu_cluster
    out = tmp_path / "run"
    env = {**cluster.env, "HF_HUB_OFFLINE": "1", "TRANSFORMERS_OFFLINE": "1"}
    done = subprocess.run([sys.executable, "-m", "ragray.adapters.cli", "run", "--no-progress", "--limit", "2", "--top-k", "3",
                           "--executor", "ray", "--address", cluster.gcs, "--out", str(out)],
                          cwd=REPO, env=env, capture_output=True, text=True, timeout=800, check=False)
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    summary = json.loads((out / "summary.json").read_text())
    assert summary["resources"] == {"count": 2, "cpus": 1.0, "gpus": 1.0}
    _on_the_gpu_worker(summary["placement"], head)
    assert len({p["gpu_ids"][0] for p in summary["placement"]}) == len(summary["placement"])
    assert summary["n_measured"] == 2 and summary["model"] == "smollm2"
    # fake GPUs: torch sees no CUDA there, so `device: auto` is the CPU, one thread per 1-CPU actor
    assert {p["device"] for p in summary["placement"]} == {"cpu"}
    assert all(p["settings"]["device"] == "cpu" and p["settings"]["threads"] == 1 for p in summary["placement"])
    assert "Ray actors: 2, 1 CPU and 1 GPU each" in done.stdout
    # each actor that made records prints its GPU (with 2 questions one actor may have made both)
    assert all(f"GPU {','.join(map(str, p['gpu_ids']))}" in done.stdout for p in summary["placement"])


@pytest.mark.timeout(900)
def test_a_sweep_job_runs_a_trial_per_gpu_on_the_worker(gpu_cluster, tmp_path):
    """Placement is what it checks, on scripted answers: a scripted trial asks for a GPU as a model's
    does (the packaged model in GPU actors is the driver run above; the packaged model in a sweep
    job on two nodes is tests/cluster/test_two_node_jobs.py's)."""
    cluster, head = gpu_cluster
    data = tmp_path / "qa.jsonl"
    data.write_text("".join(json.dumps({
        "id": f"q{i}", "question": f"Which ferry number {i}?", "answers": ["tern"],
        "passages": [{"id": f"q{i}-p{j}", "text": f"Passage {j}." + (" ANSWER=tern" if j == i % 3 else "")}
                     for j in range(3)]}) + "\n" for i in range(2)), encoding="utf-8")
    spec = tmp_path / "spec.yaml"
    spec.write_text(f"""
name: gpus
set: [data.path={data}, generation.backend=scripted, metrics.embedding=false,
      history.url=sqlite:///{tmp_path / 'history.sqlite'}]
retrieval: {{top_k: [2, 3]}}
""")
    out = tmp_path / "sweep"
    job_id = f"ragray-gpu-sweep-{uuid.uuid4().hex[:8]}"
    done = submit(cluster, job_id, ["ragray", "sweep", str(spec), "--out", str(out)], timeout=800)
    client = JobSubmissionClient(cluster.dashboard)
    logs = client.get_job_logs(job_id)
    assert client.get_job_info(job_id).status == JobStatus.SUCCEEDED, logs[-4000:] + done.stderr[-2000:]
    summary = json.loads((out / "summary.json").read_text())
    assert summary["resources"] == {"count": 2, "cpus": 1.0, "gpus": 1.0}
    _on_the_gpu_worker(summary["placement"], head)
    assert "trials: 2 at once, 1 CPU and 1 GPU each" in logs
    assert os.path.isfile(out / "leaderboard.parquet")
    header = [c.strip('"') for c in Path(out / "leaderboard.csv").read_text().splitlines()[0].split(",")]
    assert header[header.index("attempts") + 1] == "gpus"
    assert summary["decision"]["state"] == "undecided"  # two questions decide nothing
