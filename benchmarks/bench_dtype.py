"""bf16 against fp32: do the influence results agree, and what does each cost on this CPU? (issue 18)

    python benchmarks/bench_dtype.py [--questions 5] [--datasets hotpotqa squad]
        [--runs runs/bench-dtype] [--out benchmarks/results/dtype.json]

Per data set (``../shared/data``), the packaged SmolLM2-135M-Instruct, BM25 top-10, log-prob
influence (what ``influence.mode: auto`` runs locally), once with ``generation.dtype=float32`` and
once with ``bfloat16``, on the same questions. Per question it compares the two runs: the same
baseline answer, the same most influential passage, the same ``misaligned`` verdict, the Spearman ρ
between the two influence vectors and their largest single-passage difference; and it records
seconds per question of each dtype, and whether this CPU has native bf16 (``native_bf16()``, what
``generation.dtype: auto`` decides by). The run directories are kept under ``--runs``: an
interrupted benchmark resumes where it stopped.
"""

from __future__ import annotations

import argparse
import math
import sys
import time
from pathlib import Path
from typing import Any

import numpy as np
from scipy.stats import spearmanr

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from benchmarks.machine import SHARED_DATA, machine_info, save_result
from benchmarks.bench_validity import DATASETS
from ragray.config import load_config
from ragray.generation.transformers.cpu_features import cpu_flags, native_bf16
from ragray.report.rundata import load_run

DTYPES = ("float32", "bfloat16")


def _run(dataset: str, n: int, dtype: str, out: Path) -> float:
    """Runs (or resumes) one dtype's run; returns its wall seconds (this call's share)."""
    from ragray.pipeline import run_influence

    file, retrieval = DATASETS[dataset]
    config = load_config(None, [f"data.path={SHARED_DATA / file}", f"data.limit={n}", "retrieval.retriever=bm25",
                                *retrieval, "execution.executor=local", "influence.mode=logprob",
                                f"generation.dtype={dtype}"])
    start = time.perf_counter()
    run_influence(config, out, resume=(out / "progress.jsonl").is_file(), progress=True)
    return time.perf_counter() - start


def _tables(run_dir: Path) -> tuple[dict[str, dict], dict[str, dict[str, float]]]:
    data = load_run(run_dir)
    questions = {q["question_id"]: q for q in data.table("questions")}
    influence: dict[str, dict[str, float]] = {}
    for p in data.table("passages"):
        influence.setdefault(p["question_id"], {})[p["passage_id"]] = p["influence"]
    return questions, influence


def _top(ids: list[str], values: np.ndarray, ok: np.ndarray) -> frozenset[str]:
    """The most influential passages (all of them when tied; none when nothing has influence),
    so a tie broken differently in each dtype is not counted as a disagreement."""
    if not ok.any() or np.nanmax(values[ok]) <= 0:
        return frozenset()
    top = np.nanmax(values[ok])
    return frozenset(i for i, v, good in zip(ids, values, ok) if good and v == top)


def compare_question(q32: dict, q16: dict, inf32: dict[str, float], inf16: dict[str, float]) -> dict[str, Any]:
    """One question's agreement between the fp32 and the bf16 run (None where a run has no number)."""
    ids = sorted(set(inf32) & set(inf16))
    a = np.array([inf32[i] for i in ids], dtype=float)
    b = np.array([inf16[i] for i in ids], dtype=float)
    ok = np.isfinite(a) & np.isfinite(b)
    rho = None
    if ok.sum() >= 2 and np.ptp(a[ok]) > 0 and np.ptp(b[ok]) > 0:
        rho = float(spearmanr(a[ok], b[ok]).statistic)
    top32, top16 = _top(ids, a, ok), _top(ids, b, ok)
    return {
        "question_id": q32["question_id"],
        "same_answer": q32["baseline_answer"] == q16["baseline_answer"],
        "same_top1": top32 == top16,
        "same_state": q32["state"] == q16["state"],
        "same_misaligned": q32["misaligned"] == q16["misaligned"],
        "influence_spearman": rho,
        "max_abs_diff": float(np.max(np.abs(a[ok] - b[ok]))) if ok.any() else None,
        "seconds_fp32": q32["seconds"],
        "seconds_bf16": q16["seconds"],
    }


def summarize(rows: list[dict[str, Any]]) -> dict[str, Any]:
    """Counts of agreement, and the spread of ρ (questions with an undefined ρ are counted, not averaged)."""
    rhos = [r["influence_spearman"] for r in rows if r["influence_spearman"] is not None]
    diffs = [r["max_abs_diff"] for r in rows if r["max_abs_diff"] is not None]

    def median(key: str) -> float | None:
        vals = [r[key] for r in rows if r[key] is not None and math.isfinite(r[key])]
        return float(np.median(vals)) if vals else None

    return {
        "questions": len(rows),
        **{k: sum(bool(r[k]) for r in rows) for k in ("same_answer", "same_top1", "same_state", "same_misaligned")},
        "rho_undefined": len(rows) - len(rhos),
        "rho_mean": float(np.mean(rhos)) if rhos else None,
        "rho_min": float(np.min(rhos)) if rhos else None,
        "rho_max": float(np.max(rhos)) if rhos else None,
        "max_abs_diff": float(np.max(diffs)) if diffs else None,
        "median_abs_diff_max": float(np.median(diffs)) if diffs else None,
        "seconds_per_question_fp32": median("seconds_fp32"),
        "seconds_per_question_bf16": median("seconds_bf16"),
    }


def bench_dataset(dataset: str, n: int, runs: Path) -> dict[str, Any]:
    dirs = {dtype: runs / f"{dataset}-{dtype}" for dtype in DTYPES}
    wall = {dtype: _run(dataset, n, dtype, dirs[dtype]) for dtype in DTYPES}
    (q32, i32), (q16, i16) = _tables(dirs["float32"]), _tables(dirs["bfloat16"])
    rows = [compare_question(q32[qid], q16[qid], i32.get(qid, {}), i16.get(qid, {})) for qid in q32 if qid in q16]
    return {"summary": summarize(rows), "wall_seconds_this_call": wall, "questions": rows}


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--questions", type=int, default=5)
    ap.add_argument("--datasets", nargs="+", default=["hotpotqa", "squad"], choices=list(DATASETS))
    ap.add_argument("--runs", default="runs/bench-dtype")
    ap.add_argument("--out", default=str(Path(__file__).parent / "results" / "dtype.json"))
    args = ap.parse_args()
    flags = cpu_flags()
    result: dict[str, Any] = {
        "machine": machine_info(("torch", "transformers")),
        "native_bf16": native_bf16(),
        "bf16_flags": sorted(f for f in flags if "bf16" in f or f.startswith("amx")),
        "settings": {"questions": args.questions, "retriever": "bm25", "top_k": "10 (pubmedqa 5)",
                     "influence.mode": "logprob", "model": "SmolLM2-135M-Instruct"},
        "datasets": {},
    }
    for dataset in args.datasets:
        result["datasets"][dataset] = bench_dataset(dataset, args.questions, Path(args.runs))
        save_result(args.out, result)
    rows = [r for d in result["datasets"].values() for r in d["questions"]]
    result["overall"] = summarize(rows)
    print(save_result(args.out, result))
    print(result["overall"])
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
