"""Clear answers over HTTP under faults (issue 42): invalid Unicode, a prompt over the context,
a full queue, and a run that measured nothing. Each was a 500, a 200 or a plain-text answer."""

import asyncio
import json
import time

import httpx
import pytest
from fastapi.testclient import TestClient

from ragray.generation.base import Generation, too_long, too_long_message
from ragray.generation.scripted import ScriptedGenerator
from ragray.adapters.serving.admission import BUSY, Admission
from ragray.adapters.serving.local import local_app
from ragray.adapters.serving.runs import nothing_measured

MINIMAL = {"question": "Which ferry goes to Corran?", "retriever": "bm25", "top_k_docs": 4}


@pytest.fixture()
def client(served_config):
    with TestClient(local_app(served_config), raise_server_exceptions=False) as c:
        yield c


def _raw(client, method, path, text):
    """Send ``text`` as the body as it is: JSON's ``\\ud800`` escape, not a Python string."""
    return client.request(method, path, content=text.encode(), headers={"content-type": "application/json"})


@pytest.mark.parametrize("method, path, body, field", [
    ("POST", "/retrieve", '{"question": "ferry \\ud800"}', "question"),
    ("POST", "/generate", '{"question": "q", "passages": ["ok", "bad \\udfff"]}', "passages[1]"),
    ("POST", "/influence", '{"question": "q", "answers": ["\\ud800"]}', "answers[0]"),
    ("POST", "/interpretation", '{"question": "\\ud83d"}', "question"),
    ("POST", "/audit", '{"question": "q", "relevant_ids": ["\\ud800"]}', "relevant_ids[0]"),
    ("POST", "/runs", '{"command": "run", "overrides": ["influence.mode=\\ud800"]}', "overrides[0]"),
    ("PUT", "/presets/p", '{"config": {"influence": {"mode": "\\ud800"}}}', "config.influence.mode"),
    ("PUT", "/presets/p", '{"config": {"\\ud800": 1}}', "config (a key)"),
])
def test_a_lone_surrogate_is_422_naming_the_field(client, method, path, body, field):
    r = _raw(client, method, path, body)
    assert r.status_code == 422, r.text
    error = r.json()["error"]  # pydantic's own words for a plain string field, ragray's elsewhere
    assert error.startswith(f"{field}: ") and ("invalid Unicode" in error or "unicode string" in error), error
    assert r.json()["detail"][0]["loc"][0] == "body"


def test_a_valid_astral_character_is_fine(client):
    r = _raw(client, "POST", "/retrieve", '{"question": "ferry \\ud83d\\udea2 to Corran"}')  # a ship, as a pair
    assert r.status_code == 200, r.text


class TooLong(ScriptedGenerator):
    """The scripted generator with a 50-token context (a real backend's wording of the error)."""

    def generate(self, prompts):
        out = []
        for g, p in zip(super().generate(prompts), prompts):
            n = len(p[-1].content.split())
            out.append(Generation("", n, 0, 0.0, error=too_long_message(n, 50)) if n > 50 else g)
        return out


def test_a_prompt_over_the_models_context_is_422_with_the_token_counts(served_config):
    with TestClient(local_app(served_config, TooLong()), raise_server_exceptions=False) as client:
        r = client.post("/generate", json={"question": "Which bird?", "passages": ["word " * 80]})
        assert r.status_code == 422, r.text
        assert "has 90 tokens" in r.json()["error"] and "at most 50" in r.json()["error"]
        short = client.post("/generate", json={"question": "Which bird?", "passages": ["ANSWER=gull"]})
        assert short.status_code == 200 and short.json()["error"] is None
        # the six corpus passages make a baseline prompt of more than 50 words; four of them fewer
        influence = client.post("/influence", json={**MINIMAL, "top_k_docs": 6})
        assert influence.status_code == 422 and "at most 50" in influence.json()["error"], influence.text
        interpretation = client.post("/interpretation", json={**MINIMAL, "top_k_docs": 6})
        assert interpretation.status_code == 422 and "at most 50" in interpretation.json()["error"]
        fits = client.post("/influence", json={**MINIMAL, "top_k_docs": 2})
        assert fits.status_code == 200, fits.text


def test_a_failed_generation_is_502_not_200(served_config):
    with TestClient(local_app(served_config, ScriptedGenerator(fail_on="gull")),
                    raise_server_exceptions=False) as client:
        r = client.post("/generate", json={"question": "Which bird?", "passages": ["ANSWER=gull"]})
        assert r.status_code == 502 and "scripted failure" in r.json()["error"], r.text


def test_too_long_reads_both_backends_wordings():
    assert too_long(too_long_message(3000, 2048, "generation.vllm.max_model_len")) == (3000, 2048)
    assert too_long("baseline call failed: " + too_long_message(9000, 8192)) == (9000, 8192)
    assert too_long("scripted failure") is None and too_long(None) is None


def test_a_run_whose_every_call_failed_is_recorded_failed_with_the_reason(served_config):
    with TestClient(local_app(served_config, ScriptedGenerator(fail_on="Corran")),
                    raise_server_exceptions=False) as client:
        run_id = client.post("/runs", json={"command": "run"}).json()["run_id"]
        deadline = time.time() + 60
        while (status := client.get(f"/runs/{run_id}").json())["status"] == "running" and time.time() < deadline:
            time.sleep(0.2)
    assert status["status"] == "failed", status
    assert status["error"].startswith("RunFailedError: nothing measured: 1 of 1 questions failed"), status


def test_nothing_measured_reasons():
    assert nothing_measured("run", {"n_questions": 2, "n_measured": 1}) is None
    reason = nothing_measured("run", {"n_questions": 2, "n_measured": 0, "error_questions": [],
                                      "states": {"too_few_passages": 2, "measured": 0}})
    assert reason == "nothing measured: none of the 2 questions could be measured (too_few_passages: 2)"
    assert nothing_measured("interpret", {"n_questions": 3, "n_failed": 3}).startswith("nothing measured: all 3")
    assert nothing_measured("audit", {"n_queries": 3}) is None
    assert nothing_measured("run", {"n_questions": 0, "n_measured": 0}) is None


def test_a_full_queue_is_503_json_with_retry_after():
    release = asyncio.Event()

    async def slow(scope, receive, send):
        await release.wait()
        await send({"type": "http.response.start", "status": 200, "headers": []})
        await send({"type": "http.response.body", "body": b"ok"})

    async def main():
        app = Admission(slow, ongoing=1, queued=1)
        async with httpx.AsyncClient(transport=httpx.ASGITransport(app=app), base_url="http://t") as c:
            first = asyncio.create_task(c.get("/"))
            second = asyncio.create_task(c.get("/"))
            await asyncio.sleep(0.05)
            third = await c.get("/", headers={"x-request-id": "abc"})
            release.set()
            return await first, await second, third

    first, second, third = asyncio.run(main())
    assert first.status_code == second.status_code == 200
    assert third.status_code == 503 and third.headers["retry-after"] == "1"
    assert json.loads(third.text) == {"error": BUSY, "request_id": "abc"}


def test_every_response_carries_one_request_id(client):
    for r in (client.get("/health"), client.post("/retrieve", json={}), client.get("/runs/nope")):
        assert len(r.headers.get_list("x-request-id")) == 1, r.headers


def test_a_model_left_on_the_meta_device_is_refused():
    import torch

    from ragray.errors import BackendError
    from ragray.model_loads import check_materialized

    check_materialized(torch.nn.Linear(2, 2), "whole")
    with torch.device("meta"):
        half = torch.nn.Linear(2, 2)
    with pytest.raises(BackendError, match="half: 'weight' was left on the meta device"):
        check_materialized(half, "half")
