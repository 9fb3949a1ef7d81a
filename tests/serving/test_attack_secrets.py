"""Issue 64, hole 2: secrets in answers. Any client read the whole served config (`PUT
/presets/mine` then `GET /presets/mine`: an endpoint's password, the key variable's name, the
history URL, the datasets' paths, the runs and cache folders), and a failing backend's URL with
its credentials came back in the errors of /generate, /influence, /interpretation, /audit and
GET /runs.

Here a password is planted in every operator setting that can hold one, and every route of the
API (each one the app has: a new route without a request here fails the test) is asked, the
happy way and the failing way, with the scripted generator and with a real endpoint backend that
cannot be reached; no response, status line to body, holds it."""

import json
import socket
import time
from pathlib import Path

import pytest

httpx = pytest.importorskip("httpx")
from fastapi.testclient import TestClient  # noqa: E402

from ragray.config import load_config  # noqa: E402
from ragray.adapters.serving.local import local_app  # noqa: E402
from tests.serving.conftest import DOCS  # noqa: E402

SECRET = "PASSW0RD"
KEY = f"key-{SECRET}-1"
AUTH = {"Authorization": f"Bearer {KEY}"}
CSV = "question_id,passage_id,retrieval_rank,influence\nq1,a,1,0.9\nq1,b,2,0.1\n"


def _dead_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _planted(tmp_path: Path, monkeypatch, backend: str):
    root = tmp_path / f"op-{SECRET}"
    data = root / f"data-{SECRET}" / "island.jsonl"
    data.parent.mkdir(parents=True)
    rows = [{"id": "q1", "question": "Which ferry goes to Corran?", "answers": ["tern"],
             "passages": [{"id": pid, "text": text} for pid, text in DOCS]}]
    data.write_text("".join(json.dumps(r) + "\n" for r in rows), encoding="utf-8")
    presets = root / f"presets-{SECRET}"
    presets.mkdir()
    (presets / "small.yaml").write_text(
        f"name: small\ndata:\n  path: {data}\ngeneration:\n  backend: scripted\n  model: {root}/models-{SECRET}/m\n"
        f"metrics:\n  embedding: false\ncache:\n  dir: {root}/preset-cache-{SECRET}\n")
    monkeypatch.setenv(f"{SECRET}_KEY", KEY)
    monkeypatch.setenv(f"{SECRET}_OPENAI", f"sk-{SECRET}-2")
    return load_config(None, [
        f"data.path={data}", f"generation.backend={backend}", "metrics.embedding=false", "retrieval.top_k=3",
        "faithfulness.similarity=rouge_l", "faithfulness.measures=[rouge_l]", "faithfulness.random_repeats=2",
        "faithfulness.k_values=[top-1]", f"serve.datasets={{mine: {data}}}",
        f"serve.runs_dir={root}/runs-{SECRET}", f"serve.presets_dir={presets}", f"cache.dir={root}/cache-{SECRET}",
        f"history.url=sqlite:///{root}/db-{SECRET}/history.sqlite", f"serve.api_key_env={SECRET}_KEY",
        f"generation.openai.base_url=http://op:{SECRET}@127.0.0.1:{_dead_port()}/v1?token={SECRET}",
        f"generation.openai.api_key_env={SECRET}_OPENAI", "generation.openai.max_retries=0",
        "generation.openai.timeout_s=2",
    ])


def _wait(client, run_id, timeout=60):
    deadline = time.time() + timeout
    while (r := client.get(f"/runs/{run_id}", headers=AUTH)).json()["status"] == "running" and time.time() < deadline:
        time.sleep(0.2)
    return r


class Recorder:
    """Sends requests, keeps every response and the route templates they reached."""

    def __init__(self, client):
        self.client, self.responses, self.routes = client, [], set()

    def __call__(self, method, path, route=None, **kw):
        kw.setdefault("headers", AUTH)
        r = self.client.request(method, path, **kw)
        self.responses.append(r)
        self.routes.add((method, route or path))
        return r

    def leaks(self):
        return [(r.request.method, str(r.request.url), r.status_code, r.text[:300]) for r in self.responses
                if SECRET in r.text or SECRET in str(r.headers) or SECRET.encode() in r.content]


def _ask_every_route(ask: Recorder, tmp_path: Path) -> None:
    q = {"question": "Which ferry goes to Corran?", "top_k_docs": 3}
    ask("GET", "/health")
    ask("GET", "/openapi.json"), ask("GET", "/docs"), ask("GET", "/redoc"), ask("GET", "/docs/oauth2-redirect")
    ask("POST", "/retrieve", json=q), ask("POST", "/retrieve", json={**q, "retriever": "nope"})
    ask("POST", "/generate", json=q)
    ask("POST", "/influence", json={**q, "answers": ["tern"]})
    ask("POST", "/interpretation", json=q)
    ask("POST", "/audit", json={**q, "explain": True, "relevant_ids": ["ferry"]})
    ask("GET", "/presets")
    ask("GET", "/presets/small", "/presets/{name}"), ask("GET", "/presets/nope", "/presets/{name}")
    ask("PUT", "/presets/mine", "/presets/{name}", json={"config": {"seed": 3, "data": {"path": "mine"}}})
    ask("PUT", "/presets/bad", "/presets/{name}", json={"config": {"data": {"path": str(tmp_path)}}})
    ask("PUT", "/presets/small", "/presets/{name}", json={"config": {"seed": 3}})
    ask("GET", "/presets/mine", "/presets/{name}")
    ask("DELETE", "/presets/mine", "/presets/{name}"), ask("DELETE", "/presets/small", "/presets/{name}")
    ask("POST", "/cleanup")
    ids = []
    for body in ({"command": "run"}, {"command": "interpret", "preset": "small"}, {"command": "audit"},
                 {"command": "run", "overrides": ["data.path=mine"]}, {"command": "run", "overrides": ["data.path=/etc"]}):
        r = ask("POST", "/runs", json=body)
        if r.status_code == 202:
            ids.append(r.json()["run_id"])
    for run_id in ids:
        ask.responses.append(_wait(ask.client, run_id))
        ask("GET", f"/runs/{run_id}", "/runs/{run_id}")
        ask("GET", f"/runs/{run_id}/questions", "/runs/{run_id}/questions")
    ask("GET", "/runs"), ask("GET", "/runs/nope", "/runs/{run_id}")
    ask("DELETE", "/runs/nope", "/runs/{run_id}")
    for run_id in ids[:1]:
        ask("DELETE", f"/runs/{run_id}", "/runs/{run_id}")  # finished: 409
    d = "/dashboard"
    ask("GET", f"{d}/"), ask("GET", f"{d}/api/runs")
    up = ask("POST", f"{d}/upload", files={"file": (f"{SECRET}.csv", CSV, "text/csv")}, follow_redirects=True)
    ask("POST", f"{d}/upload", files={"file": ("bad.csv", "nope\n1\n", "text/csv")})
    assert up.status_code == 200, up.text[:500]
    for run_id in ids[:2]:
        ask("GET", f"{d}/runs/{run_id}", f"{d}/runs/{{run_id}}")
        ask("GET", f"{d}/api/runs/{run_id}", f"{d}/api/runs/{{run_id}}")
        ask("GET", f"{d}/runs/{run_id}/questions/q1", f"{d}/runs/{{run_id}}/questions/{{qid:path}}")
        for name in ("report.html", "summary.json", "questions.csv", "passages.csv", "calls.csv"):
            ask("GET", f"{d}/runs/{run_id}/files/{name}", f"{d}/runs/{{run_id}}/files/{{name}}")
    ask("GET", f"{d}/runs/nope", f"{d}/runs/{{run_id}}")
    if len(ids) > 1:
        ask("GET", f"{d}/compare?a={ids[0]}&b={ids[1]}", f"{d}/compare")


@pytest.mark.slow  # over 2 s: outside the fast subset (README)
@pytest.mark.parametrize("backend", ["scripted", "openai"])
def test_no_answer_of_any_route_holds_a_planted_secret(tmp_path, monkeypatch, backend):
    config = _planted(tmp_path, monkeypatch, backend)
    app = local_app(config)
    with TestClient(app, raise_server_exceptions=False) as client:
        ask = Recorder(client)
        _ask_every_route(ask, tmp_path)
    statuses = {(r.request.method, r.request.url.path): r.status_code for r in ask.responses}
    if backend == "openai":  # the endpoint is unreachable: the model routes fail, and say so
        assert statuses[("POST", "/generate")] == 502 and statuses[("POST", "/influence")] == 502
        assert statuses[("POST", "/interpretation")] == 502
    else:
        assert statuses[("POST", "/generate")] == 200 and statuses[("GET", "/presets/mine")] == 200
    assert statuses[("PUT", "/presets/small")] == 409
    served = {(m, r.path) for r in app.routes for m in getattr(r, "methods", ()) if m not in ("HEAD", "OPTIONS")}
    assert served <= ask.routes, f"routes this test does not ask: {sorted(served - ask.routes)}"
    assert ask.leaks() == []


def test_a_failing_endpoints_url_is_named_without_its_credentials(tmp_path, monkeypatch):
    config = _planted(tmp_path, monkeypatch, "openai")
    with TestClient(local_app(config), raise_server_exceptions=False) as client:
        r = client.post("/generate", headers=AUTH, json={"question": "Which ferry goes to Corran?"})
    assert r.status_code == 502
    assert "POST http://127.0.0.1:" in r.json()["error"] and "/v1/chat/completions" in r.json()["error"], r.text


def test_a_client_reads_back_its_own_settings_only(tmp_path, monkeypatch):
    config = _planted(tmp_path, monkeypatch, "scripted")
    with TestClient(local_app(config), raise_server_exceptions=False) as client:
        assert client.put("/presets/mine", headers=AUTH, json={"config": {"seed": 3}}).status_code == 200
        mine = client.get("/presets/mine", headers=AUTH).json()
        small = client.get("/presets/small", headers=AUTH).json()
    assert mine["settings"] == {"seed": 3}
    assert "generation.backend" not in small["settings"] and "cache.dir" not in small["settings"]
    assert small["settings"]["data.path"] == "mine"  # the served dataset, by its name


def test_the_served_dashboard_names_run_folders_not_paths(client):
    from tests.serving.test_attack_presets import _wait

    run_id = client.post("/runs", json={"command": "audit", "overrides": ["audit.k=1"]}).json()["run_id"]
    _wait(client, run_id)
    (entry,) = [e for e in client.get("/dashboard/api/runs").json() if e["id"] == run_id]
    assert entry["path"] == run_id and "/" not in entry["path"]


def test_names_are_redacted_as_whole_words_and_values_everywhere():
    from ragray.adapters.serving.secrets import Redactor

    config = load_config(None, ["serve.runs_dir=/srv/op/runs", "generation.openai.base_url=http://u:PW1234@h/v1?k=1"])
    r = Redactor.for_server([config], ["sekrit-key"])
    assert r.text("in /srv/op/runs/run-1, not /srv/op/runsx") == "in <path>/run-1, not /srv/op/runsx"
    assert r.text("sekrit-keyZ and xPW1234y") == "<secret>Z and x<secret>y"  # a value goes wherever it is
    assert r.text("POST http://u:PW1234@h/v1?k=1 failed") == "POST http://h/v1 failed"
    assert r.text("$OPENAI_API_KEY, not $OPENAI_API_KEYS") == "$<variable>, not $OPENAI_API_KEYS"
