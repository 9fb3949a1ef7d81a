"""One request takes the server: unbounded work from settings a client may set, and work nobody can stop.

Each attack below worked before the caps and the cancel: ``faithfulness.random_repeats=1000000000``
on a sentence-level interpret built every combination of units (93M: memory 2.2 -> 6.1 GB in 54 s,
``/health`` silent); 60 KB of YAML aliases became 200 MB in the run history; a run of any size
started; a client that gave up left its ``/influence`` running; no run could be cancelled; SIGTERM
left runs ``running`` in the history. Now each is refused before work starts (400 naming the key,
the value and the cap, or the cost and the limit), or stops within one model call.
"""

import json
import os
import signal
import socket
import subprocess
import sys
import threading
import time
from pathlib import Path

import httpx
import pytest
from fastapi.testclient import TestClient

from ragray.config import ServeConfig, load_config
from ragray.generation.scripted import ScriptedGenerator
from ragray.store.history import History
from ragray.adapters.serving.local import local_app

from tests.serving.conftest import DOCS

ROOT = Path(__file__).resolve().parents[2]
QUESTIONS = 8


class SlowScripted(ScriptedGenerator):
    """The scripted generator, ``delay`` seconds per prompt (a model answers one after another),
    counting the prompts it answers and when."""

    def __init__(self, delay: float) -> None:
        super().__init__()
        self.delay = delay
        self.answered: list[float] = []  # the time each prompt's answer was made
        self._lock = threading.Lock()

    def _wait(self, n: int) -> None:
        for _ in range(n):
            time.sleep(self.delay)
            with self._lock:
                self.answered.append(time.monotonic())

    def generate(self, prompts):
        self._wait(len(prompts))
        return super().generate(prompts)

    def logprobs(self, prompts, answers):
        self._wait(len(prompts))
        return super().logprobs(prompts, answers)


def _island(tmp_path, questions=QUESTIONS):
    rows = [{"id": f"q{i}", "question": f"Which ferry goes to Corran, {i}?", "answers": ["tern"],
             "passages": [{"id": pid, "text": text} for pid, text in DOCS]} for i in range(questions)]
    data = tmp_path / "island.jsonl"
    data.write_text("".join(json.dumps(r) + "\n" for r in rows), encoding="utf-8")
    return data


def _overrides(tmp_path, data):
    return [f"data.path={data}", "generation.backend=scripted", "metrics.embedding=false", "retrieval.top_k=4",
            "faithfulness.similarity=rouge_l", "faithfulness.measures=[rouge_l,exact_match]",
            "faithfulness.random_repeats=4", "faithfulness.k_values=[top-1]", "influence.mode=loo",
            f"serve.runs_dir={tmp_path / 'runs'}", f"serve.presets_dir={tmp_path / 'presets'}",
            "serve.max_top_k=6", f"history.url=sqlite:///{tmp_path / 'history.sqlite'}"]


@pytest.fixture()
def config(tmp_path, monkeypatch):
    monkeypatch.delenv("RAGRAY_API_KEY", raising=False)
    return load_config(None, _overrides(tmp_path, _island(tmp_path)))


@pytest.fixture()
def slow():
    return SlowScripted(delay=0.05)  # a question of the run: 5 prompts (4 passages, generate mode), 0.25 s


@pytest.fixture()
def client(config, slow):
    with TestClient(local_app(config, slow), raise_server_exceptions=False) as c:
        yield c


def _runs(config):
    return [r.id for r in History(config.history.url).list_runs(100, 0)]


# ------------------------------------------------------------------------------ caps on numbers


def test_a_billion_random_repeats_is_refused_in_under_a_second_naming_the_cap(client, config, slow):
    overrides = ["faithfulness.level=sentence", "faithfulness.random_repeats=1000000000", "data.limit=1"]
    start = time.monotonic()
    run = client.post("/runs", json={"command": "interpret", "overrides": overrides})
    one = client.post("/interpretation", json={"question": "ferry", "explanation_level": "sentence",
                                               "random_repeats": 1_000_000_000})
    assert time.monotonic() - start < 5.0  # 0.03 s here (both requests); before, it took memory for a minute
    for r in (run, one):
        assert r.status_code == 400, r.text
        error = r.json()["error"]
        assert "faithfulness.random_repeats=1000000000" in error and "cap of 200" in error, error
        assert "serve.limits.faithfulness.random_repeats" in error
    assert _runs(config) == [] and slow.answered == []


def _numeric_client_keys():
    """Every client setting whose type is a number, or a list of numbers (bools are not numbers)."""
    import types
    import typing

    from pydantic import BaseModel

    from ragray.config import ExperimentConfig
    from ragray.config_access import is_allowed

    def numeric(ann):
        args = typing.get_args(ann)
        if ann in (int, float):
            return True
        if typing.get_origin(ann) in (tuple, list):
            return bool(args) and all(numeric(a) for a in args if a is not Ellipsis)
        if typing.get_origin(ann) in (typing.Union, types.UnionType, typing.Annotated):
            return any(numeric(a) for a in args if a is not type(None))
        return False

    def walk(model, prefix):
        for name, info in model.model_fields.items():
            ann = info.annotation
            if isinstance(ann, type) and issubclass(ann, BaseModel):
                yield from walk(ann, f"{prefix}{name}.")
            elif numeric(ann):
                yield f"{prefix}{name}"

    return sorted(k for k in walk(ExperimentConfig, "") if is_allowed(k))


def _over(cap):
    """A value over ``cap`` (a :class:`ragray.config.limits.Cap` at its default) the schema accepts."""
    limit = int(cap.default) if cap.default is not None else 6  # retrieval.top_k: serve.max_top_k of the fixture
    if cap.measure == "entries":
        return [f"top-{i}" for i in range(1, limit + 2)]
    if cap.measure == "each":
        return [limit + 1]
    return limit + 1 if cap.default is None or float(cap.default).is_integer() else cap.default * 2


@pytest.mark.parametrize("key", ["faithfulness.k_values", *_numeric_client_keys()])
def test_each_cap_refuses_a_value_over_it_before_validation_and_names_key_value_and_cap(config, key):
    from ragray.config.limits import CAPS
    from ragray.config_access import ClientPolicy
    from ragray.errors import LimitError

    (cap,) = [c for c in CAPS if c.key == key]
    policy = ClientPolicy.for_server(config)
    value = _over(cap)
    with pytest.raises(LimitError) as caught:
        policy.apply_overrides(config, [f"{cap.key}={json.dumps(value)}"])
    message = str(caught.value)
    limit = policy.limits.caps[cap.key]
    shown = str(int(limit)) if float(limit).is_integer() else f"{limit:g}"
    assert cap.key in message and f"cap of {shown}:" in message, message
    if cap.measure == "value":
        assert f"={value!r}" in message
    # at the cap (or within it) the policy says nothing of caps
    within = (value[:-1] if cap.measure == "entries" else [limit] if cap.measure == "each"
              else type(value)(limit))
    try:
        policy.apply_overrides(config, [f"{cap.key}={json.dumps(within)}"])
    except LimitError as exc:
        pytest.fail(f"{cap.key}={within!r} is within the cap: {exc}")
    except Exception:  # noqa: BLE001 - another rule of the config (overlap < size ...): not a cap
        pass


def test_caps_hold_on_every_route_and_a_number_sent_as_text(client, config):
    refused = [
        client.post("/runs", json={"command": "run", "overrides": ["faithfulness.k_values=[top-1,top-2,top-3,top-4,"
                                                                     "top-5,top-6,top-7,top-8,top-9,top-10,top-11]"]}),
        client.post("/runs", json={"command": "run", "limit": 5000}),
        client.post("/runs", json={"command": "run", "overrides": ['faithfulness.max_units="100000"']}),
        client.post("/runs", json={"command": "run", "overrides": ["influence={check_top_k: [1, 500]}"]}),
        client.put("/presets/big", json={"config": {"generation": {"max_tokens": 100_000}}}),
        client.post("/interpretation", json={"question": "ferry", "k_values": [f"top-{i}" for i in range(1, 12)]}),
    ]
    keys = ["faithfulness.k_values", "data.limit", "faithfulness.max_units", "influence.check_top_k",
            "generation.max_tokens", "faithfulness.k_values"]
    for r, key in zip(refused, keys):
        assert r.status_code == 400 and key in r.json()["error"] and "cap of" in r.json()["error"], r.text
    assert _runs(config) == [] and client.get("/presets/big").status_code == 404


def test_an_operator_raises_a_cap_in_serve_limits(tmp_path):
    from ragray.config_access import ClientPolicy

    raised = load_config(None, ["serve.limits={faithfulness.random_repeats: 1000}"])
    assert ClientPolicy.for_server(raised).apply_overrides(
        raised, ["faithfulness.random_repeats=900"]).faithfulness.random_repeats == 900
    with pytest.raises(ValueError, match="serve.limits: no cap named faithfulness.repeats; valid: "):
        load_config(None, ["serve.limits.faithfulness.repeats=3"])
    with pytest.raises(ValueError, match="serve.limits: retrieval.top_k is capped by serve.max_top_k"):
        load_config(None, ["serve.limits.retrieval.top_k=3"])


def test_every_numeric_client_setting_has_a_cap_and_every_cap_a_client_setting():
    from ragray.config.limits import CAPS
    from ragray.config_access import is_allowed

    numeric = _numeric_client_keys()
    assert "faithfulness.random_repeats" in numeric and "influence.check_top_k" in numeric  # the walk works
    capped = {c.key for c in CAPS}
    assert not set(numeric) - capped, f"client settings without a cap: {sorted(set(numeric) - capped)}"
    assert all(is_allowed(k) for k in capped), [k for k in capped if not is_allowed(k)]
    assert len(capped) == len(CAPS)  # one cap per key


def test_the_docs_table_of_the_caps_is_the_generated_one():
    from ragray.config.limits import CAPS, limits_table

    page = (ROOT / "docs" / "serve.md").read_text(encoding="utf-8")
    assert limits_table() in page
    assert all(f"| `{c.key}` |" in page for c in CAPS)


# --------------------------------------------------------------------------- YAML aliases


def test_yaml_aliases_anchors_and_tags_in_an_override_are_refused_before_they_expand(client, config):
    anchor = "A" * 2000
    bomb = "retrieval.filters={genre: [&s " + anchor + ", " + ", ".join(["*s"] * 500) + "]}"
    assert len(bomb) < 5000  # 1 MB once expanded
    for override in (bomb, "name=&x mine", "faithfulness.random_repeats=!!int 5",
                     "generation.system_prompt=!!python/object/apply:os.system [true]"):
        r = client.post("/runs", json={"command": "run", "overrides": [override]})
        assert r.status_code == 400, (override[:40], r.text)
        assert "are not accepted" in r.json()["error"], r.text
    assert _runs(config) == []
    plain = client.post("/runs", json={"command": "audit", "overrides": ["retrieval.filters={genre: [a, b]}"]})
    assert plain.status_code == 202, plain.text


# --------------------------------------------------------------------------- the cost of a request


def test_a_run_over_max_calls_per_request_is_refused_with_its_cost(tmp_path, slow, monkeypatch):
    from ragray.pipeline.cost import command_cost

    monkeypatch.delenv("RAGRAY_API_KEY", raising=False)
    config = load_config(None, _overrides(tmp_path, _island(tmp_path)) + ["serve.max_calls_per_request=100"])
    with TestClient(local_app(config, slow), raise_server_exceptions=False) as c:
        r = c.post("/runs", json={"command": "interpret", "overrides": ["faithfulness.k_values=[top-1,top-2]"]})
        assert r.status_code == 400, r.text
        cost = command_cost(load_config(None, _overrides(tmp_path, tmp_path / "island.jsonl")
                                        + ["faithfulness.k_values=[top-1,top-2]"]), "interpret")
        assert cost.questions == QUESTIONS and cost.calls > 100
        error = r.json()["error"]
        assert f"{QUESTIONS} questions" in error and f"up to {cost.calls} model calls" in error, error
        assert "allows 100 per request (serve.max_calls_per_request)" in error
        small = c.post("/runs", json={"command": "interpret", "limit": 1})
        assert small.status_code == 202, small.text
        one = c.post("/influence", json={"question": "ferry", "top_k_docs": 6, "position_control": "shuffled",
                                         "mode": "logprob_share"})
        assert one.status_code == 200, one.text
        over = load_config(None, _overrides(tmp_path, tmp_path / "island.jsonl") + ["serve.max_calls_per_request=10"])
    with TestClient(local_app(over, slow), raise_server_exceptions=False) as c:
        r = c.post("/influence", json={"question": "ferry", "top_k_docs": 6, "position_control": "shuffled"})
        assert r.status_code == 400 and "this /influence request of 1 question" in r.json()["error"], r.text
        assert "up to 14 model calls" in r.json()["error"]  # 2 orders x (6 drop-one arms + the baseline)


# ---------------------------------------------------------------------------------- cancel


def _wait(client, run_id, until, timeout=30.0):
    deadline = time.monotonic() + timeout
    while not until(status := client.get(f"/runs/{run_id}").json()) and time.monotonic() < deadline:
        time.sleep(0.05)
    return status


def test_delete_cancels_a_run_in_progress_which_is_recorded_interrupted_and_resumes(client, config, slow):
    run_id = client.post("/runs", json={"command": "run"}).json()["run_id"]
    assert _wait(client, run_id, lambda s: s["questions_done"] >= 1)["status"] == "running"
    r = client.delete(f"/runs/{run_id}")
    assert r.status_code == 202, r.text
    asked = time.monotonic()
    status = _wait(client, run_id, lambda s: s["status"] != "running", timeout=10)
    # one call (a question's 5 prompts), then the record; the margin is for a loaded CI machine
    assert time.monotonic() - asked < 5 * slow.delay + 5.0
    assert status["status"] == "interrupted" and "DELETE" in status["error"], status
    assert 1 <= status["questions_done"] < QUESTIONS
    record = History(config.history.url).get_run(run_id)
    assert record.status == "interrupted" and record.finished_at is not None
    calls = len(slow.answered)
    time.sleep(10 * slow.delay)
    assert len(slow.answered) == calls  # no model call after it stopped
    assert client.delete(f"/runs/{run_id}").status_code == 409
    assert client.delete("/runs/nope").status_code == 404
    import ragray

    out = Path(config.serve.runs_dir) / status["out"]  # GET /runs names the folder, under serve.runs_dir
    kept = (out / "progress.jsonl").read_text().splitlines()
    assert len(kept) == status["questions_done"]
    resumed = ragray.run(config=config, out=out, resume=True, progress=False, model=ScriptedGenerator())
    assert resumed.summary["n_questions"] == QUESTIONS
    assert (out / "progress.jsonl").read_text().splitlines()[:len(kept)] == kept  # the finished ones kept


def test_a_finished_run_cannot_be_cancelled(client):
    run_id = client.post("/runs", json={"command": "audit"}).json()["run_id"]
    assert _wait(client, run_id, lambda s: s["status"] != "running")["status"] == "done"
    r = client.delete(f"/runs/{run_id}")
    assert r.status_code == 409 and "already done" in r.json()["error"]


def _free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@pytest.fixture()
def live(tmp_path, monkeypatch):
    """A real uvicorn server in this process over a slow scripted generator, one prompt per call."""
    import uvicorn

    monkeypatch.delenv("RAGRAY_API_KEY", raising=False)
    extra = ["serve.max_prompts_per_call=1"] if "max_prompts_per_call" in ServeConfig.model_fields else []
    config = load_config(None, _overrides(tmp_path, _island(tmp_path)) + extra)
    gen = SlowScripted(delay=0.25)
    port = _free_port()
    server = uvicorn.Server(uvicorn.Config(local_app(config, gen), host="127.0.0.1", port=port, log_level="warning"))
    thread = threading.Thread(target=server.run, daemon=True)
    thread.start()
    deadline = time.monotonic() + 30
    while not server.started and time.monotonic() < deadline:
        time.sleep(0.05)
    yield f"http://127.0.0.1:{port}", gen
    server.should_exit = True
    thread.join(20)


@pytest.mark.parametrize("path, body", [
    ("/influence", {"question": "ferry", "top_k_docs": 6, "mode": "loo"}),  # 7 prompts
    ("/interpretation", {"question": "ferry", "top_k_docs": 6}),
])
@pytest.mark.slow  # over 2 s: outside the fast subset (README)
def test_a_disconnected_request_stops_making_model_calls(live, path, body):
    url, gen = live
    gen.delay = 1.0  # 7 prompts: 7 s of model, the client leaves after 0.5 s
    with pytest.raises(httpx.ReadTimeout):
        httpx.post(url + path, json=body, timeout=0.5)  # the client gives up, closing its connection
    # no timing is asserted (a loaded machine notices the disconnect later): the work stops before
    # its end, and once stopped makes no further call; the old code answered all 7 prompts
    time.sleep(4 * gen.delay)
    settled = len(gen.answered)
    time.sleep(5 * gen.delay)
    assert len(gen.answered) == settled, "model calls went on after the client left"
    assert settled < 7, f"{settled} of 7 prompts answered: the work ran to its end"
    assert httpx.get(url + "/health", timeout=5).status_code == 200


@pytest.mark.slow  # over 2 s: outside the fast subset (README)
def test_another_clients_generate_waits_one_call_of_a_long_influence_not_all_of_it(live):
    url, gen = live
    gen.delay = 0.5
    long = threading.Thread(target=lambda: httpx.post(url + "/influence", timeout=60, json={
        "question": "ferry", "top_k_docs": 6, "mode": "loo"}))  # 7 prompts: 3.5 s of model
    long.start()
    while not gen.answered:  # the influence holds the model
        time.sleep(0.05)
    r = httpx.post(url + "/generate", json={"question": "q", "passages": ["ANSWER=skua"]}, timeout=60)
    answered = time.monotonic()
    long.join(60)
    assert r.json()["answer"] == "skua"
    # an order, not a time: the influence still had calls to make when /generate was answered
    # (one 7-prompt call, before, held the model to its end)
    assert any(t > answered for t in gen.answered), "/generate waited for the whole /influence"


def test_the_shared_model_goes_round_in_turns_not_to_whoever_just_had_it():
    """A request calling the model call after call (A) lets one waiting since A's first call (B) in
    next; a plain lock goes back to A every time (B waited all 200 calls here)."""
    from ragray.adapters.serving.components import LockedGenerator

    lock = LockedGenerator(ScriptedGenerator())._lock
    order: list[str] = []

    def waiting():
        with lock:
            order.append("B")

    with lock:
        b = threading.Thread(target=waiting)
        b.start()
        time.sleep(0.1)  # B waits
        order.append("A0")
    for i in range(1, 200):
        with lock:
            order.append(f"A{i}")
    b.join(10)
    assert order.index("B") == 1, order[:5]


def test_cancelled_calls_merged_across_questions_stop_every_question():
    """With questions in flight their calls are merged into one: a cancel stops every question, none hangs."""
    from ragray.cancel import Cancelled, CancelToken
    from ragray.generation.base import Message
    from ragray.generation.cancellable import CancellableGenerator
    from ragray.pipeline.in_flight import InFlight

    token = CancelToken()
    flight = InFlight(CancellableGenerator(ScriptedGenerator(), token), 3)

    def question(i):
        if i == 1:
            token.cancel("cancelled by the test")
        return flight.backend.generate([(Message("user", f"ANSWER=a{i}"),)])

    stopped: list[BaseException] = []
    done = threading.Event()

    def drain():
        try:
            list(flight.run(range(3), question))
        except Cancelled as exc:
            stopped.append(exc)
        finally:
            done.set()

    threading.Thread(target=drain, daemon=True).start()
    assert done.wait(10), "questions waiting on a cancelled merged call hang"
    assert stopped and "cancelled by the test" in str(stopped[0])


# --------------------------------------------------------------------------------- SIGTERM

SLOWED_SERVE = """
import sys, time
from ragray.generation.scripted import ScriptedGenerator
answer = ScriptedGenerator.generate
def slowly(self, prompts):
    time.sleep(0.3)
    return answer(self, prompts)
ScriptedGenerator.generate = slowly
from ragray.adapters.cli import main
sys.exit(main(sys.argv[1:]))
"""


@pytest.mark.slow
@pytest.mark.timeout(120)
def test_sigterm_stops_ragray_serve_no_ray_within_the_bound_and_records_its_run_interrupted(tmp_path):
    data = _island(tmp_path, questions=40)
    port = _free_port()
    history = f"sqlite:///{tmp_path / 'history.sqlite'}"
    sets = [a for o in _overrides(tmp_path, data) for a in ("--set", o)]
    env = {k: v for k, v in os.environ.items() if k != "RAGRAY_API_KEY"} | {
        "HF_HUB_OFFLINE": "1", "TRANSFORMERS_OFFLINE": "1", "PYTHONPATH": str(ROOT)}
    log = open(tmp_path / "log", "wb")  # noqa: SIM115 - closed below
    proc = subprocess.Popen([sys.executable, "-c", SLOWED_SERVE, "serve", "--no-ray", "--port", str(port), *sets],
                            cwd=tmp_path, env=env, stdout=log, stderr=subprocess.STDOUT)
    try:
        url = f"http://127.0.0.1:{port}"
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline:
            assert proc.poll() is None, (tmp_path / "log").read_text()[-3000:]
            try:
                if httpx.get(url + "/health", timeout=2).status_code == 200:
                    break
            except httpx.HTTPError:
                time.sleep(0.2)
        run_id = httpx.post(url + "/runs", json={"command": "run"}, timeout=10).json()["run_id"]
        while httpx.get(f"{url}/runs/{run_id}", timeout=5).json()["questions_done"] < 1:
            time.sleep(0.1)
        proc.send_signal(signal.SIGTERM)
        sent = time.monotonic()
        proc.wait(timeout=30)
        took = time.monotonic() - sent
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait(10)
        log.close()
    assert took < 5.0 + 0.3 + 10.0, f"{took:.1f} s"  # serve.stop_timeout_s + one call + the exit (+ a loaded CI)
    record = History(history).get_run(run_id)
    assert record.status == "interrupted" and record.finished_at is not None, (record, (tmp_path / "log").read_text())
    assert "the server" in (record.error or ""), record.error
    assert record.finished_at.timestamp() - record.started_at.timestamp() < 60
