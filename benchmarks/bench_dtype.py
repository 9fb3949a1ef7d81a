"""bf16 against fp32: do the influence results agree, and what does each cost on this CPU? (issue 18)

    python benchmarks/bench_dtype.py [--questions 5] [--datasets hotpotqa squad] [--measure default]
        [--runs runs/bench-dtype] [--out benchmarks/results/dtype_default.json]

Per data set (``../shared/data``), the packaged SmolLM2-135M-Instruct, BM25 top-10, the default
measure (keep-alone + drop-one with interactions; ``--measure logprob_share``: drop-one log-prob, the
default before issue 43, whose figures are in ``results/dtype.json``), once with
``generation.dtype=float32`` and once with ``bfloat16``, on the same questions. Per question it
compares the two runs: the same baseline answer, the same most influential passage, the same state
and ``misaligned`` verdict, the same passages marked used (and how many passages' marks differ),
the Spearman ρ between the two influence vectors and their largest single-passage difference; and it records
seconds per question of each dtype, and whether bf16 is faster on this CPU (``native_bf16()``;
``generation.dtype: auto`` took bf16 where it was until these figures showed the verdicts it
changed, and is fp32 on every CPU since). The run directories are kept under ``--runs``: an
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


#: the measure settings: the default (nothing set), or drop-one log-prob (the default before issue 43)
MEASURES = {"default": [], "logprob_share": ["influence.mode=logprob_share"]}


def _run(dataset: str, n: int, dtype: str, out: Path, measure: str = "default") -> float:
    """Runs (or resumes) one dtype's run; returns its wall seconds (this call's share)."""
    from ragray.pipeline import run_influence

    file, retrieval = DATASETS[dataset]
    config = load_config(None, [f"data.path={SHARED_DATA / file}", f"data.limit={n}", "retrieval.retriever=bm25",
                                *retrieval, "execution.executor=local", *MEASURES[measure],
                                f"generation.dtype={dtype}"])
    start = time.perf_counter()
    run_influence(config, out, resume=(out / "progress.jsonl").is_file(), progress=True)
    return time.perf_counter() - start


def _tables(run_dir: Path) -> tuple[dict[str, dict], dict[str, dict[str, float]], dict[str, dict[str, Any]]]:
    """Questions by id; per question each passage's influence and its used mark."""
    data = load_run(run_dir)
    questions = {q["question_id"]: q for q in data.table("questions")}
    influence: dict[str, dict[str, float]] = {}
    used: dict[str, dict[str, Any]] = {}
    for p in data.table("passages"):
        influence.setdefault(p["question_id"], {})[p["passage_id"]] = p["influence"]
        used.setdefault(p["question_id"], {})[p["passage_id"]] = p.get("used")
    return questions, influence, used


def _top(ids: list[str], values: np.ndarray, ok: np.ndarray) -> frozenset[str]:
    """The most influential passages (all of them when tied; none when nothing has influence),
    so a tie broken differently in each dtype is not counted as a disagreement."""
    if not ok.any() or np.nanmax(values[ok]) <= 0:
        return frozenset()
    top = np.nanmax(values[ok])
    return frozenset(i for i, v, good in zip(ids, values, ok) if good and v == top)


def compare_question(q32: dict, q16: dict, inf32: dict[str, float], inf16: dict[str, float],
                     used32: dict[str, Any] | None = None, used16: dict[str, Any] | None = None) -> dict[str, Any]:
    """One question's agreement between the fp32 and the bf16 run (None where a run has no number)."""
    used32, used16 = used32 or {}, used16 or {}
    marked = sorted(set(used32) & set(used16))
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
        "states": [q32["state"], q16["state"]],
        "misaligned": [q32["misaligned"], q16["misaligned"]],
        "same_used": all(bool(used32[i]) == bool(used16[i]) for i in marked),
        "used_marks_differ": sum(bool(used32[i]) != bool(used16[i]) for i in marked),
        "passages_compared": len(marked),
        "used": [sorted(i for i in marked if used32[i]), sorted(i for i in marked if used16[i])],
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
        **{k: sum(bool(r.get(k)) for r in rows)
           for k in ("same_answer", "same_top1", "same_state", "same_misaligned", "same_used")},
        "used_marks_differ": sum(r.get("used_marks_differ") or 0 for r in rows),
        "passages_compared": sum(r.get("passages_compared") or 0 for r in rows),
        # where both dtypes gave the same answer, the measurement itself is what differs
        "same_answer_and_used": sum(bool(r["same_answer"] and r.get("same_used")) for r in rows),
        "rho_undefined": len(rows) - len(rhos),
        "rho_mean": float(np.mean(rhos)) if rhos else None,
        "rho_min": float(np.min(rhos)) if rhos else None,
        "rho_max": float(np.max(rhos)) if rhos else None,
        "max_abs_diff": float(np.max(diffs)) if diffs else None,
        "median_abs_diff_max": float(np.median(diffs)) if diffs else None,
        "seconds_per_question_fp32": median("seconds_fp32"),
        "seconds_per_question_bf16": median("seconds_bf16"),
    }


def bench_dataset(dataset: str, n: int, runs: Path, measure: str = "default") -> dict[str, Any]:
    dirs = {dtype: runs / f"{dataset}-{measure}-{dtype}" for dtype in DTYPES}
    wall = {dtype: _run(dataset, n, dtype, dirs[dtype], measure) for dtype in DTYPES}
    (q32, i32, u32), (q16, i16, u16) = _tables(dirs["float32"]), _tables(dirs["bfloat16"])
    rows = [compare_question(q32[qid], q16[qid], i32.get(qid, {}), i16.get(qid, {}), u32.get(qid), u16.get(qid))
            for qid in q32 if qid in q16]
    return {"summary": summarize(rows), "wall_seconds_this_call": wall, "questions": rows}


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--questions", type=int, default=5)
    ap.add_argument("--datasets", nargs="+", default=["hotpotqa", "squad"], choices=list(DATASETS))
    ap.add_argument("--measure", default="default", choices=list(MEASURES))
    ap.add_argument("--runs", default="runs/bench-dtype")
    ap.add_argument("--out", default=None, help="default: results/dtype_default.json (--measure logprob_share: dtype.json)")
    args = ap.parse_args()
    out = args.out or str(Path(__file__).parent / "results" / ("dtype.json" if args.measure == "logprob_share"
                                                              else f"dtype_{args.measure}.json"))
    flags = cpu_flags()
    result: dict[str, Any] = {
        "machine": machine_info(("torch", "transformers")),
        "native_bf16": native_bf16(),
        "bf16_flags": sorted(f for f in flags if "bf16" in f or f.startswith("amx")),
        "settings": {"questions": args.questions, "retriever": "bm25", "top_k": "10 (pubmedqa 5)",
                     "measure": args.measure, "settings": MEASURES[args.measure],
                     "model": "SmolLM2-135M-Instruct"},
        "datasets": {},
    }
    for dataset in args.datasets:
        result["datasets"][dataset] = bench_dataset(dataset, args.questions, Path(args.runs), args.measure)
        save_result(out, result)
    rows = [r for d in result["datasets"].values() for r in d["questions"]]
    result["overall"] = summarize(rows)
    print(save_result(out, result))
    print(result["overall"])
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
