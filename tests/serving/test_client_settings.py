"""The HTTP API as an attacker on loopback would use it: a client sets only what a client may set.

Each attack below worked on the server before ragray.config_access (issue 42): the server called
a URL of the client's choosing with one of its environment variables as the bearer token, read
a file of the client's choosing into a run, created folders where the client said, and tried to
load a folder as a model. Now each is a 403 that names the key, and leaves no trace.
"""

import json
import socket
import threading
import time

import pytest
from fastapi.testclient import TestClient

from ragray.config import load_config
from ragray.config_access import CLIENT_SETTINGS, ClientPolicy, changed_settings, flatten, is_allowed
from ragray.config_paths import DATA_PATH_KEYS, MODEL_PATH_KEYS
from ragray.errors import ConfigError, NotAllowedError
from ragray.adapters.serving.local import local_app
from ragray.store.history import History


class Listener:
    """A TCP listener on a free loopback port that records every connection it accepts."""

    def __init__(self) -> None:
        self.sock = socket.socket()
        self.sock.bind(("127.0.0.1", 0))
        self.sock.listen(8)
        self.sock.settimeout(0.2)
        self.port = self.sock.getsockname()[1]
        self.received: list[bytes] = []
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._serve, daemon=True)
        self._thread.start()

    def _serve(self) -> None:
        while not self._stop.is_set():
            try:
                conn, _ = self.sock.accept()
            except OSError:
                continue
            with conn:
                conn.settimeout(1)
                try:
                    self.received.append(conn.recv(65536))
                except OSError:
                    self.received.append(b"")

    def close(self) -> None:
        self._stop.set()
        self._thread.join(2)
        self.sock.close()


@pytest.fixture()
def listener():
    got = Listener()
    yield got
    got.close()


@pytest.fixture()
def secret_file(tmp_path):
    """A questions file outside the server's runs folder, with a marker no served data has."""
    path = tmp_path / "outside" / "private.jsonl"
    path.parent.mkdir()
    row = {"id": "leak", "question": "What is the launch code SECRET-7731?", "answers": ["x"],
           "passages": [{"id": "p", "text": "The launch code is SECRET-7731."}]}
    path.write_text(json.dumps(row) + "\n", encoding="utf-8")
    return path


@pytest.fixture()
def client(served_config):
    with TestClient(local_app(served_config), raise_server_exceptions=False) as c:
        yield c


def attacks(listener_port: int, secret: str, target: str, model_dir: str) -> dict[str, list[str]]:
    """Issue 42's four requests, as ``POST /runs`` overrides: the key each must be refused on."""
    return {
        "generation.backend": ["generation.backend=openai",
                               f"generation.openai.base_url=http://127.0.0.1:{listener_port}/v1",
                               "generation.openai.api_key_env=HOME", "generation.model=gpt"],
        "data.path": [f"data.path={secret}"],
        "cache.dir": [f"cache.dir={target}"],
        "generation.model": [f"generation.model={model_dir}"],
    }


def _no_trace(client, served_config, before_runs):
    history = History(served_config.history.url)
    assert [r.id for r in history.list_runs(100, 0)] == before_runs
    runs = client.get("/runs").json()
    assert [r["run_id"] for r in runs] == before_runs


@pytest.fixture()
def no_model_loads(monkeypatch):
    """Every model loader ragray uses, replaced by one that records the attempt."""
    import transformers

    from ragray import encoders

    attempts = []

    def record(*args, **kwargs):
        attempts.append(args)
        raise AssertionError(f"a model load was attempted: {args}")

    for cls in (transformers.AutoModelForCausalLM, transformers.AutoTokenizer):
        monkeypatch.setattr(cls, "from_pretrained", record)
    monkeypatch.setattr(encoders, "_load_sentence_transformer", record)
    return attempts


def test_the_four_attacks_of_issue_42_get_403_and_leave_no_trace(client, served_config, listener, secret_file,
                                                                 tmp_path, no_model_loads):
    target = tmp_path / "written-here"
    model_dir = tmp_path / "not-a-model"
    model_dir.mkdir()
    (model_dir / "config.json").write_text("{}")
    before = [r["run_id"] for r in client.get("/runs").json()]
    for key, overrides in attacks(listener.port, str(secret_file), str(target), str(model_dir)).items():
        for command in ("run", "interpret", "audit"):
            r = client.post("/runs", json={"command": command, "limit": 1, "overrides": overrides})
            assert r.status_code == 403, (key, r.text)
            error = r.json()["error"]
            assert key in error and "a client may set" in error or "dataset this server offers" in error, error
    for key, overrides in {"retrieval.dense.model": ["retrieval.retriever=dense", f"retrieval.dense.model={model_dir}"],
                           "rerank.model": ["rerank.strategy=cross_encoder", f"rerank.model={model_dir}"],
                           "metrics.encoder": [f"metrics.encoder={model_dir}"]}.items():
        r = client.post("/runs", json={"command": "run", "overrides": overrides})
        assert r.status_code == 403 and key.split(".")[0] in r.json()["error"], r.text
    time.sleep(0.5)  # a connection, had one been made, reaches the listener
    assert listener.received == []
    assert not target.exists()
    assert no_model_loads == []
    _no_trace(client, served_config, before)
    assert "SECRET-7731" not in client.get("/dashboard/").text


def test_the_same_attacks_through_a_preset_get_403_and_save_nothing(client, listener, secret_file, tmp_path):
    bodies = {
        "generation.openai.base_url": {"generation": {"backend": "openai", "openai": {
            "base_url": f"http://127.0.0.1:{listener.port}/v1", "api_key_env": "HOME"}}},
        "data.path": {"data": {"path": str(secret_file)}},
        "cache.dir": {"cache": {"dir": str(tmp_path / "written-here")}},
        "generation.model": {"generation": {"model": str(tmp_path)}},
        "history.url": {"history": {"url": f"sqlite:///{tmp_path / 'other.sqlite'}"}},
        "serve.runs_dir": {"serve": {"runs_dir": str(tmp_path)}},
    }
    for key, config in bodies.items():
        r = client.put("/presets/evil", json={"config": config})
        assert r.status_code == 403, (key, r.text)
        assert client.get("/presets/evil").status_code == 404
    assert listener.received == [] and not (tmp_path / "written-here").exists()


def test_a_client_may_set_what_the_list_allows_and_restate_the_operators_values(client, served_config):
    ok = client.put("/presets/mine", json={"config": {
        "influence": {"mode": "logprob_share", "used_threshold": 0.5}, "retrieval": {"top_k": 2},
        "data": {"path": "demo", "limit": 1}, "generation": {"seed": 3, "backend": "scripted"}}})
    assert ok.status_code == 200, ok.text
    saved = client.get("/presets/mine").json()
    # what a client reads back is its own choices (the operator's restated backend changed nothing)
    assert saved["source"] == "db" and saved["settings"] == {
        "influence.mode": "logprob_share", "influence.used_threshold": 0.5, "retrieval.top_k": 2,
        "data.path": "demo", "data.limit": 1, "generation.seed": 3}


def test_a_database_preset_holding_operator_settings_is_refused_when_run(client, served_config, tmp_path):
    """A preset written straight into the database (e.g. before this policy) still cannot carry an
    operator's setting into a client's run."""
    evil = served_config.model_copy(update={"cache": served_config.cache.model_copy(
        update={"dir": str(tmp_path / "elsewhere")})})
    History(served_config.history.url).save_preset("old", evil)
    r = client.post("/runs", json={"command": "run", "preset": "old"})
    assert r.status_code == 403 and "cache.dir" in r.json()["error"], r.text
    assert not (tmp_path / "elsewhere").exists()


@pytest.mark.parametrize("override", [
    "retrieval={dense: {model: /tmp}}", "generation={openai: {api_key_env: HOME}}", " generation.model =/tmp",
    "serve.presets_dir=/", "execution.address=ray://10.0.0.1:10001", "generation.device=cuda:7",
    "history.url=sqlite:////tmp/x.sqlite", "chunking.tokenizer=/tmp", "data.corpus=/etc/hosts",
    "data.split=../../etc", "serve.client_settings=[cache]", "name=../../escape",
])
def test_operator_settings_are_refused_however_they_are_spelt(client, override):
    r = client.post("/runs", json={"command": "run", "overrides": [override]})
    assert r.status_code in (400, 403), r.text
    assert r.status_code == 403 or "name must be" in r.json()["error"]


def test_unknown_keys_are_400_not_403(client):
    r = client.post("/runs", json={"command": "run", "overrides": ["influence.mood=logprob"]})
    assert r.status_code == 400 and "influence.mood: unknown key" in r.json()["error"]


# ------------------------------------------------------------------------------- the policy


def test_the_client_list_names_real_settings_and_no_path_model_endpoint_or_key():
    config = load_config(None)
    keys = flatten(config)
    for allowed in CLIENT_SETTINGS:
        assert allowed in keys or any(k.startswith(allowed + ".") for k in keys), allowed
    operator = [*MODEL_PATH_KEYS, *(k for k in DATA_PATH_KEYS if k != "data.path")]
    words = ("url", "dir", "_env", "model", "device", "backend", "address", "tokenizer", "encoder", "serve.",
             "history.", "cache.", "execution.")
    for key in keys:
        if any(w in key for w in words) or key in operator:
            assert not is_allowed(key), key


def test_the_second_gate_refuses_any_operator_change_whatever_the_route():
    base = load_config(None)
    policy = ClientPolicy.for_server(base)
    changed = load_config(None, ["generation.openai.base_url=http://x/v1"])
    assert changed_settings(base, changed) == ["generation.openai.base_url"]
    with pytest.raises(NotAllowedError, match="generation.openai.base_url is the server operator's setting"):
        policy.check(base, changed)
    policy.check(base, load_config(None, ["influence.mode=logprob_share", "data.path=squad"]))


def test_an_operator_may_offer_datasets_by_name_and_narrow_the_list(tmp_path):
    base = load_config(None, [f"serve.datasets={{mine: {tmp_path / 'q.jsonl'}}}", "serve.client_settings=[data.limit]"])
    policy = ClientPolicy.for_server(base)
    with pytest.raises(NotAllowedError, match="data.path is the server operator's setting"):
        policy.apply_overrides(base, ["data.path=mine"])
    wide = ClientPolicy.for_server(load_config(None, [f"serve.datasets={{mine: {tmp_path / 'q.jsonl'}}}"]))
    assert wide.apply_overrides(base, ["data.path=mine"]).data.path == str(tmp_path / "q.jsonl")
    assert policy.apply_overrides(base, ["data.limit=2"]).data.limit == 2
    with pytest.raises(ConfigError, match="valid: .*data.limit|unknown key"):
        ClientPolicy.for_server(load_config(None, ["serve.client_settings=[nope.x]"]))


# ------------------------------------------------------------------- every setting, fuzzed

from hypothesis import HealthCheck, given, settings  # noqa: E402
from hypothesis import strategies as st  # noqa: E402

SERVED_KEYS = sorted(flatten(load_config(None)))
VALUES = st.one_of(st.none(), st.booleans(), st.integers(-3, 300), st.floats(-1, 2, allow_nan=False),
                   st.text(max_size=12), st.sampled_from(["/tmp", "demo", "http://127.0.0.1:9/v1", "HOME", "cuda"]))


def _nested(key, value):
    out = value
    for part in reversed(key.split(".")):
        out = {part: out}
    return out


@settings(max_examples=150, deadline=None, derandomize=True,
          suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(key=st.sampled_from(SERVED_KEYS), value=VALUES, how=st.sampled_from(["preset", "run"]))
def test_any_setting_with_any_value_is_allowed_refused_or_invalid_never_a_500(client, served_config, key, value,
                                                                              how):
    served = flatten(served_config)
    if how == "preset":
        r = client.put("/presets/fuzz", json={"config": _nested(key, value)})
    else:  # a run that would start is not started: only refusals are sent as runs
        if is_allowed(key) or served[key] == value:
            return
        r = client.post("/runs", json={"command": "run", "overrides": [f"{key}={json.dumps(value)}"]})
    assert r.status_code in (200, 400, 403), (key, value, r.status_code, r.text)
    changes = value != served[key]
    if not is_allowed(key) and changes and r.status_code != 400:
        assert r.status_code == 403 and key in r.json()["error"], (key, value, r.text)
    if r.status_code == 200:
        saved = client.get("/presets/fuzz").json()["settings"]
        assert all(is_allowed(k) for k in saved), (key, value)
