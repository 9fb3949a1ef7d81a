"""`ray job submit --working-dir . -- ragray run|interpret|sweep ...` against a real `ray start --head`.

The head is a separate `ray start --head --block` process on 127.0.0.1, with every port chosen
free (so it cannot collide with another cluster on the machine) and its own short --temp-dir
(so its address is written there, not to /tmp/ray/ray_current_cluster where every address-less
`ray.init()` on the machine would find it). It is stopped by signalling that process, never with
`ray stop`, which would stop every Ray process of the user. Jobs use the scripted generator: the
point is the job path (upload, runtime env, driver joining the cluster through RAY_ADDRESS, the
Ray Data actors, the run directory), not a model.
"""

from __future__ import annotations

import json
import os
import shutil
import signal
import socket
import subprocess
import tempfile
import time
import urllib.request
import uuid
from contextlib import ExitStack
from dataclasses import dataclass
from pathlib import Path

import pytest

RAY_CLI = shutil.which("ray")
if RAY_CLI is None:
    pytest.skip("the `ray` CLI is not on PATH (pip install 'ragray[ray]')", allow_module_level=True)

import psutil  # noqa: E402  (a dependency of ray)
import pyarrow.parquet as pq  # noqa: E402
import ray  # noqa: E402
from ray.job_submission import JobStatus, JobSubmissionClient  # noqa: E402

pytestmark = [pytest.mark.ray, pytest.mark.slow]

REPO = Path(__file__).resolve().parents[2]
RUNTIME_ENV = "cluster/runtime_env.yaml"  # relative: the commands run from the repo root, as documented
RAY_ENV = {
    "RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER": "0",
    "RAY_AUTH_MODE": "disabled",
    "RAY_USAGE_STATS_ENABLED": "0",
    "RAY_DATA_DISABLE_PROGRESS_BARS": "1",
    # SIGTERM to `ray start --block` first drains the node for up to 30 s; a test head has
    # nothing worth draining.
    "RAY_GRACEFUL_SHUTDOWN_DRAIN_TIMEOUT_S": "0",
}
ROWS = [
    {"id": f"q{i}", "question": f"Which ferry number {i}?", "answers": ["tern"],
     "passages": [{"id": f"q{i}-p{j}", "text": f"Passage {j} of question {i}."
                   + (" ANSWER=tern" if j == i % 4 else "")} for j in range(4)]}
    for i in range(6)
]
SCRIPTED = ["--no-progress", "--set", "generation.backend=scripted", "--executor", "ray",
            "--set", "execution.num_cpus=0.5"]


@dataclass(frozen=True)
class Head:
    dashboard: str  # http://127.0.0.1:<port>, the job API
    gcs: str  # 127.0.0.1:<port>, what drivers connect to
    temp_dir: Path
    env: dict[str, str]


def free_ports(n: int) -> list[int]:
    """n distinct ports free on loopback now (all held open together, so no duplicates)."""
    with ExitStack() as stack:
        socks = [stack.enter_context(socket.socket()) for _ in range(n)]
        for s in socks:
            s.bind(("127.0.0.1", 0))
        return [s.getsockname()[1] for s in socks]


def stop_head(proc: subprocess.Popen, timeout: float = 30.0) -> None:
    """SIGTERM to `ray start --block` shuts its node down; whatever outlives it is killed by pid."""
    try:
        family = [psutil.Process(proc.pid), *psutil.Process(proc.pid).children(recursive=True)]
    except psutil.NoSuchProcess:
        family = []
    proc.send_signal(signal.SIGTERM)
    _, alive = psutil.wait_procs(family, timeout=timeout)
    for p in alive:
        try:
            p.kill()
        except psutil.NoSuchProcess:
            pass
    psutil.wait_procs(alive, timeout=10)
    proc.wait(timeout=10)


def dashboard_ray_version(url: str) -> str | None:
    try:
        with urllib.request.urlopen(f"{url}/api/version", timeout=2) as response:
            return json.load(response)["ray_version"]
    except (OSError, ValueError):
        return None


@pytest.fixture(scope="module")
def head():
    env = {k: v for k, v in os.environ.items() if k != "RAY_ADDRESS"} | RAY_ENV
    gcs, dash, agent_http, agent_grpc, env_agent, metrics, client, node_mgr, obj_mgr = free_ports(9)
    temp_dir = Path(tempfile.mkdtemp(prefix="rgjob-", dir="/tmp"))  # short: AF_UNIX paths <= 107 bytes
    log = open(temp_dir / "head.log", "w")  # noqa: SIM115 (closed in teardown)
    proc = subprocess.Popen(
        [RAY_CLI, "start", "--head", "--block", "--node-ip-address=127.0.0.1", f"--port={gcs}",
         "--include-dashboard=true", "--dashboard-host=127.0.0.1", f"--dashboard-port={dash}",
         f"--dashboard-agent-listen-port={agent_http}", f"--dashboard-agent-grpc-port={agent_grpc}",
         f"--runtime-env-agent-port={env_agent}", f"--metrics-export-port={metrics}",
         f"--ray-client-server-port={client}", f"--node-manager-port={node_mgr}",
         f"--object-manager-port={obj_mgr}", "--num-cpus=2", "--num-gpus=0",
         f"--object-store-memory={200 * 2**20}", f"--temp-dir={temp_dir}", "--disable-usage-stats"],
        stdout=log, stderr=subprocess.STDOUT, env=env, cwd=temp_dir, start_new_session=True,
    )
    url = f"http://127.0.0.1:{dash}"
    try:
        # ready = the job API answers AND `ray start` has written its address (its last step)
        deadline = time.monotonic() + 180
        while not (dashboard_ray_version(url) and (temp_dir / "ray_current_cluster").exists()):
            if proc.poll() is not None or time.monotonic() > deadline:
                pytest.fail(f"ray start --head did not come up:\n{(temp_dir / 'head.log').read_text()[-3000:]}")
            time.sleep(0.5)
        assert dashboard_ray_version(url) == ray.__version__
        yield Head(url, f"127.0.0.1:{gcs}", temp_dir, env)
    finally:
        stop_head(proc)
        log.close()
        shutil.rmtree(temp_dir, ignore_errors=True)


@pytest.fixture()
def dataset(tmp_path: Path) -> Path:
    path = tmp_path / "qa.jsonl"
    path.write_text("".join(json.dumps(r) + "\n" for r in ROWS), encoding="utf-8")
    return path


def submit(head: Head, job_id: str, command: list[str]) -> subprocess.CompletedProcess:
    """The documented command: `ray job submit` from the repo root, `--working-dir .`."""
    return subprocess.run(
        [RAY_CLI, "job", "submit", "--address", head.dashboard, "--submission-id", job_id,
         "--working-dir", ".", "--runtime-env", RUNTIME_ENV, "--", *command],
        cwd=REPO, env=head.env, capture_output=True, text=True, timeout=360, check=False,
    )


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
    assert unpacked and all((d / "ragray" / "cli.py").is_file() for d in unpacked)
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
    import yaml

    serve_cli = shutil.which("serve")
    if serve_cli is None:
        pytest.skip("the `serve` CLI (ray[serve]) is not installed")
    (port,) = free_ports(1)
    raw = yaml.safe_load((REPO / "serve" / "demo.yaml").read_text())
    raw["http_options"]["port"] = port
    # serve deploy cannot upload a local working dir: the config path must exist on the nodes
    raw["applications"][0]["args"] = {
        "config": str(REPO / "configs" / "serve_demo.yaml"),
        "overrides": ["generation.backend=scripted", "rerank.strategy=none", "metrics.embedding=false"],
    }
    config = tmp_path / "serve.yaml"
    config.write_text(yaml.safe_dump(raw))
    serve_env = {k: v for k, v in head.env.items() if k != "RAGRAY_API_KEY"}
    done = subprocess.run([serve_cli, "deploy", str(config), "--address", head.dashboard], env=serve_env,
                          capture_output=True, text=True, timeout=120, check=False)
    assert done.returncode == 0, done.stdout + done.stderr
    try:
        deadline = time.monotonic() + 300
        while True:
            try:
                r = httpx.get(f"http://127.0.0.1:{port}/health", timeout=5)
                if r.status_code == 200:
                    break
            except httpx.HTTPError:
                pass
            assert time.monotonic() < deadline, subprocess.run(
                [serve_cli, "status", "--address", head.dashboard], env=serve_env, capture_output=True, text=True
            ).stdout
            time.sleep(1)
        assert r.json()["model"] == "scripted" and r.json()["corpus_passages"] == 80
        hits = httpx.post(f"http://127.0.0.1:{port}/retrieve", json={"question": "ferry", "top_k_docs": 3}, timeout=60)
        assert len(hits.json()["hits"]) == 3
        status = subprocess.run([serve_cli, "status", "--address", head.dashboard], env=serve_env,
                                capture_output=True, text=True, timeout=60, check=True).stdout
        assert "RUNNING" in status and "Generator" in status
    finally:
        subprocess.run([serve_cli, "shutdown", "-y", "--address", head.dashboard], env=serve_env,
                       capture_output=True, timeout=120, check=False)
