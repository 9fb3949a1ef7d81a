"""faiss-gpu through ragray's own dense index, where it is installed: does a flat index move to the
GPU, and does it return what the CPU index returns?

    python -m benchmarks.faiss_gpu_smoke --out faiss_gpu.json [--passages 100000] [--queries 1000]

Builds :class:`ragray.retrieval.dense.DenseIndex` twice over the same random unit vectors (an
encoder that returns seeded vectors stands in for the sentence encoder: placement and search are
what is checked, not embeddings): once as on a CPU machine, once with the encoder on ``cuda:0``.
Records whether the second landed on the GPU, for how many queries both return the same passages
(a flat inner-product search is exact on both; in the same order too, unless float rounding swaps two
neighbours), the most their scores differ, and each search's seconds. Where the ``faiss`` module is missing or was built without GPU support
(``faiss-cpu``, or no CUDA device), the JSON says so (``state``) and the script exits 0: the smoke
runs wherever ``benchmarks/gpu_bench.sh run`` does. Exit 1 when faiss-gpu could run and the index
did not move to the GPU, or returned other passages than the CPU index for any query.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path
from typing import Any

import numpy as np

from benchmarks.machine import machine_info

DIM = 384  # MiniLM's width, the packaged encoder's


class _SeededEncoder:
    """Encodes each text as a seeded random unit vector (the same text, the same vector)."""

    def __init__(self, device: str) -> None:
        self.device = device

    def encode(self, texts: list[str], batch_size: int, *, normalize: bool = True, cache: bool = True) -> np.ndarray:
        out = np.stack([np.random.default_rng(abs(hash(t)) % 2**32).standard_normal(DIM) for t in texts])
        return (out / np.linalg.norm(out, axis=1, keepdims=True)).astype(np.float32)


def _state(faiss: Any) -> str:
    if faiss is None:
        return "faiss not installed"
    if not hasattr(faiss, "StandardGpuResources"):
        return "faiss built without GPU support (faiss-cpu)"
    if faiss.get_num_gpus() < 1:
        return "faiss-gpu sees no CUDA device"
    return "gpu"


def smoke(n_passages: int, n_queries: int, k: int = 10) -> dict[str, Any]:
    try:
        import faiss
    except ImportError:
        faiss = None
    result: dict[str, Any] = {"machine": machine_info(("faiss", "numpy")), "passages": n_passages,
                              "queries": n_queries, "k": k, "state": _state(faiss)}
    if result["state"] != "gpu":
        return result
    from ragray.config import DenseConfig
    from ragray.retrieval.dense import DenseIndex
    from ragray.types import Passage

    rng = np.random.default_rng(0)
    vectors = rng.standard_normal((n_passages, DIM)).astype(np.float32)
    vectors /= np.linalg.norm(vectors, axis=1, keepdims=True)
    passages = [Passage(id=f"p{i}", text="") for i in range(n_passages)]
    queries = [f"query {i}" for i in range(n_queries)]
    config = DenseConfig()
    runs: dict[str, Any] = {}
    for side, device in (("cpu", "cpu"), ("gpu", "cuda:0")):
        index = DenseIndex(passages, vectors, _SeededEncoder(device), config)
        began = time.perf_counter()
        hits = index.search(queries, k)
        runs[side] = {"on_gpu": index.on_gpu, "seconds": round(time.perf_counter() - began, 4), "hits": hits}
    pairs = list(zip(runs["cpu"]["hits"], runs["gpu"]["hits"]))
    same = [[h.passage.id for h in a] == [h.passage.id for h in b] for a, b in pairs]
    # two neighbours whose scores differ by float rounding may swap places: the same set is what must hold
    same_set = [{h.passage.id for h in a} == {h.passage.id for h in b} for a, b in pairs]
    diff = max(abs(x.score - y.score) for a, b in zip(runs["cpu"]["hits"], runs["gpu"]["hits"]) for x, y in zip(a, b))
    result.update({"placed_on_gpu": runs["gpu"]["on_gpu"], "queries_same_hits": sum(same),
                   "queries_same_set": sum(same_set),
                   "max_score_difference": float(diff),
                   "search_seconds": {side: runs[side]["seconds"] for side in runs}})
    return result


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--out", type=Path, required=True)
    ap.add_argument("--passages", type=int, default=100_000)
    ap.add_argument("--queries", type=int, default=1_000)
    args = ap.parse_args(argv)
    result = smoke(args.passages, args.queries)
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(result, indent=1) + "\n", encoding="utf-8")
    print(f"faiss smoke: {result['state']}" + (f"; on the GPU: {result['placed_on_gpu']}, the same hits for "
                                               f"{result['queries_same_hits']} of {result['queries']} queries"
                                               if result["state"] == "gpu" else ""))
    failed = result["state"] == "gpu" and (not result["placed_on_gpu"] or result["queries_same_set"] < result["queries"])
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
