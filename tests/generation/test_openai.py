"""The OpenAI-compatible backend: retries, backoff and error records against a scripted loopback
server; the generator contract against a real vLLM OpenAI-compatible server (slow).

Everything talks to 127.0.0.1 only; every wait is bounded (client timeouts of a fraction of a
second, retry delays recorded instead of slept where the test is about their length).
"""

from __future__ import annotations

import json
import math
import re
import os
import signal
import socket
import subprocess
import sys
import threading
import time
from dataclasses import dataclass, field
from datetime import datetime, timedelta, timezone
from email.utils import format_datetime
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import pytest

from ragray.config import GenerationConfig, OpenAIConfig
from ragray.errors import BackendError, ConfigError
from ragray.generation import build_generator
from ragray.generation.base import Message
from ragray.generation.openai_compat import MAX_RETRY_AFTER_S, OpenAIGenerator, parse_retry_after
from tests.generation.contract import FACT, NOISE, QUESTION, TEMPLATE, check_contract

KEY_ENV = "RAGRAY_TEST_OPENAI_KEY"


# -- a scripted OpenAI-compatible server on loopback ---------------------------------------------


@dataclass
class Reply:
    status: int = 200
    body: Any = None  # None: a normal answer for the route; str: sent as-is
    headers: dict[str, str] = field(default_factory=dict)
    delay_s: float = 0.0
    gate: int = 0  # hold the reply until this many requests have been in flight at once (10 s cap)


class FakeServer:
    """Replies are scripted per key (a chat request's last message, or ``"completions"``): each
    request takes the next reply of its key, the last one repeating. Requests are recorded."""

    def __init__(self) -> None:
        self.script: dict[str, list[Reply]] = {}
        self.requests: list[tuple[str, dict[str, str], dict[str, Any]]] = []
        self.in_flight = self.max_in_flight = 0
        self.lock = threading.Lock()
        self.changed = threading.Condition(self.lock)
        fake = self

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, *args: Any) -> None:  # keep pytest output clean
                pass

            def do_POST(self) -> None:
                payload = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
                fake.handle(self, payload)

        self.httpd = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.httpd.daemon_threads = True
        self.url = f"http://127.0.0.1:{self.httpd.server_address[1]}/v1"
        # a short poll: shutdown() waits for it (0.5 s by default, in each of the module's tests)
        self.thread = threading.Thread(target=self.httpd.serve_forever, kwargs={"poll_interval": 0.02}, daemon=True)
        self.thread.start()

    def handle(self, handler: BaseHTTPRequestHandler, payload: dict[str, Any]) -> None:
        route = "chat" if handler.path.endswith("/chat/completions") else "completions"
        key = "completions" if route == "completions" else payload["messages"][-1]["content"]
        with self.lock:
            self.requests.append((handler.path, dict(handler.headers), payload))
            replies = self.script.get(key, [Reply()])
            reply = replies.pop(0) if len(replies) > 1 else replies[0]
            self.in_flight += 1
            self.max_in_flight = max(self.max_in_flight, self.in_flight)
            self.changed.notify_all()
            self.changed.wait_for(lambda: self.max_in_flight >= reply.gate, timeout=10.0)
        try:
            time.sleep(reply.delay_s)
            body = reply.body if reply.body is not None else self.answer(route, key, payload)
            data = body.encode() if isinstance(body, str) else json.dumps(body).encode()
            handler.send_response(reply.status)
            for name, value in {"Content-Type": "application/json", **reply.headers}.items():
                handler.send_header(name, value)
            handler.send_header("Content-Length", str(len(data)))
            handler.end_headers()
            handler.wfile.write(data)
        except OSError:
            pass  # the client gave up (timeout) and closed the connection
        finally:
            with self.lock:
                self.in_flight -= 1

    @staticmethod
    def answer(route: str, key: str, payload: dict[str, Any]) -> dict[str, Any]:
        if route == "completions":  # echo: logprob of prompt token k is -k/100, then a sampled one
            n = len(payload["prompt"])
            rows = [None] + [-k / 100 for k in range(1, n)] + [-9.0]
            return {"choices": [{"text": "", "logprobs": {"token_logprobs": rows}}]}
        return {
            "choices": [{"message": {"role": "assistant", "content": f" answer to {key}\n"}}],
            "usage": {"prompt_tokens": 7, "completion_tokens": 3},
        }

    def count(self, key: str) -> int:
        return sum(1 for _, _, p in self.requests if "messages" in p and p["messages"][-1]["content"] == key)

    def close(self) -> None:
        self.httpd.shutdown()
        self.httpd.server_close()


@pytest.fixture
def server():
    fake = FakeServer()
    yield fake
    fake.close()


def _config(url: str, **openai: Any) -> GenerationConfig:
    options = {"base_url": url, "api_key_env": KEY_ENV, "max_retries": 2, "backoff_s": 0.05,
               "timeout_s": 2.0, "concurrency": 3, **openai}
    return GenerationConfig(backend="openai", model="fake-model", seed=7, max_tokens=9,
                            openai=OpenAIConfig(**options))


@pytest.fixture
def make_gen(monkeypatch):
    """Build generators whose retry delays are recorded in ``.slept`` instead of slept."""
    monkeypatch.delenv(KEY_ENV, raising=False)
    made: list[OpenAIGenerator] = []

    def make(url: str, **openai: Any) -> OpenAIGenerator:
        slept: list[float] = []
        gen = OpenAIGenerator(_config(url, **openai), sleep=slept.append)
        gen.slept = slept  # type: ignore[attr-defined]
        made.append(gen)
        return gen

    yield make
    for gen in made:
        gen.close()


def ask(key: str) -> tuple[Message, ...]:
    return (Message("system", "be brief"), Message("user", key))


# -- retries, backoff, error records ---------------------------------------------------------------


def test_answers_usage_payload_and_registry(server, make_gen):
    gen = make_gen(server.url)
    out = gen.generate([ask("a"), ask("b")])
    assert [g.text for g in out] == ["answer to a", "answer to b"]
    assert all(g.ok and g.prompt_tokens == 7 and g.completion_tokens == 3 and g.latency_s >= 0 for g in out)
    path, headers, payload = next(r for r in server.requests if r[2]["messages"][-1]["content"] == "b")
    assert path == "/v1/chat/completions"
    assert payload == {"model": "fake-model", "messages": [{"role": "system", "content": "be brief"},
                       {"role": "user", "content": "b"}], "temperature": 0.0, "max_tokens": 9, "seed": 8}
    assert "authorization" not in {k.lower() for k in headers}
    assert gen.generate([]) == []
    assert isinstance(build_generator(_config(server.url)), OpenAIGenerator)


def test_500_then_200_is_retried_after_the_backoff(server, make_gen):
    server.script["flaky"] = [Reply(500, {"error": {"message": "boom"}}), Reply()]
    gen = make_gen(server.url)
    (out,) = gen.generate([ask("flaky")])
    assert out.ok and out.text == "answer to flaky"
    assert server.count("flaky") == 2 and gen.slept == [0.05]


def test_429_waits_what_retry_after_asks(server, make_gen):
    server.script["busy"] = [Reply(429, {"error": {"message": "slow down"}}, {"Retry-After": "3"}), Reply()]
    gen = make_gen(server.url)
    (out,) = gen.generate([ask("busy")])
    assert out.ok and gen.slept == [3.0]


def test_always_503_records_the_error_after_max_retries_with_doubling_backoff(server, make_gen):
    server.script["down"] = [Reply(503, {"error": {"message": "overloaded"}})]
    gen = make_gen(server.url)
    out = gen.generate([ask("ok"), ask("down")])
    assert out[0].ok
    failed = out[1]
    assert not failed.ok and failed.text == "" and failed.completion_tokens == 0
    assert "HTTP 503" in failed.error and "overloaded" in failed.error
    assert "gave up after 3 attempts" in failed.error and "/v1/chat/completions" in failed.error
    assert server.count("down") == 3 and gen.slept == [0.05, 0.1]


def test_400_is_not_retried_and_is_recorded(server, make_gen):
    server.script["bad"] = [Reply(400, {"error": {"message": "max_tokens is too large"}})]
    gen = make_gen(server.url)
    (out,) = gen.generate([ask("bad")])
    assert out.error and "HTTP 400" in out.error and "max_tokens is too large" in out.error
    assert "not retried; 1 attempt" in out.error
    assert server.count("bad") == 1 and gen.slept == []


def test_timeouts_are_retried_then_recorded(server, make_gen):
    server.script["slow-once"] = [Reply(delay_s=1.0), Reply()]
    server.script["slow"] = [Reply(delay_s=1.0)]
    gen = make_gen(server.url, timeout_s=0.25, max_retries=1)
    began = time.perf_counter()
    once, always = gen.generate([ask("slow-once"), ask("slow")])
    assert time.perf_counter() - began < 5
    assert once.ok and once.text == "answer to slow-once"
    assert always.error and "timed out" in always.error and "gave up after 2 attempts" in always.error


def test_connection_errors_are_retried_then_recorded(make_gen):
    with socket.socket() as sock:  # a loopback port with nothing listening
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    gen = make_gen(f"http://127.0.0.1:{port}/v1")
    (out,) = gen.generate([ask("x")])
    assert out.error and "connection error" in out.error and "gave up after 3 attempts" in out.error
    assert gen.slept == [0.05, 0.1]


def test_invalid_json_body_is_recorded(server, make_gen):
    server.script["garbled"] = [Reply(200, "<html>proxy error</html>")]
    (out,) = make_gen(server.url).generate([ask("garbled")])
    assert out.error and "not JSON" in out.error


def test_bearer_key_from_the_configured_env_var(server, make_gen, monkeypatch):
    monkeypatch.setenv(KEY_ENV, "sk-test-123")
    make_gen(server.url).generate([ask("k")])
    assert server.requests[-1][1].get("Authorization") == "Bearer sk-test-123"


def test_requests_run_concurrently_and_keep_their_order(server, make_gen):
    keys = [f"q{i}" for i in range(6)]
    for i, key in enumerate(keys):  # later prompts answer sooner; the first three meet at a gate,
        # so a loaded machine cannot make three concurrent requests look sequential
        server.script[key] = [Reply(delay_s=0.3 - 0.05 * i, gate=3 if i < 3 else 0)]
    gen = make_gen(server.url, concurrency=3, timeout_s=15.0)  # outlasts the gate's 10 s cap
    out = gen.generate([ask(k) for k in keys])
    assert [g.text for g in out] == [f"answer to {k}" for k in keys]
    assert server.max_in_flight == 3
    seeds = sorted(p["seed"] for _, _, p in server.requests)
    assert seeds == [7 + i for i in range(6)]


@pytest.mark.parametrize("url", ["127.0.0.1:8000/v1", "ftp://host/v1", "http:///v1", "http://h:99999/v1"])
def test_invalid_base_url_is_a_config_error(url):
    with pytest.raises(ConfigError, match="generation.openai.base_url must be an http"):
        OpenAIGenerator(_config(url))


def test_closed_generator_refuses_work(server, make_gen):
    gen = make_gen(server.url)
    gen.close()
    gen.close()
    with pytest.raises(BackendError, match="closed"):
        gen.generate([ask("x")])


def test_parse_retry_after():
    now = datetime(2026, 1, 1, tzinfo=timezone.utc)
    assert parse_retry_after("3") == 3.0
    assert parse_retry_after("0.5") == 0.5
    assert parse_retry_after("-4") == 0.0
    assert parse_retry_after("100000") == MAX_RETRY_AFTER_S
    assert parse_retry_after(format_datetime(now + timedelta(seconds=12), usegmt=True), now) == 12.0
    assert parse_retry_after("soon") is None and parse_retry_after(None) is None


# -- scoring ----------------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def smollm2_tokenizer():
    transformers = pytest.importorskip("transformers")
    from ragray.generation.packaged import resolve_generator_model

    return transformers.AutoTokenizer.from_pretrained(resolve_generator_model("smollm2"))


def test_score_sums_the_answer_tokens_of_an_echoed_prompt(server, make_gen, smollm2_tokenizer):
    gen = make_gen(server.url, tokenizer="smollm2")
    prompt = TEMPLATE.build(QUESTION, [NOISE[0], FACT])
    messages = [{"role": m.role, "content": m.content} for m in prompt]
    n_prompt = len(smollm2_tokenizer.apply_chat_template(
        messages, add_generation_prompt=True, tokenize=True, return_dict=True)["input_ids"])
    # "4417" is four digit tokens at positions n_prompt .. n_prompt + 3, each of logprob -k/100
    score, empty = gen.logprobs([prompt, prompt], ["4417", ""])
    assert empty == 0.0
    assert score == pytest.approx(-sum(k / 100 for k in range(n_prompt, n_prompt + 4)))
    (request,) = [p for path, _, p in server.requests if path == "/v1/completions"]
    assert request["echo"] is True and request["max_tokens"] == 1 and request["model"] == "fake-model"
    assert len(request["prompt"]) == n_prompt + 4 and request["logprobs"] >= 0


@pytest.mark.parametrize(
    ("reply", "match"),
    [
        (Reply(404, {"error": {"message": "Not Found"}}), "this endpoint cannot score log-probabilities"),
        (Reply(200, {"choices": [{"text": "x", "logprobs": None}]}), "cannot score log-probabilities"),
        (Reply(400, {"error": {"message": "maximum context length is 2048"}}), "score: .*HTTP 400.*2048"),
    ],
)
def test_score_raises_when_the_endpoint_cannot_score(server, make_gen, smollm2_tokenizer, reply, match):
    server.script["completions"] = [reply]
    gen = make_gen(server.url, tokenizer="smollm2")
    with pytest.raises(BackendError, match=match):
        gen.logprobs([ask("q")], ["yes"])


def test_score_of_a_request_that_keeps_failing_is_nan(server, make_gen, smollm2_tokenizer):
    server.script["completions"] = [Reply(503, {"error": {"message": "overloaded"}})]
    gen = make_gen(server.url, tokenizer="smollm2")
    assert math.isnan(gen.logprobs([ask("q")], ["yes"])[0])


def test_score_without_a_local_tokenizer_says_what_to_set(server, make_gen):
    gen = make_gen(server.url)  # "fake-model": no local folder, packaged model or (offline) hub id
    with pytest.raises(BackendError, match="set generation.openai.tokenizer"):
        gen.logprobs([ask("q")], ["yes"])


def test_scoring_problem_probes_the_endpoint_once(server, make_gen, smollm2_tokenizer):
    gen = make_gen(server.url, tokenizer="smollm2")
    assert gen.scoring_problem() is None and gen.scoring_problem() is None
    assert sum(path == "/v1/completions" for path, _, _ in server.requests) == 1


@pytest.mark.parametrize(
    ("reply", "match"),
    [
        (Reply(404, {"error": {"message": "Not Found"}}), "cannot score log-probabilities: POST .*HTTP 404"),
        (Reply(200, {"choices": [{"text": "x", "logprobs": None}]}), "returned no prompt log-probabilities"),
        (Reply(503, {"error": {"message": "overloaded"}}), "probe POST .*/completions got no answer after 3 attempts"),
    ],
)
def test_scoring_problem_says_why_an_endpoint_cannot_score(server, make_gen, smollm2_tokenizer, reply, match):
    server.script["completions"] = [reply]
    gen = make_gen(server.url, tokenizer="smollm2")
    assert re.search(match, gen.scoring_problem() or "")
    assert gen.generate([ask("still")])[0].text == "answer to still"  # generation is unaffected


def test_scoring_problem_without_a_local_tokenizer_sends_nothing(server, make_gen):
    gen = make_gen(server.url)
    assert "set generation.openai.tokenizer" in (gen.scoring_problem() or "")
    assert server.requests == []


# -- a real vLLM OpenAI-compatible server ---------------------------------------------------------

SERVER_START_TIMEOUT_S = 240


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def _wait_healthy(proc: subprocess.Popen, url: str, log: Path) -> None:
    httpx = pytest.importorskip("httpx")
    deadline = time.monotonic() + SERVER_START_TIMEOUT_S
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            pytest.fail(f"vLLM server exited with {proc.returncode}:\n{log.read_text()[-3000:]}")
        try:
            if httpx.get(url, timeout=2).status_code == 200:
                return
        except httpx.TransportError:
            pass
        time.sleep(1)
    pytest.fail(f"vLLM server not healthy after {SERVER_START_TIMEOUT_S} s:\n{log.read_text()[-3000:]}")


@pytest.fixture(scope="module")
def vllm_server(tmp_path_factory):
    pytest.importorskip("vllm")
    from ragray.generation.packaged import resolve_generator_model

    model_dir = resolve_generator_model("smollm2")
    port = _free_port()
    log = tmp_path_factory.mktemp("vllm-server") / "server.log"
    env = {**os.environ, "HF_HUB_OFFLINE": "1", "TRANSFORMERS_OFFLINE": "1", "VLLM_NO_USAGE_STATS": "1",
           "DO_NOT_TRACK": "1", "VLLM_CPU_KVCACHE_SPACE": "1", "VLLM_CPU_NUM_OF_RESERVED_CPU": "0"}  # test_vllm's
    cmd = [sys.executable, "-m", "vllm.entrypoints.openai.api_server", "--model", model_dir,
           "--served-model-name", "smollm2", "--host", "127.0.0.1", "--port", str(port),
           "--dtype", "float32", "--max-model-len", "2048", "--enforce-eager", "--seed", "0"]
    with log.open("w") as out:
        # its own process group, so teardown stops the server and its engine processes together
        proc = subprocess.Popen(cmd, stdout=out, stderr=subprocess.STDOUT, env=env, start_new_session=True)
    try:
        _wait_healthy(proc, f"http://127.0.0.1:{port}/health", log)
        yield f"http://127.0.0.1:{port}/v1"
    finally:
        for sig, wait in ((signal.SIGTERM, 30), (signal.SIGKILL, 10)):
            try:
                os.killpg(proc.pid, sig)
            except ProcessLookupError:
                break
            try:
                proc.wait(timeout=wait)
                break
            except subprocess.TimeoutExpired:
                continue


@pytest.mark.slow
@pytest.mark.vllm
def test_contract_against_a_real_vllm_server(vllm_server, monkeypatch):
    monkeypatch.delenv(KEY_ENV, raising=False)
    config = GenerationConfig(
        backend="openai", model="smollm2", max_tokens=16,
        openai=OpenAIConfig(base_url=vllm_server, api_key_env=KEY_ENV, timeout_s=120, max_retries=1),
    )
    with build_generator(config) as gen:
        check_contract(gen, max_tokens=16)


@pytest.mark.slow
@pytest.mark.vllm
def test_a_prompt_holding_chat_markup_reaches_a_real_vllm_server_as_plain_text(vllm_server, monkeypatch):
    """Issue 64: a passage forging turns goes to /completions as token ids (vLLM's server takes a
    list of ints), so its markup stays text: 174 prompt tokens (129 as chat messages, whose markup
    the server parses), and SmolLM2 does not answer "BANANA"."""
    from tests.serving.test_attack_special_tokens import BANANA, FACT as CODE, QUESTION as FRANCE

    monkeypatch.delenv(KEY_ENV, raising=False)
    config = GenerationConfig(
        backend="openai", model="smollm2", max_tokens=8,
        openai=OpenAIConfig(base_url=vllm_server, api_key_env=KEY_ENV, timeout_s=120, max_retries=1),
    )
    with build_generator(config) as gen:
        (out,) = gen.generate([TEMPLATE.build(FRANCE, [CODE, BANANA])])
    assert out.ok and out.prompt_tokens == 174, out
    assert out.text.strip().rstrip(".") != "BANANA", out.text
