"""Issue 64, holes 9 and 10: status codes that did not match the body. `/influence` where every
model call failed and `/interpretation` with a failed baseline answered 200 (`state: "error"` in
the body; the docs promise 502); `temperature: Infinity` was accepted and read back `null`."""

import pytest
from fastapi.testclient import TestClient

from ragray.adapters.serving.local import local_app
from ragray.generation.scripted import ScriptedGenerator

QUESTION = {"question": "Which ferry goes to Corran?", "top_k_docs": 3}


@pytest.fixture()
def failing(served_config):
    # every prompt holds the question, so every call fails
    with TestClient(local_app(served_config, ScriptedGenerator(fail_on="Corran")),
                    raise_server_exceptions=False) as client:
        yield client


def test_influence_whose_every_call_failed_is_502(failing):
    r = failing.post("/influence", json=QUESTION)
    assert r.status_code == 502, r.text
    assert "the generator failed on this question" in r.json()["error"] and "scripted failure" in r.json()["error"]


def test_interpretation_whose_baseline_failed_is_502(failing):
    r = failing.post("/interpretation", json=QUESTION)
    assert r.status_code == 502, r.text
    assert "baseline call failed" in r.json()["error"]


def test_a_question_the_model_answers_is_still_200(client):
    assert client.post("/influence", json=QUESTION).status_code == 200
    assert client.post("/interpretation", json=QUESTION).status_code == 200


@pytest.mark.parametrize("number", ["Infinity", "-Infinity", "NaN"])
def test_a_non_finite_number_is_422(client, number):
    raw = f'{{"config": {{"generation": {{"temperature": {number}}}}}}}'
    r = client.put("/presets/hot", content=raw, headers={"content-type": "application/json"})
    assert r.status_code == 422, r.text
    assert "config.generation.temperature" in r.json()["error"] and "not a finite number" in r.json()["error"]
    assert client.get("/presets/hot").status_code == 404
    raw = f'{{"question": "Which ferry?", "semantic_threshold_t": {number}}}'
    r = client.post("/interpretation", content=raw, headers={"content-type": "application/json"})
    assert r.status_code == 422, r.text


def test_a_non_finite_override_is_refused_before_the_run(client):
    r = client.post("/runs", json={"command": "run", "overrides": ["generation.temperature=.inf"]})
    assert r.status_code == 400 and "generation.temperature" in r.json()["error"], r.text
    assert client.get("/runs").json() == []
