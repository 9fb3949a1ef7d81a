"""`ray job submit --working-dir . -- ragray run|interpret|sweep ...` against a real `ray start --head`.

The head is a separate `ray start --head --block` process on loopback (:mod:`tests.cluster._cluster`:
free ports, its own short --temp-dir, stopped by pid). Jobs use the scripted generator: the point is
the job path (upload, runtime env, driver joining the cluster through RAY_ADDRESS, the Ray Data
actors, the run directory), not a model; ``test_two_node_jobs.py`` runs the same commands with the
packaged models on two nodes.
"""

from __future__ import annotations

import json
import shutil
import subprocess
import uuid
from pathlib import Path

import pytest

from tests.cluster._cluster import RAY_CLI, REPO, Cluster, served, start_head, stop_cluster
from tests.cluster._cluster import submit as _submit

if RAY_CLI is None:
    pytest.skip("the `ray` CLI is not on PATH (pip install 'ragray[ray]')", allow_module_level=True)

import pyarrow.parquet as pq  # noqa: E402
import ray  # noqa: E402
from ray.job_submission import JobStatus, JobSubmissionClient  # noqa: E402

pytestmark = [pytest.mark.ray, pytest.mark.slow]

ROWS = [
    {"id": f"q{i}", "question": f"Which ferry number {i}?", "answers": ["tern"],
     "passages": [{"id": f"q{i}-p{j}", "text": f"Passage {j} of question {i}."
                   + (" ANSWER=tern" if j == i % 4 else "")} for j in range(4)]}
    for i in range(6)
]
SCRIPTED = ["--no-progress", "--set", "generation.backend=scripted", "--executor", "ray",
            "--set", "execution.num_cpus=0.5"]
Head = Cluster


@pytest.fixture(scope="module")
def head():
    cluster = start_head(num_cpus=2)
    try:
        from tests.cluster._cluster import _get

        assert (_get(f"{cluster.dashboard}/api/version") or {}).get("ray_version") == ray.__version__
        yield cluster
    finally:
        stop_cluster(cluster)


@pytest.fixture()
def dataset(tmp_path: Path) -> Path:
    path = tmp_path / "qa.jsonl"
    path.write_text("".join(json.dumps(r) + "\n" for r in ROWS), encoding="utf-8")
    return path


def submit(head: Head, job_id: str, command: list[str]) -> subprocess.CompletedProcess:
    return _submit(head, job_id, command)


def rows(path: Path) -> list[dict]:
    return pq.read_table(path).to_pylist()


def check_succeeded(head: Head, job_id: str, done: subprocess.CompletedProcess) -> str:
    """The CLI's exit status, the job's recorded status and runtime env; returns its logs."""
    out = done.stdout + done.stderr
    assert done.returncode == 0, out[-4000:]
    client = JobSubmissionClient(head.dashboard)
    info = client.get_job_info(job_id)
    assert info.status == JobStatus.SUCCEEDED, info.message
    assert info.runtime_env["working_dir"].startswith("gcs://"), "the working dir was uploaded"
    assert "runs/" in info.runtime_env["excludes"]
    logs = client.get_job_logs(job_id)
    # the driver joined this cluster through RAY_ADDRESS instead of starting a Ray of its own
    assert f"Connecting to existing Ray cluster at address: {head.gcs}" in logs, logs[-3000:]
    return logs


@pytest.mark.timeout(420)
def test_head_address_stays_in_its_temp_dir(head, monkeypatch):
    """An address-less ray.init() on this machine must not find the test head."""
    from ray._private.services import canonicalize_bootstrap_address
    from ray._private.utils import get_ray_address_file

    assert (head.temp_dir / "ray_current_cluster").read_text().strip() == head.gcs
    default_file = Path(get_ray_address_file(None))
    assert default_file.parent != head.temp_dir
    if default_file.exists():
        assert default_file.read_text().strip() != head.gcs
    monkeypatch.delenv("RAY_ADDRESS", raising=False)
    assert canonicalize_bootstrap_address(None) != head.gcs  # what ray.init() would connect to


@pytest.mark.timeout(420)
def test_run_job(head, dataset, tmp_path):
    out = tmp_path / "run"
    job_id = f"ragray-run-{uuid.uuid4().hex[:8]}"
    done = submit(head, job_id, ["ragray", "run", "--dataset", str(dataset), "--out", str(out),
                                 "--set", "metrics.embedding=false", *SCRIPTED])
    logs = check_succeeded(head, job_id, done)
    assert "ragray run: 6 questions (0 resumed)" in logs
    questions = rows(out / "questions.parquet")
    assert [q["question_id"] for q in questions] == [r["id"] for r in ROWS]
    assert {q["baseline_answer"] for q in questions} == {"tern"}
    assert {q["state"] for q in questions} == {"measured"}
    assert len(rows(out / "passages.parquet")) == 6 * 4
    assert len(rows(out / "calls.parquet")) == 6 * (1 + 4)  # baseline + one ablation per passage
    assert json.loads((out / "summary.json").read_text())["n_questions"] == 6
    # what the cluster unpacked as the job's working dir: this checkout without the large dirs
    packages = head.temp_dir / "session_latest" / "runtime_resources" / "working_dir_files"
    unpacked = [d for d in packages.iterdir() if d.is_dir()]
    assert unpacked and all((d / "ragray" / "adapters" / "cli.py").is_file() for d in unpacked)
    for d in unpacked:
        assert not any((d / big).exists() for big in (".git", "benchmarks/results")), d
        # runs/ was not uploaded: the only thing in it is the history database the job itself
        # wrote (history.url defaults to ./runs/ragray.sqlite, relative to the job's working dir)
        leftovers = {p.name for p in (d / "runs").iterdir()} if (d / "runs").is_dir() else set()
        assert leftovers <= {"ragray.sqlite", "ragray.sqlite-wal", "ragray.sqlite-shm"}, leftovers


@pytest.mark.timeout(420)
def test_interpret_job(head, dataset, tmp_path):
    out = tmp_path / "interpret"
    job_id = f"ragray-interpret-{uuid.uuid4().hex[:8]}"
    done = submit(head, job_id, [
        "ragray", "interpret", "--dataset", str(dataset), "--out", str(out), "--k", "top-1",
        "--repeats", "3", "--set", "faithfulness.similarity=rouge_l",
        "--set", "faithfulness.measures=[rouge_l,exact_match]", *SCRIPTED])
    check_succeeded(head, job_id, done)
    assert [q["question_id"] for q in rows(out / "questions.parquet")] == [r["id"] for r in ROWS]
    cases = rows(out / "cases.parquet")
    assert {c["question_id"] for c in cases} == {r["id"] for r in ROWS}
    assert {c["case"] for c in cases} == {"A"}  # dropping the ANSWER passage changes the answer
    for name in ("units", "arms"):
        assert rows(out / f"{name}.parquet"), name


@pytest.mark.timeout(420)
def test_sweep_job(head, dataset, tmp_path):
    """`ray job submit -- ragray sweep SPEC`: Tune's trials run on the cluster, the leaderboard is written."""
    spec = tmp_path / "sweep.yaml"
    spec.write_text(f"""
name: jobsweep
set: [data.path={dataset}, generation.backend=scripted, metrics.embedding=false,
      history.url=sqlite:///{tmp_path / 'history.sqlite'}]
retrieval: {{top_k: [1, 4]}}
execution: {{cpus_per_trial: 0.5, concurrency: 2}}
""")
    out = tmp_path / "sweep"
    job_id = f"ragray-sweep-{uuid.uuid4().hex[:8]}"
    done = submit(head, job_id, ["ragray", "sweep", str(spec), "--out", str(out)])
    logs = check_succeeded(head, job_id, done)
    assert "ragray sweep: 2/2 trials done" in logs, logs[-3000:]
    board = rows(out / "leaderboard.parquet")
    assert [r["status"] for r in board] == ["done", "done"]
    # top_k=4 holds every question's ANSWER passage; top_k=1 misses it for most questions
    assert board[0]["label"] == "retrieval.top_k=4" and board[0]["f1"] == 1.0 > board[1]["f1"]
    assert (out / "best_config.yaml").is_file() and any((out / "tune").rglob("result.json"))


@pytest.mark.timeout(420)
def test_failed_job_is_reported(head, dataset, tmp_path):
    """A ragray error inside the job fails the job and `ray job submit` (status and exit code)."""
    job_id = f"ragray-bad-{uuid.uuid4().hex[:8]}"
    done = submit(head, job_id, ["ragray", "run", "--dataset", str(dataset), "--out", str(tmp_path / "bad"),
                                 "--set", "retrieval.top_k=0", *SCRIPTED])
    assert done.returncode != 0
    client = JobSubmissionClient(head.dashboard)
    assert client.get_job_status(job_id) == JobStatus.FAILED
    assert "retrieval.top_k must be >= 1, got 0" in client.get_job_logs(job_id)


@pytest.mark.timeout(420)
def test_serve_deploy_on_the_cluster(head, tmp_path):
    """`serve deploy serve/demo.yaml --address <dashboard>` runs the HTTP API on the cluster."""
    import httpx

    args = {"config": str(REPO / "configs" / "serve_demo.yaml"),
            "overrides": ["generation.backend=scripted", "rerank.strategy=none", "metrics.embedding=false"]}
    with served(head, tmp_path, args) as (port, health):
        assert health["model"] == "scripted" and health["corpus_passages"] == 80
        hits = httpx.post(f"http://127.0.0.1:{port}/retrieve", json={"question": "ferry", "top_k_docs": 3}, timeout=60)
        assert len(hits.json()["hits"]) == 3
        status = subprocess.run([shutil.which("serve"), "status", "--address", head.dashboard], env=head.env,
                                capture_output=True, text=True, timeout=60, check=True).stdout
        assert "Generator" in status
