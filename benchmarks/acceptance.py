"""The performance issue's acceptance figures, read from the sections' result JSONs.

Each figure is ``{"value", "target", "met", "source"}`` (``met`` is ``None`` where the issue sets
no number, or the section did not run); :func:`acceptance` leaves out what no section produced.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any


def _load(results: Path, name: str, sections: list[str]) -> dict[str, Any] | None:
    path = results / f"{name}.json"
    if name not in sections or not path.is_file():
        return None
    return json.loads(path.read_text(encoding="utf-8"))


def _figure(value: Any, target: float | None, source: str, *, at_least: bool = True, **extra: Any) -> dict[str, Any]:
    met = None
    if target is not None and isinstance(value, (int, float)):
        met = value >= target if at_least else value <= target
    return {"value": value, "target": target, "met": met, "source": source, **extra}


def _generation(gen: dict[str, Any]) -> dict[str, Any]:
    summary = gen.get("summary", {})
    fast = {k: v for k, v in summary.items() if k.startswith(("ragray_", "vllm_")) and "speedup_vs_naive" in v}
    out: dict[str, Any] = {}
    if fast:
        best = max(fast, key=lambda k: fast[k]["speedup_vs_naive"] or 0)
        out["ablation_calls_speedup_vs_naive"] = _figure(
            fast[best]["speedup_vs_naive"], 8.0, "generation.json", path=best,
            naive_calls_per_s=summary.get("naive_hf_generate_fp32", {}).get("calls_per_s"),
            calls_per_s={k: v["calls_per_s"] for k, v in fast.items()})
    ranks = summary.get("influence_ranks_bf16_vs_fp32")
    if ranks:
        out["fast_path_influence_rank_agreement"] = _figure(
            ranks.get("mean_spearman"), None, "generation.json", top1_agreement=ranks.get("top1_agreement"),
            questions=ranks.get("questions"))
    return out


def _limits(limits: dict[str, Any]) -> dict[str, Any]:
    sections = limits.get("ragray_achieved", {}).get("sections", {})
    if not sections:
        return {}
    best = max(sections, key=lambda k: sections[k]["useful_gflops"])
    row = sections[best]
    return {"useful_flops_of_bf16_matmul_peak": _figure(
        row["of_bf16_peak"], 0.6, "limits.json", path=best, useful_gflops=row["useful_gflops"],
        bf16_peak_gflops=limits["matmul"]["bfloat16"]["peak_gflops"],
        of_model_bf16_forward=row.get("of_model_bf16_forward"))}


def _contextcite(cc: dict[str, Any]) -> dict[str, Any]:
    s = cc.get("summary", {})
    best, ragray = s.get("fastest_ragray_dtype"), s.get("ragray", {})
    same_dtype = {d: round(r["speedup"][d], 2) for d, r in ragray.items() if d in r.get("speedup", {})}
    return {"logprob_speedup_vs_contextcite": _figure(
        s.get("speedup"), 3.0, "contextcite.json", ablations=cc.get("workload", {}).get("ablations"),
        ragray_dtype=best, contextcite_dtype=s.get("contextcite_reference_dtype"),
        speedup_same_dtype=same_dtype,
        attribution_spearman_same_solver=s.get("same_solver_spearman_mean"),
        attribution_top1_same_solver=s.get("same_solver_top1_agreement"))}


def _retrieval(ret: dict[str, Any]) -> dict[str, Any]:
    out: dict[str, Any] = {}
    bm25 = ret.get("bm25", [])
    if bm25:
        out["bm25_speedup_vs_rank_bm25"] = _figure(
            min(r["speedup_index_plus_queries"] for r in bm25), 20.0, "retrieval.json",
            per_dataset={r["dataset"]: round(r["speedup_index_plus_queries"], 1) for r in bm25},
            identical_top10_share=min(r["identical_top10_share"] for r in bm25))
    faiss = ret.get("faiss_scifact")
    if faiss:
        out["faiss_hnsw_vs_flat"] = _figure(
            round(faiss["hnsw"]["queries_per_s"] / faiss["flat_ip"]["queries_per_s"], 2), None, "retrieval.json",
            recall_at_10=faiss["hnsw_recall_at_10_vs_flat"], passages=faiss["n_passages"])
    return out


def _throughput(tp: dict[str, Any]) -> dict[str, Any]:
    d, cache = tp["default"], tp["cache"]
    return {
        "endpoint_share_of_ideal": _figure(round(d["share_of_ideal"], 3), 0.9, "throughput.json",
                                           calls_per_s=d["server_calls_per_s"],
                                           ideal=tp["server"]["ideal_calls_per_s"]),
        "endpoint_vs_seed_loop": _figure(round(d["x_seed"], 1), 20, "throughput.json"),
        "rerun_calls_sent": _figure(cache["repeat_run"]["server_answered"], 0, "throughput.json", at_least=False),
    }


def _vllm_in_flight(v: dict[str, Any]) -> dict[str, Any]:
    runs = v["runs"]
    return {"vllm_16_vs_1_in_flight": _figure(round(v["speedup_16_vs_1"], 2) if v.get("speedup_16_vs_1") else None,
                                              None, "vllm_in_flight.json",
                                              hit_rate={k: r["prefix_cache_hit_rate"] for k, r in runs.items()},
                                              ceiling=runs["16"]["ceiling_exact"])}


def _scaling(sc: dict[str, Any]) -> dict[str, Any]:
    out: dict[str, Any] = {}
    rows = sc.get("questions", [])
    if len(rows) > 1:
        rates = [r["calls_per_s_wall"] for r in rows]
        out["throughput_vs_questions"] = _figure(
            round(rates[-1] / rates[0], 3), None, "scaling.json",
            calls_per_s={str(r["questions"]): r["calls_per_s_wall"] for r in rows})
    cluster = sc.get("cluster", {})
    runs = cluster.get("runs", {})
    if runs:
        cores = cluster.get("physical_cores") or 1
        # nodes beyond the physical cores share them: the target applies where the CPUs allow it
        fits = [r for r in runs.values() if r["nodes"] <= cores and r["nodes"] > 1]
        best = max(fits, key=lambda r: r["nodes"]) if fits else None
        out["ray_cluster_efficiency"] = _figure(
            best["efficiency_vs_1_node"] if best else None, 0.8, "scaling.json",
            nodes=best["nodes"] if best else None, physical_cores=cores,
            efficiency_by_nodes={str(r["nodes"]): r["efficiency_vs_1_node"] for r in runs.values()})
    return out


def _engine(engine: dict[str, Any]) -> dict[str, Any]:
    """The engine on this machine's device: ragray at defaults against the naive log-prob loop
    (the CPU bar: 1.65x; on a GPU the issue asks 3x and 30 calls/s, in ``gpu_*.json``)."""
    if engine.get("x_naive_logprob") is None:
        return {}
    cpu = engine.get("device") == "cpu"
    out = {"engine_speedup_vs_naive_logprob": _figure(
        engine["x_naive_logprob"], 1.65 if cpu else 3.0, "engine.json", device=engine.get("device"),
        calls_per_s=engine["ragray"]["calls_per_s"], vs_logits_at_answer_only=engine.get("x_naive_lean"))}
    if not cpu:
        out["engine_calls_per_s"] = _figure(engine["ragray"]["calls_per_s"], 30.0, "engine.json")
    return out


def _gpu_engine(results: Path) -> dict[str, Any]:
    """The engine on one GPU (``gpu_8b.json`` of ``benchmarks/gpu_bench.sh``, measured on a GPU
    machine, never by the suite): 30 calls/s and 3x the naive log-prob loop of the same call at
    the 8B shape; the exact-reuse bound's share (stretch: 0.8)."""
    path = results / "gpu_8b.json"
    if not path.is_file():
        return {}
    gpu = json.loads(path.read_text(encoding="utf-8"))
    if "ragray" not in gpu:
        return {}
    where = {"device": gpu.get("device"), "commit": gpu.get("machine", {}).get("commit")}
    return {
        "gpu_8b_calls_per_s": _figure(gpu["ragray"]["calls_per_s"], 30.0, "gpu_8b.json", **where),
        "gpu_8b_speedup_vs_naive_logprob": _figure(gpu.get("x_naive_logprob"), 3.0, "gpu_8b.json",
                                                   vs_logits_at_answer_only=gpu.get("x_naive_lean"), **where),
        "gpu_8b_share_of_exact_reuse_bound": _figure(gpu.get("share_of_exact_reuse_bound"), 0.8, "gpu_8b.json",
                                                     no_reuse=gpu.get("share_of_no_reuse_bound"), **where),
    }


def acceptance(results: Path, sections: list[str]) -> dict[str, Any]:
    """Every acceptance figure the finished sections in ``results`` allow."""
    out: dict[str, Any] = {}
    for name, fn in (("generation", _generation), ("limits", _limits), ("contextcite", _contextcite),
                     ("retrieval", _retrieval), ("scaling", _scaling), ("throughput", _throughput),
                     ("vllm_in_flight", _vllm_in_flight), ("engine", _engine)):
        data = _load(results, name, sections)
        if data is not None:
            out.update(fn(data))
    out.update(_gpu_engine(results))
    return out
