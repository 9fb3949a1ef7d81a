"""HTTP API throughput and latency on Ray Serve, against the naive way, in one run.

Workload: N ``POST /generate`` requests (the demo set's questions, BM25 + MiniLM rerank top-k,
SmolLM2), C at a time. Variants:

- ``naive``: the same requests one after another in this process (no HTTP, no Ray): what a
  single-threaded script or server achieves; its answers are the reference;
- ``serve_unbatched``: the Serve app, ``serve.generator.batch_size=1`` (each request its own
  backend call, serialized on the model);
- ``serve_batched``: the Serve app with concurrent requests merged into one batched decode.

Reports per variant: requests/s, p50/p95/mean latency, status codes, and the share of answers
identical to the naive ones. ``python benchmarks/bench_serve.py [--requests 50 --concurrency 8]``
writes ``benchmarks/results/serve.json`` (the committed run kept only the totals and percentiles,
not the per-request latencies: ``benchmarks/results/archive/serve.json``, not re-checkable).
"""

from __future__ import annotations

import argparse
import json
import os
import socket
import statistics
import sys
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from benchmarks.machine import REPO, machine_info  # noqa: E402
from ragray.config import ExperimentConfig, load_config  # noqa: E402
from ragray.data import load_dataset  # noqa: E402


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _stats(latencies: list[float], codes: list[int], wall: float, answers: list[str], reference: list[str] | None):
    ok = sorted(t for t, c in zip(latencies, codes) if c == 200)
    return {
        "requests": len(codes), "ok": codes.count(200), "status_503": codes.count(503),
        "other_status": sorted({c for c in codes if c not in (200, 503)}),
        "wall_s": round(wall, 2), "requests_per_s": round(len(ok) / wall, 3),
        "p50_s": round(statistics.median(ok), 2), "p95_s": round(ok[int(0.95 * (len(ok) - 1))], 2),
        "mean_s": round(statistics.fmean(ok), 2),
        "answers_identical_to_naive": (
            None if reference is None else sum(a == b for a, b in zip(answers, reference)) / len(reference)),
    }


def _naive(config: ExperimentConfig, questions: list[str]) -> tuple[dict[str, Any], list[str]]:
    from ragray.generation import build_generator
    from ragray.adapters.serving import schemas as s
    from ragray.adapters.serving.components import CorpusSearch, RerankStep
    from ragray.adapters.serving.service import RagService

    gen = build_generator(config.generation)
    service = RagService(config, CorpusSearch(config), RerankStep(config), gen)
    service.generate(s.GenerateRequest(question="warm up"))
    latencies, answers = [], []
    began = time.perf_counter()
    for q in questions:
        start = time.perf_counter()
        answers.append(service.generate(s.GenerateRequest(question=q)).answer)
        latencies.append(time.perf_counter() - start)
    wall = time.perf_counter() - began
    gen.close()
    return _stats(latencies, [200] * len(questions), wall, answers, None), answers


def _burst(config: ExperimentConfig, questions: list[str], concurrency: int, reference: list[str]) -> dict[str, Any]:
    import httpx

    from ragray.adapters.serving.app import start_server

    start_server(config, blocking=False)
    client = httpx.Client(base_url=f"http://127.0.0.1:{config.serve.port}", timeout=600)
    client.post("/generate", json={"question": "warm up"})

    def call(q: str) -> tuple[int, float, str]:
        start = time.perf_counter()
        r = client.post("/generate", json={"question": q})
        return r.status_code, time.perf_counter() - start, r.json().get("answer", "") if r.status_code == 200 else ""

    began = time.perf_counter()
    with ThreadPoolExecutor(concurrency) as pool:
        results = list(pool.map(call, questions))
    wall = time.perf_counter() - began
    client.close()
    return _stats([t for _, t, _ in results], [c for c, _, _ in results], wall, [a for _, _, a in results], reference)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--requests", type=int, default=50)
    ap.add_argument("--concurrency", type=int, default=8)
    ap.add_argument("--top-k", type=int, default=5)
    ap.add_argument("--max-tokens", type=int, default=32)
    ap.add_argument("--out", default=str(Path(__file__).parent / "results" / "serve.json"))
    args = ap.parse_args()
    for key, value in {"RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER": "0", "RAY_AUTH_MODE": "disabled",
                       "RAY_USAGE_STATS_ENABLED": "0"}.items():
        os.environ.setdefault(key, value)
    os.environ.pop("RAGRAY_API_KEY", None)
    import ray
    from ray import serve

    port = _free_port()
    base = [f"serve.port={port}", f"retrieval.top_k={args.top_k}", f"generation.max_tokens={args.max_tokens}"]
    config = load_config(REPO / "configs" / "serve_demo.yaml", base)
    demo = load_dataset(config.data).questions
    questions = [demo[i % len(demo)].question for i in range(args.requests)]
    results: dict[str, Any] = {
        "machine": machine_info(("torch", "transformers", "ray", "fastapi")),
        "workload": vars(args) | {"endpoint": "POST /generate", "dataset": "demo", "reranker": "bi_encoder (MiniLM)"},
    }
    results["naive"], reference = _naive(config, questions)
    print("naive", json.dumps(results["naive"]), flush=True)
    ray.init(num_cpus=os.cpu_count(), include_dashboard=False, log_to_driver=False)
    try:
        for name, size in (("serve_unbatched", 1), ("serve_batched", 8)):
            cfg = load_config(REPO / "configs" / "serve_demo.yaml", [*base, f"serve.generator.batch_size={size}"])
            results[name] = _burst(cfg, questions, args.concurrency, reference)
            print(name, json.dumps(results[name]), flush=True)
    finally:
        serve.shutdown()
        ray.shutdown()
    results["speedup_batched_vs_naive"] = round(
        results["serve_batched"]["requests_per_s"] / results["naive"]["requests_per_s"], 2)
    Path(args.out).write_text(json.dumps(results, indent=2) + "\n")
    print(f"wrote {args.out}")


if __name__ == "__main__":
    main()
