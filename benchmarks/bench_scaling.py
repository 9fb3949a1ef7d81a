"""Scaling of `ragray run`: throughput vs number of questions, and vs Ray Data generator actors.

    python benchmarks/bench_scaling.py [--questions 2 4] [--dtype bfloat16] [--cluster-nodes 1 2 3]
        [--cluster-questions 6] [--out benchmarks/results/scaling.json]

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
- **cluster** (``--cluster-nodes``): a ``ray.cluster_utils.Cluster`` per size n: a head with 0 CPUs
  and n worker nodes of 1 CPU, the driver connected to it; Ray Data with n actors of 1 CPU (one
  torch thread each) over ``--cluster-questions`` questions. Efficiency = calls/s(n) / (n x
  calls/s(1)). The nodes are processes on this machine: past its physical cores they share them.
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
from ragray.pipeline import run_influence  # noqa: E402
from ragray.config import load_config  # noqa: E402

DATA = SHARED_DATA / "hotpotqa_distractor_dev.jsonl"


def one_run(n: int, dtype: str, root: Path, name: str, threads: int | None = None, **execution: Any) -> dict[str, Any]:
    overrides = [f"data.path={DATA}", f"data.limit={n}", "retrieval.top_k=10", "generation.max_tokens=32",
                 "influence.mode=loo", f"generation.dtype={dtype}", "metrics.embedding=false", "history.record=false",
                 *(f"execution.{k}={v}" for k, v in execution.items())]
    if threads is not None:  # an actor's torch threads (by default every core: oversubscribed here)
        overrides.append(f"generation.transformers.threads={threads}")
    config = load_config(None, overrides)
    began = time.perf_counter()
    result = run_influence(config, root / name, progress=False)
    wall = time.perf_counter() - began
    s = result.summary
    return {"questions": n, "calls": s.n_calls, "wall_s": round(wall, 2),
            "calls_per_s_wall": round(s.n_calls / wall, 4),
            "calls_per_s_generation": s.calls_per_second, "execution": execution,
            "threads": threads, "loadavg_1m_after": round(os.getloadavg()[0], 2)}


def cluster_runs(nodes: list[int], n: int, dtype: str, root: Path) -> dict[str, Any]:
    """One ``ray.cluster_utils.Cluster`` per size: head (0 CPUs) + ``size`` one-CPU worker nodes."""
    import ray
    from ray.cluster_utils import Cluster

    # every actor up before the first row: otherwise the first one ready takes the early questions
    context = ray.data.DataContext.get_current()
    context.wait_for_min_actors_s = 600
    rows: dict[str, Any] = {}
    for size in nodes:
        cluster = Cluster(initialize_head=True, head_node_args={
            "num_cpus": 0, "include_dashboard": False, "object_store_memory": 200 * 2**20})
        try:
            for _ in range(size):
                cluster.add_node(num_cpus=1, object_store_memory=200 * 2**20)
            cluster.wait_for_nodes()
            ray.init(address=cluster.address, log_to_driver=False)
            row = one_run(n, dtype, root, f"cluster-{size}", threads=1,
                          executor="ray", actors=size, num_cpus=1)
        finally:
            ray.shutdown()
            cluster.shutdown()
        row["nodes"] = size
        rows[f"{size}_nodes"] = row
        print("cluster", json.dumps(row), flush=True)
    single = rows.get("1_nodes", {}).get("calls_per_s_wall")
    for row in rows.values():
        row["efficiency_vs_1_node"] = round(row["calls_per_s_wall"] / (row["nodes"] * single), 3) if single else None
    return {"physical_cores": os.cpu_count(), "questions": n, "runs": rows}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--questions", type=int, nargs="+", default=[2, 4])
    ap.add_argument("--dtype", default="bfloat16")
    ap.add_argument("--skip-local", action="store_true", help="only the cluster section")
    ap.add_argument("--cluster-nodes", type=int, nargs="*", default=[1, 2, 3])
    ap.add_argument("--cluster-questions", type=int, default=6)
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
        for n in [] if args.skip_local else args.questions:
            row = one_run(n, args.dtype, root, f"local-{n}")
            result["questions"].append(row)
            print("questions", json.dumps(row), flush=True)
        if not args.skip_local:
            import ray

            n = max(args.questions)
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
        if args.cluster_nodes:
            os.environ.setdefault("RAY_TMPDIR", "/tmp/rg-bench")  # short socket paths, own address file
            os.makedirs(os.environ["RAY_TMPDIR"], exist_ok=True)
            result["cluster"] = cluster_runs(args.cluster_nodes, args.cluster_questions, args.dtype, root)
    save_result(args.out, result)


if __name__ == "__main__":
    main()
