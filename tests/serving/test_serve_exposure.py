"""No open server by accident, and `ragray serve --no-ray` at pure defaults refuses the attacks
of issue 42 with the packaged model loaded (the real server a user starts, over real HTTP)."""

import json
import subprocess
import sys
import time
from pathlib import Path

import pytest

from ragray.config import load_config
from ragray.errors import ConfigError
from ragray.adapters.serving.exposure import check_exposure, is_loopback

httpx = pytest.importorskip("httpx")

ROOT = Path(__file__).resolve().parents[2]


@pytest.mark.parametrize("host, loopback", [("127.0.0.1", True), ("127.8.0.1", True), ("::1", True),
                                            ("[::1]", True), ("localhost", True), ("0.0.0.0", False),
                                            ("::", False), ("192.168.1.20", False), ("myhost", False)])
def test_loopback_hosts(host, loopback):
    assert is_loopback(host) is loopback


def test_a_server_beyond_loopback_needs_a_key_or_insecure(monkeypatch):
    monkeypatch.delenv("RAGRAY_API_KEY", raising=False)
    assert check_exposure(load_config(None).serve) is None
    with pytest.raises(ConfigError, match=r"serve.host 0.0.0.0 is not loopback.*Set \$RAGRAY_API_KEY.*--insecure"):
        check_exposure(load_config(None, ["serve.host=0.0.0.0"]).serve)
    warning = check_exposure(load_config(None, ["serve.host=0.0.0.0", "serve.insecure=true"]).serve)
    assert warning.startswith("WARNING: serving on 0.0.0.0 without an API key")
    monkeypatch.setenv("RAGRAY_API_KEY", "k")
    assert check_exposure(load_config(None, ["serve.host=0.0.0.0"]).serve) is None


def _env():
    import os

    env = {**os.environ, "HF_HUB_OFFLINE": "1", "TRANSFORMERS_OFFLINE": "1"}
    env.pop("RAGRAY_API_KEY", None)
    return env


def test_ragray_serve_on_every_interface_without_a_key_refuses_to_start(tmp_path):
    done = subprocess.run([sys.executable, "-m", "ragray.adapters.cli", "serve", "--no-ray", "--host", "0.0.0.0"],
                          cwd=tmp_path, env=_env(), capture_output=True, text=True, timeout=120)
    assert done.returncode != 0
    assert "serve.host 0.0.0.0 is not loopback" in done.stderr and "Traceback" not in done.stderr, done.stderr
    assert not (tmp_path / "runs").exists()


def _start(cmd, cwd, port, timeout=300):
    log = open(cwd / "serve.log", "wb")
    proc = subprocess.Popen(cmd, cwd=cwd, env=_env(), stdout=log, stderr=subprocess.STDOUT, start_new_session=True)
    deadline = time.time() + timeout
    while time.time() < deadline:
        assert proc.poll() is None, (cwd / "serve.log").read_text()[-3000:]
        try:
            if httpx.get(f"http://127.0.0.1:{port}/health", timeout=5).status_code == 200:
                return proc
        except httpx.HTTPError:
            pass
        time.sleep(1)
    proc.kill()
    raise AssertionError((cwd / "serve.log").read_text()[-3000:])


@pytest.mark.slow
@pytest.mark.timeout(300)
def test_insecure_starts_with_a_warning(tmp_path):
    from tests.serving.test_serve_cli import _free_port, _stop

    port = _free_port()
    proc = _start([sys.executable, "-m", "ragray.adapters.cli", "serve", "--no-ray", "--host", "0.0.0.0", "--insecure",
                   "--port", str(port), "--set", "generation.backend=scripted", "--set", "metrics.embedding=false"],
                  tmp_path, port)
    _stop(proc)
    assert "WARNING: serving on 0.0.0.0 without an API key (--insecure)" in (tmp_path / "serve.log").read_text()


@pytest.mark.slow
@pytest.mark.timeout(600)
def test_ragray_serve_no_ray_at_pure_defaults_refuses_the_attacks(tmp_path):
    """The packaged SmolLM2, the demo corpus, every default: only a free port."""
    from tests.serving.test_client_settings import Listener, attacks
    from tests.serving.test_serve_cli import _free_port, _stop

    port = _free_port()
    secret = tmp_path / "outside" / "private.jsonl"
    secret.parent.mkdir()
    secret.write_text(json.dumps({"id": "leak", "question": "SECRET-7731?", "answers": ["x"],
                                  "passages": [{"id": "p", "text": "SECRET-7731"}]}) + "\n")
    target, model_dir = tmp_path / "written-here", tmp_path / "not-a-model"
    model_dir.mkdir()
    (model_dir / "config.json").write_text("{}")
    served = tmp_path / "server"
    served.mkdir()
    proc = _start([sys.executable, "-m", "ragray.adapters.cli", "serve", "--no-ray", "--port", str(port)], served, port)
    listener = Listener()
    base = f"http://127.0.0.1:{port}"
    try:
        before = httpx.get(f"{base}/runs", timeout=30).json()
        for key, overrides in attacks(listener.port, str(secret), str(target), str(model_dir)).items():
            r = httpx.post(f"{base}/runs", json={"command": "run", "limit": 1, "overrides": overrides}, timeout=60)
            assert r.status_code == 403 and (key in r.json()["error"] or "served dataset" in r.json()["error"]
                                             or "dataset this server offers" in r.json()["error"]), r.text
        bad = httpx.post(f"{base}/generate", content=b'{"question": "q", "passages": ["\\ud800"]}',
                         headers={"content-type": "application/json"}, timeout=60)
        assert bad.status_code == 422 and "passages[0]: invalid Unicode" in bad.json()["error"], bad.text
        time.sleep(1)
        assert listener.received == [] and not target.exists()
        assert httpx.get(f"{base}/runs", timeout=30).json() == before
        log = (served / "serve.log").read_text()
        assert str(model_dir) not in log and "SECRET-7731" not in log  # no load attempted, nothing read
        runs = served / "runs"
        assert not (runs.is_dir() and [p for p in runs.iterdir() if p.is_dir()])  # no run folder made
    finally:
        listener.close()
        _stop(proc)
