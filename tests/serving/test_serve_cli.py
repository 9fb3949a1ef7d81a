"""`serve run serve/<config>.yaml` and `ragray serve` start the API as Ray users expect.

Each starts its own Ray in a subprocess (the scripted generator where start-up is all a test
needs) on a free loopback port; the test waits for /health, calls one endpoint, then stops it with Ctrl-C
(SIGINT) — never `ray stop`, which would kill every Ray on the machine.
"""

import json
import os
import shutil
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path

import pytest
import yaml

httpx = pytest.importorskip("httpx")
pytest.importorskip("ray")

pytestmark = [pytest.mark.ray, pytest.mark.slow]

ROOT = Path(__file__).resolve().parents[2]
FAST = ["generation.backend=scripted", "rerank.strategy=none", "metrics.embedding=false"]


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _env(tmp_path):
    env = {**os.environ, "RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER": "0", "RAY_AUTH_MODE": "disabled",
           "RAY_USAGE_STATS_ENABLED": "0", "HF_HUB_OFFLINE": "1", "TRANSFORMERS_OFFLINE": "1"}
    env.pop("RAY_ADDRESS", None)
    env.pop("RAGRAY_API_KEY", None)
    return env


def _serve_until_healthy(cmd, port, env, log_path, headers=None, timeout=240):
    with open(log_path, "wb") as log:
        proc = subprocess.Popen(cmd, cwd=ROOT, env=env, stdout=log, stderr=subprocess.STDOUT, start_new_session=True)
    deadline = time.time() + timeout
    try:
        while time.time() < deadline:
            assert proc.poll() is None, Path(log_path).read_text()[-3000:]
            try:
                r = httpx.get(f"http://127.0.0.1:{port}/health", headers=headers, timeout=5)
                if r.status_code == 200:
                    return proc, r.json()
            except httpx.HTTPError:
                pass
            time.sleep(1)
        raise AssertionError(f"not healthy in {timeout} s:\n{Path(log_path).read_text()[-3000:]}")
    except BaseException:
        _stop(proc)
        raise


def _stop(proc):
    """Ctrl-C, as a user would; then make sure the whole process group is gone."""
    if proc.poll() is None:
        os.killpg(proc.pid, signal.SIGINT)
        try:
            proc.wait(timeout=60)
        except subprocess.TimeoutExpired:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait(timeout=30)


@pytest.mark.timeout(400)
def test_serve_run_with_the_config_file(tmp_path):
    serve_cli = shutil.which("serve")
    if serve_cli is None:
        pytest.skip("the `serve` CLI (ray[serve]) is not installed")
    port = _free_port()
    raw = yaml.safe_load((ROOT / "serve" / "demo.yaml").read_text())
    raw["http_options"]["port"] = port
    raw["applications"][0]["args"]["overrides"] = FAST
    config = tmp_path / "demo.yaml"
    config.write_text(yaml.safe_dump(raw))
    proc, health = _serve_until_healthy([serve_cli, "run", str(config)], port, _env(tmp_path), tmp_path / "log")
    try:
        assert health["model"] == "scripted" and health["corpus_passages"] == 80
        r = httpx.post(f"http://127.0.0.1:{port}/retrieve", json={"question": "ferry", "top_k_docs": 2}, timeout=60)
        assert r.status_code == 200 and len(r.json()["hits"]) == 2
    finally:
        _stop(proc)
    assert proc.returncode is not None


@pytest.mark.timeout(600)
def test_ragray_serve_at_pure_defaults_with_the_packaged_model(tmp_path):
    """`ragray serve` with the built-in defaults (demo corpus, BM25, the packaged SmolLM2), only a
    free port: it says where each replica runs, and answers."""
    port = _free_port()
    cmd = [sys.executable, "-m", "ragray.adapters.cli", "serve", "--port", str(port)]
    proc, health = _serve_until_healthy(cmd, port, _env(tmp_path), tmp_path / "log", timeout=480)
    try:
        assert "smollm2" in health["model"].lower()
        r = httpx.post(f"http://127.0.0.1:{port}/generate", json={"question": "Which ferry sails north?",
                                                                  "top_k_docs": 2}, timeout=300)
        assert r.status_code == 200 and r.json()["answer"].strip()
        deadline = time.time() + 60  # printed once serve.run returns, which can be after /health answers
        while "generator pid" not in (log := (tmp_path / "log").read_text()) and time.time() < deadline:
            time.sleep(1)
        assert "placement:" in log and "generator pid" in log and "GPU none, device cpu" in log
        where = json.loads((ROOT / "runs" / "serve-placement.json").read_text())
        assert [w["role"] for w in where] == ["retriever", "reranker", "generator"]
    finally:
        _stop(proc)


@pytest.mark.timeout(600)
def test_ragray_serve_with_a_key_answers_then_sigterm_records_its_run_interrupted(tmp_path):
    """`ragray serve <config>` with an API key: a request without it is refused, one with it is
    answered, the log says where it serves. Then issue 64: SIGTERM of `ragray serve` on Ray stops a
    run in flight (the packaged model, the demo set: about a minute of work) within a bound, and its
    record reads interrupted, not running."""
    from ragray.store.history import History

    port, history = _free_port(), f"sqlite:///{tmp_path / 'history.sqlite'}"
    sets = ["rerank.strategy=none", "metrics.embedding=false", f"serve.runs_dir={tmp_path / 'runs'}",
            f"history.url={history}", "cache.calls=false"]
    cmd = [sys.executable, "-m", "ragray.adapters.cli", "serve", "configs/serve_demo.yaml", "--port", str(port),
           *[a for o in sets for a in ("--set", o)]]
    key = {"Authorization": "Bearer k"}
    proc, _ = _serve_until_healthy(cmd, port, _env(tmp_path) | {"RAGRAY_API_KEY": "k"}, tmp_path / "log", headers=key)
    try:
        url = f"http://127.0.0.1:{port}"
        assert httpx.get(f"{url}/health", timeout=5).status_code == 401
        r = httpx.post(f"{url}/generate", headers=key, json={"question": "Which ferry sails north?", "top_k_docs": 2},
                       timeout=300)
        assert r.status_code == 200 and r.json()["answer"].strip(), r.text
        assert f"ragray serve: http://127.0.0.1:{port}" in (tmp_path / "log").read_text()
        run_id = httpx.post(f"{url}/runs", headers=key, json={"command": "run"}, timeout=30).json()["run_id"]
        deadline = time.time() + 300
        while (status := httpx.get(f"{url}/runs/{run_id}", headers=key, timeout=30).json())["questions_done"] < 1:
            assert status["status"] == "running" and time.time() < deadline, status
            time.sleep(1)
        proc.send_signal(signal.SIGTERM)  # the server's own process, as a scheduler stops it
        sent = time.monotonic()
        proc.wait(timeout=120)
        took = time.monotonic() - sent
    finally:
        _stop(proc)
    log = (tmp_path / "log").read_text()
    record = History(history).get_run(run_id)
    assert record.status == "interrupted" and record.finished_at is not None, (record, log[-3000:])
    assert "the server" in (record.error or ""), record.error
    assert "ragray serve: stopped" in log
    print(f"\nSIGTERM to exit: {took:.1f} s")
