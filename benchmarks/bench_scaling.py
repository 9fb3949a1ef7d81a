"""Scaling of `ragray run`: throughput vs number of questions, and vs Ray Data generator actors.

    python benchmarks/bench_scaling.py [--questions 2 4] [--dtype bfloat16] [--out benchmarks/results/scaling.json]

Workload: the first N HotpotQA distractor-dev questions, BM25 top-10 per question, SmolLM2-135M,
32 new tokens; each question is the baseline plus 10 drop-one ablations (11 calls). Every variant
is a full ``run_influence`` (retrieval, generation, influence, tables), timed end to end with the
model load and Ray start-up reported separately where they can be told apart.

- **questions**: the local executor (one process, every core) at each N: calls/s should stay
  flat if the loop scales linearly.
- **executors** (largest N): local; Ray Data with 1 actor holding both CPUs; Ray Data with 2
  actors of 1 CPU each (one torch thread each). On a 2-core machine the actors split the same two
  cores, so this measures Ray's overhead and the cost of splitting, not scale-out; the multi-node
  behaviour is tested (placement, failures) in tests/execution/test_multinode.py.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from benchmarks.machine import SHARED_DATA, machine_info, save_result  # noqa: E402
from ragray.commands.run import run_influence  # noqa: E402
from ragray.config import load_config  # noqa: E402

DATA = SHARED_DATA / "hotpotqa_distractor_dev.jsonl"


def one_run(n: int, dtype: str, root: Path, name: str, threads: int | None = None, **execution: Any) -> dict[str, Any]:
    overrides = [f"data.path={DATA}", f"data.limit={n}", "retrieval.top_k=10", "generation.max_tokens=32",
                 f"generation.dtype={dtype}", "metrics.embedding=false", "history.record=false",
                 *(f"execution.{k}={v}" for k, v in execution.items())]
    if threads is not None:  # an actor's torch threads (by default every core: oversubscribed here)
        overrides.append(f"generation.transformers.threads={threads}")
    config = load_config(None, overrides)
    began = time.perf_counter()
    result = run_influence(config, root / name, progress=False)
    wall = time.perf_counter() - began
    s = result.summary
    return {"questions": n, "calls": s["n_calls"], "wall_s": round(wall, 2),
            "calls_per_s_wall": round(s["n_calls"] / wall, 4),
            "calls_per_s_generation": s["calls_per_second"], "execution": execution,
            "threads": threads, "loadavg_1m_after": round(os.getloadavg()[0], 2)}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--questions", type=int, nargs="+", default=[2, 4])
    ap.add_argument("--dtype", default="bfloat16")
    ap.add_argument("--out", default="benchmarks/results/scaling.json")
    args = ap.parse_args()
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    os.environ.setdefault("RAY_DATA_DISABLE_PROGRESS_BARS", "1")
    os.environ.setdefault("RAY_AUTH_MODE", "disabled")
    os.environ.setdefault("RAY_USAGE_STATS_ENABLED", "0")
    result: dict[str, Any] = {"machine": machine_info(("torch", "transformers", "ray")),
                              "workload": {"data": DATA.name, "top_k": 10, "max_tokens": 32, "dtype": args.dtype}}
    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp)
        result["questions"] = []
        for n in args.questions:
            row = one_run(n, args.dtype, root, f"local-{n}")
            result["questions"].append(row)
            print("questions", json.dumps(row), flush=True)
        n = max(args.questions)
        import ray

        ray.init(address="local", num_cpus=os.cpu_count(), include_dashboard=False, log_to_driver=False)
        try:
            result["executors"] = {"local": result["questions"][-1]}
            for name, ex in (("ray_1_actor_2_cpus", {"executor": "ray", "actors": 1, "num_cpus": 2, "threads": 2}),
                             ("ray_2_actors_1_cpu", {"executor": "ray", "actors": 2, "num_cpus": 1, "threads": 1})):
                row = one_run(n, args.dtype, root, name, **ex)
                result["executors"][name] = row
                print(name, json.dumps(row), flush=True)
        finally:
            ray.shutdown()
    save_result(args.out, result)


if __name__ == "__main__":
    main()
