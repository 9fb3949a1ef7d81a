"""The Ray Serve application over real HTTP: real Ray, BM25, MiniLM reranker and SmolLM2.

Starts the four deployments on a free loopback port, calls every endpoint (good and bad
payloads, with and without the API key), sends a bounded concurrent burst, then redeploys
with a one-slot queue to show backpressure answered by 503 instead of a hang.
"""

import os
import socket
import statistics
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest

ray = pytest.importorskip("ray")
httpx = pytest.importorskip("httpx")

from ragray.config import load_config  # noqa: E402

pytestmark = [pytest.mark.ray, pytest.mark.slow]

ROOT = Path(__file__).resolve().parents[2]
KEY = "test-key-7f3a"
AUTH = {"Authorization": f"Bearer {KEY}"}
Q = "Which ferry sails to the northern islands?"


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _config(port, runs, *extra):
    return load_config(ROOT / "configs" / "serve_demo.yaml", [
        f"serve.port={port}", f"serve.runs_dir={runs}", f"serve.presets_dir={ROOT / 'configs'}",
        "retrieval.top_k=3", "faithfulness.random_repeats=3", "faithfulness.k_values=[top-1]",
        "generation.max_tokens=12", *extra,
    ])


@pytest.fixture(scope="module")
def server(tmp_path_factory, start_ray):
    from ray import serve

    from ragray.serving.app import start_server

    os.environ["RAGRAY_API_KEY"] = KEY  # replica processes inherit the environment Ray starts with
    start_ray("/tmp/rg-serve")
    port = _free_port()
    runs = tmp_path_factory.mktemp("runs")
    start_server(_config(port, runs), blocking=False)
    client = httpx.Client(base_url=f"http://127.0.0.1:{port}", timeout=300)
    deadline = time.time() + 120
    while client.get("/health", headers=AUTH).status_code != 200 and time.time() < deadline:
        time.sleep(1)
    yield client, port, runs
    client.close()
    serve.shutdown()
    ray.shutdown()
    os.environ.pop("RAGRAY_API_KEY", None)


@pytest.mark.timeout(900)
def test_every_endpoint_over_http(server):
    client, _, _ = server
    health = client.get("/health", headers=AUTH).json()  # the demo set has 80 distinct passages
    assert health["model"] == "smollm2" and health["corpus_passages"] == 80 and health["reranker"] == "bi_encoder"

    hits = client.post("/retrieve", headers=AUTH, json={"question": Q, "top_k_docs": 3}).json()
    assert hits["reranked"] is True and [h["rank"] for h in hits["hits"]] == [1, 2, 3]

    gen = client.post("/generate", headers=AUTH, json={"question": Q}).json()
    assert gen["answer"].strip() and gen["model"] == "smollm2" and gen["completion_tokens"] >= 1

    inf = client.post("/influence", headers=AUTH, json={"question": Q, "top_k_docs": 3}).json()
    assert len(inf["passages"]) == 3 and inf["question"]["n_calls"] == 4
    assert all(0 <= p["influence"] <= 1 for p in inf["passages"] if p["influence"] is not None)

    minimal = client.post("/interpretation", headers=AUTH,
                          json={"question": Q, "retriever": "bm25", "top_k_docs": 3}).json()
    assert len(minimal["importances"]) == 3 and minimal["cases"][0]["k_label"] == "top-1"
    assert minimal["cases"][0]["case"] in {"A", "B", "C", "inconclusive"}
    extended = client.post("/interpretation", headers=AUTH, json={
        "question": Q, "retriever": "bm25", "top_k_docs": 3, "explanation_level": "passage",
        "k_values": ["top-1"], "random_repeats": 2, "semantic_threshold_t": 0.8, "debug": True}).json()
    assert all("answer" in d for d in extended["deletions"])

    audit = client.post("/audit", headers=AUTH, json={"question": Q, "relevant_ids": ["nonexistent-doc"]}).json()
    assert audit["audit"]["status"] == "FAIL" and audit["audit"]["score"] <= 0

    presets = {p["name"] for p in client.get("/presets", headers=AUTH).json()}
    assert {"default", "serve_demo"} <= presets
    assert client.get("/presets/serve_demo", headers=AUTH).json()["rerank"]["strategy"] == "bi_encoder"

    run = client.post("/runs", headers=AUTH, json={"command": "run", "limit": 1}).json()
    deadline = time.time() + 300
    while (status := client.get(f"/runs/{run['run_id']}", headers=AUTH).json())["status"] == "running":
        assert time.time() < deadline
        time.sleep(1)
    assert status["status"] == "done" and status["summary"]["n_questions"] == 1, status
    assert any(r["run_id"] == run["run_id"] for r in client.get("/runs", headers=AUTH).json())


@pytest.mark.timeout(300)
def test_errors_over_http(server):
    client, _, _ = server
    assert client.get("/health").status_code == 401
    assert client.post("/retrieve", json={"question": Q}, headers={"Authorization": "Bearer wrong"}).status_code == 401
    bad = client.post("/interpretation", headers=AUTH, json={"question": Q, "top_k_docs": "three"})
    assert bad.status_code == 422 and bad.json()["detail"][0]["loc"][-1] == "top_k_docs"
    unknown = client.post("/retrieve", headers=AUTH, json={"question": Q, "retriever": "colbert"})
    assert unknown.status_code == 400 and "valid: bm25, dense, hybrid" in unknown.json()["error"]
    big = client.post("/retrieve", headers=AUTH, json={"question": "x" * 2_000_000})
    assert big.status_code == 413
    assert client.get("/runs/none-such", headers=AUTH).status_code == 404


@pytest.mark.timeout(900)
def test_concurrent_burst_then_backpressure(server, capsys):
    client, port, runs = server

    def call(i):
        start = time.perf_counter()
        r = client.post("/generate", headers=AUTH, json={"question": f"{Q} ({i})", "top_k_docs": 2})
        return r.status_code, time.perf_counter() - start

    with ThreadPoolExecutor(8) as pool:
        results = list(pool.map(call, range(50)))
    codes = [c for c, _ in results]
    assert set(codes) <= {200, 503}, codes
    ok = sorted(t for c, t in results if c == 200)
    p50, p95 = statistics.median(ok), ok[int(0.95 * (len(ok) - 1))]
    with capsys.disabled():
        print(f"\nburst 50 x /generate, 8 concurrent: {codes.count(200)} ok, {codes.count(503)} x 503, "
              f"p50 {p50:.2f} s, p95 {p95:.2f} s")

    # a one-slot ingress queue: excess requests are refused at once with 503, none hang
    from ragray.serving.app import start_server

    start_server(_config(port, runs, "serve.ingress.max_ongoing_requests=1", "serve.ingress.max_queued_requests=1"),
                 blocking=False)
    with ThreadPoolExecutor(12) as pool:
        codes = list(pool.map(lambda i: call(i)[0], range(12)))
    assert set(codes) <= {200, 503} and codes.count(503) >= 1 and codes.count(200) >= 1, codes
