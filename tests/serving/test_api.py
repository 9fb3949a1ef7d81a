"""Every endpoint of the HTTP API in-process (real BM25 and pipeline code, scripted generator)."""

import logging
import math
import time

import pytest
from fastapi.testclient import TestClient

from ragray.adapters.serving.local import local_app

MINIMAL = {"question": "Which ferry goes to Corran?", "retriever": "bm25", "top_k_docs": 4}


@pytest.fixture()
def client(served_config):
    with TestClient(local_app(served_config), raise_server_exceptions=False) as c:
        yield c


def test_health_describes_the_served_components(client):
    r = client.get("/health")
    assert r.status_code == 200, r.text
    body = r.json()
    assert body == {"status": "ok", "model": "scripted", "corpus_passages": 6,
                    "retrievers": ["bm25", "dense", "hybrid"], "reranker": "none"}
    assert len(r.headers["x-request-id"]) == 32


def test_retrieve_ranks_the_corpus_and_honours_top_k(client):
    r = client.post("/retrieve", json={"question": "night ferry to Corran pier", "top_k_docs": 2})
    assert r.status_code == 200, r.text
    body = r.json()
    assert body["retriever"] == "bm25" and body["reranked"] is False
    assert [h["rank"] for h in body["hits"]] == [1, 2]
    assert body["hits"][0]["passage_id"] == "ferry"


def test_generate_answers_from_retrieved_or_given_passages(client):
    r = client.post("/generate", json={"question": "Which ferry goes to Corran?"})
    assert r.status_code == 200, r.text
    assert r.json()["answer"] == "tern" and len(r.json()["passages"]) == 4
    given = client.post("/generate", json={"question": "Which bird?", "passages": ["Seen: ANSWER=gull today."]})
    assert given.json()["answer"] == "gull" and given.json()["passages"] == ["Seen: ANSWER=gull today."]


def test_influence_finds_the_passage_the_answer_comes_from(client):
    r = client.post("/influence", json={**MINIMAL, "answers": ["tern"]})
    assert r.status_code == 200, r.text
    body = r.json()
    influence = {p["passage_id"]: p["influence"] for p in body["passages"]}
    # influence.mode auto: the scripted model scores, so interactions (the ferry passage alone makes the
    # answer 10 nats likelier, without it 10 nats less likely: all the credit, and the only passage used)
    assert body["question"]["influence_mode"] == "interactions"
    assert influence["ferry"] == pytest.approx(1.0) and sum(influence.values()) == pytest.approx(1.0)
    assert [p["passage_id"] for p in body["passages"] if p["used"]] == ["ferry"]
    drop_one = client.post("/influence", json={**MINIMAL, "answers": ["tern"], "mode": "logprob_share"}).json()
    assert {p["passage_id"]: p["influence"] for p in drop_one["passages"]}["ferry"] == pytest.approx(1 - math.exp(-10))
    generated = client.post("/influence", json={**MINIMAL, "mode": "loo"}).json()
    assert generated["question"]["influence_mode"] == "loo"
    assert {p["passage_id"]: p["influence"] for p in generated["passages"]}["ferry"] == 1.0
    assert body["question"]["baseline_answer"] == "tern" and body["calls"] is None
    debug = client.post("/influence", json={**MINIMAL, "debug": True}).json()
    assert len(debug["calls"]) == 5 and debug["calls"][0]["answer"] == "tern"
    # the tie-robust verdict is in the question row; the content-driven answer is not position-driven
    q = body["question"]
    rank = next(p["retrieval_rank"] for p in body["passages"] if p["passage_id"] == "ferry")
    assert q["usage_ndcg"] == pytest.approx(1 / __import__("math").log2(rank + 1)) and q["position_control"] == "none"
    assert q["misaligned"] == (q["usage_ndcg"] < 0.8) and q["top1_used"] == (rank == 1)
    ctl = client.post("/influence", json={**MINIMAL, "position_control": "reversed", "debug": True}).json()
    assert ctl["question"]["position_driven"] is False and ctl["question"]["position_sensitivity"] == 0.0
    assert len(ctl["calls"]) == 10 and {c["arm"] for c in ctl["calls"][5:]} == {"control_baseline", "control_drop"}
    assert client.post("/influence", json={**MINIMAL, "position_control": "sideways"}).status_code == 422


def test_interpretation_minimal_payload_gives_case_a(client):
    r = client.post("/interpretation", json=MINIMAL)
    assert r.status_code == 200, r.text
    body = r.json()
    top = min(body["importances"], key=lambda u: u["rank"])
    assert top["passage_id"] == "ferry" and top["bucket"] == "most"
    (case,) = body["cases"]
    assert case["k_label"] == "top-1" and case["case"] == "A"
    # without debug the answers and removed units are left out (null); every arm keeps its similarities
    assert all(d["answer"] is None and d["removed_unit_ids"] is None for d in body["deletions"])
    assert all(set(d["similarities"]) >= {"rouge_l"} for d in body["deletions"])
    assert {d["arm"] for d in body["deletions"]} >= {"DEL_MOST", "DEL_LEAST", "DEL_RANDOM"}


def test_interpretation_extended_payload(client):
    payload = {**MINIMAL, "explanation_level": "sentence", "k_values": ["top-1", "cumulative"],
               "random_repeats": 3, "semantic_threshold_t": 0.5, "debug": True}
    r = client.post("/interpretation", json=payload)
    assert r.status_code == 200, r.text
    body = r.json()
    assert body["question"]["level"] == "sentence"
    assert {c["k_label"] for c in body["cases"]} >= {"top-1"}
    most = [d for d in body["deletions"] if d["arm"] == "DEL_MOST" and d["k_label"] == "top-1"]
    assert most and most[0]["answer"] == "unknown" and most[0]["removed_unit_ids"]
    assert body["curves"]


def test_audit_scores_against_relevant_documents(client):
    r = client.post("/audit", json={"question": "night ferry to Corran pier", "relevant_ids": ["ferry"], "k": 1})
    assert r.status_code == 200, r.text
    audit = r.json()["audit"]
    assert audit["status"] == "PASS" and audit["retrieved"] == ["ferry"] and audit["score"] == 70
    unscored = client.post("/audit", json={"question": "ferry"}).json()["audit"]
    assert unscored["status"] == "UNSCORED"


@pytest.mark.parametrize("body, field", [
    ({}, "question"),
    ({"question": ""}, "question"),
    ({"question": "x", "top_k_docs": 0}, "top_k_docs"),
    ({"question": "x", "toppk": 3}, "toppk"),
    ({"question": "x", "random_repeats": 1}, "random_repeats"),
    ({"question": "x", "explanation_level": "word"}, "explanation_level"),
])
def test_schema_errors_are_422_naming_the_field(client, body, field):
    r = client.post("/interpretation", json=body)
    assert r.status_code == 422
    assert any(field in map(str, e["loc"]) for e in r.json()["detail"])


def test_not_json_is_422(client):
    r = client.post("/retrieve", content=b"question=ferry", headers={"content-type": "application/json"})
    assert r.status_code == 422


@pytest.mark.parametrize("body, message", [
    ({"question": "x", "retriever": "colbert"}, "retriever: unknown 'colbert'; valid: bm25, dense, hybrid"),
    ({"question": "x", "top_k_docs": 7}, "top_k_docs: 7 is above this server's limit serve.max_top_k=6"),
    ({"question": "x", "k_values": ["top-0"]}, "k_values"),
])
def test_bad_input_is_400_with_the_reason(client, body, message):
    r = client.post("/interpretation", json=body)
    assert r.status_code == 400, r.text
    assert message in r.json()["error"]
    assert r.json()["request_id"] == r.headers["x-request-id"]


def test_api_key_is_required_on_every_endpoint_when_set(served_config, monkeypatch):
    monkeypatch.setenv("RAGRAY_API_KEY", "s3cret")
    with TestClient(local_app(served_config)) as c:
        for method, path in [("get", "/health"), ("post", "/retrieve"), ("get", "/presets"), ("get", "/runs"),
                             ("get", "/openapi.json")]:
            assert getattr(c, method)(path).status_code == 401, path
        wrong = c.get("/health", headers={"Authorization": "Bearer nope"})
        assert wrong.status_code == 401 and wrong.headers["www-authenticate"] == "Bearer"
        assert c.get("/health", headers={"Authorization": "Bearer s3cret"}).status_code == 200


def test_request_body_limit_is_413(client):
    r = client.post("/retrieve", json={"question": "x" * 5000})
    assert r.status_code == 413 and "4096" in r.json()["error"]


def test_presets_list_and_resolve(client):
    presets = {p["name"]: p for p in client.get("/presets").json()}
    assert presets["small"]["generator"] == "scripted:smollm2" and presets["small"]["error"] is None
    assert presets["small"]["source"] == "file" and "path" not in presets["small"]
    assert "retrieval.top_k must be >= 1" in presets["broken"]["error"]
    small = client.get("/presets/small").json()
    # the values of the keys a client may set; the operator's backend and dataset file are not shown
    assert small["source"] == "file" and small["settings"]["name"] == "small"
    assert small["settings"]["retrieval.top_k"] == 10 and "generation.backend" not in small["settings"]
    assert "data.path" not in small["settings"]  # a file no served dataset name stands for
    missing = client.get("/presets/nope")
    assert missing.status_code == 404 and "valid: broken, small" in missing.json()["error"]


def wait(client, run_id, timeout=60):
    deadline = time.time() + timeout
    while (status := client.get(f"/runs/{run_id}").json())["status"] == "running" and time.time() < deadline:
        time.sleep(0.2)
    return status


def test_runs_start_finish_and_list(client):
    r = client.post("/runs", json={"command": "run", "preset": "small"})
    assert r.status_code == 202, r.text
    assert r.json()["status"] in ("running", "done") and r.json()["started_at"]
    run_id = r.json()["run_id"]
    status = wait(client, run_id)
    assert status["status"] == "done", status
    assert status["questions_done"] == 1 and status["summary"]["n_questions"] == 1
    assert status["command"] == "run" and status["name"] == "small"
    assert status["seconds"] >= 0 and status["finished_at"] >= status["started_at"]
    assert run_id in [s["run_id"] for s in client.get("/runs").json()]
    audit = client.post("/runs", json={"command": "audit", "overrides": ["audit.k=1"]}).json()
    status = wait(client, audit["run_id"])
    assert status["status"] == "done" and status["summary"]["k"] == 1
    listed = client.get("/runs", params={"limit": 1}).json()
    assert [s["run_id"] for s in listed] == [audit["run_id"]]  # newest first
    assert [s["run_id"] for s in client.get("/runs", params={"kind": "run"}).json()] == [run_id]


def test_a_run_s_finished_questions_are_readable_over_http(client):
    run_id = client.post("/runs", json={"command": "run", "preset": "small"}).json()["run_id"]
    assert wait(client, run_id)["status"] == "done"
    (finished,) = client.get(f"/runs/{run_id}/questions").json()
    assert finished["question"]["question_id"] and finished["question"]["baseline_answer"] is not None
    assert finished["parts"]["passages"] and "calls" not in finished["parts"]
    assert client.get(f"/runs/{run_id}/questions", params={"offset": 1}).json() == []
    assert client.get("/runs/nope/questions").status_code == 404
    assert client.get(f"/runs/{run_id}/questions", params={"limit": 0}).status_code == 422


def test_the_dashboard_is_mounted_and_shows_runs_started_over_http(client):
    run_id = client.post("/runs", json={"command": "run", "preset": "small"}).json()["run_id"]
    assert wait(client, run_id)["status"] == "done"
    index = client.get("/dashboard/")
    assert index.status_code == 200 and index.headers["content-type"].startswith("text/html")
    assert f'data-run="{run_id}"' in index.text
    page = client.get(f"/dashboard/runs/{run_id}")
    assert page.status_code == 200 and 'data-key="n_questions" data-value="1"' in page.text
    assert "/dashboard" not in str(client.get("/openapi.json").json()["paths"])  # not part of the API schema
    assert client.get("/dashboard/runs/nope").status_code == 404


def test_a_run_failing_in_the_background_is_recorded_failed(served_config, tmp_path):
    # a dataset the operator offers by name, whose file is gone by the time a client picks it
    config = served_config.model_copy(update={"serve": served_config.serve.model_copy(
        update={"datasets": {"gone": str(tmp_path / "missing.jsonl")}})})
    with TestClient(local_app(config), raise_server_exceptions=False) as client:
        r = client.post("/runs", json={"command": "audit", "overrides": ["data.path=gone"]})
        assert r.status_code == 202, r.text
        _recorded_failed(client, r)


def _recorded_failed(client, r):
    status = wait(client, r.json()["run_id"])
    # the operator's file is named by the dataset the client picked, never by its path
    assert status["status"] == "failed" and "dataset 'gone'" in status["error"], status
    assert "missing.jsonl" not in status["error"], status
    assert [s["run_id"] for s in client.get("/runs", params={"status": "failed"}).json()] == [r.json()["run_id"]]


def test_runs_lists_cli_runs_from_the_same_history(client, served_config):
    from ragray.store.history import History

    history = History(served_config.history.url)
    run_id = history.start_run("score", "mine", served_config, "/tmp/scored")
    history.finish_run(run_id, {"em": 0.5})
    (listed,) = client.get("/runs", params={"kind": "score"}).json()
    assert listed["run_id"] == run_id and listed["questions_done"] == 0
    # a score run's summary is typed: what this record lacks reads as null
    assert listed["summary"]["em"] == 0.5 and listed["summary"]["n"] is None and "tau_h" in listed["summary"]
    assert client.get(f"/runs/{run_id}").json()["status"] == "done"


@pytest.mark.parametrize("params", [{"kind": "bogus"}, {"status": "ok"}, {"limit": 0}, {"offset": -1}])
def test_bad_run_listing_parameters_are_422(client, params):
    assert client.get("/runs", params=params).status_code == 422


SMALL = {"generation": {"backend": "scripted"}, "metrics": {"embedding": False}, "retrieval": {"top_k": 2}}


def test_presets_put_get_list_delete(client):
    r = client.put("/presets/fast", json={"config": SMALL, "description": "two passages"})
    assert r.status_code == 200, r.text
    assert r.json()["source"] == "db" and r.json()["description"] == "two passages" and "path" not in r.json()
    assert client.get("/presets/fast").json()["settings"] == {"retrieval.top_k": 2}
    assert [p["name"] for p in client.get("/presets").json()] == ["broken", "fast", "small"]
    assert [p["name"] for p in client.get("/presets", params={"limit": 1, "offset": 1}).json()] == ["fast"]
    again = client.put("/presets/fast", json={"config": {**SMALL, "retrieval": {"top_k": 3}}}).json()
    assert again["description"] == "two passages" and again["updated_at"] > again["created_at"]
    assert client.get("/presets/fast").json()["settings"] == {"retrieval.top_k": 3}
    assert client.delete("/presets/fast").status_code == 204
    assert client.get("/presets/fast").status_code == 404
    gone = client.delete("/presets/fast")
    assert gone.status_code == 404 and "no preset 'fast' in the database" in gone.json()["error"]


@pytest.mark.parametrize("name, body, status, message", [
    ("fast", {"config": {"retrieval": {"top_k": 0}}}, 400, "preset fast: retrieval.top_k must be >= 1, got 0"),
    ("fast", {"config": {"retreival": {}}}, 400, "preset fast: retreival: unknown key"),
    (".hidden", {"config": {}}, 400, "preset name must be 1-100 letters"),
    ("fast", {"config": [1]}, 422, None),
    ("fast", {"config": {}, "colour": "red"}, 422, None),
])
def test_bad_presets_are_rejected_with_the_reason(client, name, body, status, message):
    r = client.put(f"/presets/{name}", json=body)
    assert r.status_code == status, r.text
    if message:
        assert message in r.json()["error"]
    assert client.get("/presets/fast").status_code == 404


def test_cleanup_deletes_expired_ephemeral_indexes(client, served_config, tmp_path):
    from ragray.store.history import History

    history = History(served_config.history.url)
    old, new = tmp_path / "idx-old", tmp_path / "idx-new"
    for d in (old, new):
        d.mkdir()
        (d / "index.npy").write_bytes(b"x")
    history.register_ephemeral("ns", old, 0)
    history.register_ephemeral("ns", new, 3600)
    r = client.post("/cleanup")
    assert r.status_code == 200 and r.json() == {"expired_count": 1, "deleted_count": 1, "errors": []}
    assert not old.exists() and new.is_dir()
    assert client.post("/cleanup").json() == {"expired_count": 0, "deleted_count": 0, "errors": []}


@pytest.mark.parametrize("body, message", [
    ({"command": "run", "preset": "nope"}, "preset: unknown 'nope'; valid: broken, small"),
    ({"command": "run", "overrides": ["retrieval.top_k=0"]}, "retrieval.top_k must be >= 1, got 0"),
])
def test_bad_run_requests_are_400(client, body, message):
    r = client.post("/runs", json=body)
    assert r.status_code == 400 and message in r.json()["error"]
    assert client.get("/runs/nope").status_code == 404


def test_unexpected_errors_are_500_logged_with_the_request_id(served_config, caplog, monkeypatch):
    from ragray.adapters.serving.service import RagService

    def boom(self, req):
        raise RuntimeError("bug")

    monkeypatch.setattr(RagService, "retrieve", boom)
    with TestClient(local_app(served_config), raise_server_exceptions=False) as c:
        with caplog.at_level(logging.ERROR, logger="ragray.serve"):
            r = c.post("/retrieve", json={"question": "x"}, headers={"X-Request-ID": "req-42"})
    assert r.status_code == 500 and r.json() == {
        "error": "internal error (RuntimeError); see the server log for request req-42", "request_id": "req-42"}
    assert "req-42" in caplog.text and "bug" in caplog.text


def test_a_full_deployment_queue_is_503_not_a_hang(served_config, monkeypatch):
    serve_exceptions = pytest.importorskip("ray.serve.exceptions")
    from ragray.adapters.serving.service import RagService

    def busy(self, req):
        raise serve_exceptions.BackPressureError(num_queued_requests=32, max_queued_requests=32)

    monkeypatch.setattr(RagService, "retrieve", busy)
    with TestClient(local_app(served_config), raise_server_exceptions=False) as c:
        r = c.post("/retrieve", json={"question": "x"})
    assert r.status_code == 503 and r.headers["retry-after"] == "1"


def test_retrieve_widens_hits_with_context_expansion(served_config):
    config = served_config.model_copy(update={
        "chunking": served_config.chunking.model_copy(update={"method": "words", "size": 4, "overlap": 0}),
        "retrieval": served_config.retrieval.model_copy(update={
            "expand": served_config.retrieval.expand.model_copy(update={"window": 1})}),
    })
    with TestClient(local_app(config)) as c:
        r = c.post("/retrieve", json={"question": "night ferry to Corran pier", "top_k_docs": 2})
    assert r.status_code == 200, r.text
    # the two best chunks are the ferry document's first two; widened by one, they merge into it all
    (hit,) = r.json()["hits"]
    assert hit["passage_id"] == "ferry#c0-2" and hit["rank"] == 1
    assert hit["text"] == "The night ferry to Corran leaves from pier nine. ANSWER=tern"


def test_an_unanswerable_question_is_judged_by_whether_the_model_declined(client):
    """answerable: false marks the question as a data set's row would: the answer is right only if it
    declines (the scripted model answers 'tern' anyway: made up), and the verdict says so; gold
    answers on an unanswerable question are refused."""
    r = client.post("/influence", json={**MINIMAL, "answerable": False})
    assert r.status_code == 200, r.text
    q = r.json()["question"]
    assert q["answerable"] is False and q["declined"] is False and q["answer_correct"] is False
    plain = client.post("/influence", json=MINIMAL).json()["question"]
    assert plain["answerable"] is not False and plain["answer_correct"] is None  # no gold: nothing to judge by
    bad = client.post("/influence", json={**MINIMAL, "answerable": False, "answers": ["tern"]})
    assert bad.status_code == 422 and "an unanswerable question has none" in bad.text
