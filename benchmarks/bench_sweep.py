"""A large sweep on a real two-node cluster with the packaged model, with and without ASHA
(issue 27 item 6): wall time, model calls, questions run, and whether ASHA's winner is the full
grid's winner on the same questions.

    python benchmarks/bench_sweep.py                       # 12 configurations x 200 SQuAD questions
    python benchmarks/bench_sweep.py --questions 20 --name smoke

The cluster is what ``tests/cluster/_cluster.py`` starts (``ray start --head`` + ``ray start
--address``, each node with its own --temp-dir, one CPU each on this 2-core machine); each sweep is
a ``ray job submit -- ragray sweep`` from this checkout. The grid: retriever BM25 / dense (MiniLM) /
hybrid x top_k 1 / 2 x prompt template numbered / plain over SQuAD 1.1 dev questions (after the
evidence benchmark's tuning split) with the global corpus, objective quality, the packaged
SmolLM2 in fp32 with 8-token answers, two one-CPU trials at a time (budget, measured on a 2-core
AMD EPYC: 3-6 s per question and trial at top_k 1-2, 9-10 s at top_k 3, so the full grid of 2,400
trial-questions is about 80 minutes). Each sweep gets its own empty cache directory, so neither
answers the other's calls. Results (written after each sweep): ``benchmarks/results/sweep.json``
(or ``sweep-<name>.json``). The committed runs kept no per-question scores:
``benchmarks/results/archive/sweep.json`` and ``sweep-threads.json``, not re-checkable.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import tempfile
import time
import uuid
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from benchmarks.machine import REPO, SHARED_DATA, machine_info, save_result

OFFSET = 150  # after the evidence benchmark's tuning split


GRID = "retrieval: {retriever: [bm25, dense, hybrid], top_k: [1, 2]}\ngeneration: {template: [numbered, plain]}"


def spec_text(name: str, data: Path, corpus: Path, cache: Path, history: Path, asha: bool, grace: int,
              grid: str = GRID, extra: str = "") -> str:
    search = f"search: {{scheduler: asha, grace_questions: {grace}, reduction_factor: 3}}\n" if asha else ""
    return f"""
name: {name}
set: [data.path={data}, data.corpus={corpus}, retrieval.scope=global, generation.dtype=float32, generation.max_tokens=8,
      cache.dir={cache}, history.url=sqlite:///{history}{extra}]
{grid}
objective: quality
report_every: 10
execution: {{cpus_per_trial: 1, concurrency: 2, timeout_s: 36000}}
{search}"""


def calls_of(out: Path) -> int:
    """Model calls the sweep made: every trial's ``n_calls`` (its run summary), stopped trials included
    (their calls counted from the run log)."""
    total = 0
    for trial in (out / "trials").iterdir():
        summary = trial / "summary.json"
        if summary.is_file():
            total += int(json.loads(summary.read_text())["n_calls"] or 0)
        elif (trial / "progress.jsonl").is_file():
            total += sum(len(json.loads(x).get("calls", [])) for x in (trial / "progress.jsonl").read_text().splitlines()
                         if x.strip())
    return total


def run_one(cluster: Any, work: Path, name: str, data: Path, corpus: Path, asha: bool, grace: int,
            **spec_args: str) -> dict[str, Any]:
    from tests.cluster._cluster import submit

    spec = work / f"{name}.yaml"
    spec.write_text(spec_text(name, data, corpus, work / f"cache-{name}", work / "history.sqlite", asha, grace,
                              **spec_args))
    out = work / name
    start = time.perf_counter()
    done = submit(cluster, f"bench-{name}-{uuid.uuid4().hex[:6]}", ["ragray", "sweep", str(spec), "--out", str(out)],
                  timeout=36000)
    wall = time.perf_counter() - start
    if done.returncode != 0 and not (out / "summary.json").is_file():
        raise RuntimeError(f"sweep {name} failed:\n{(done.stdout + done.stderr)[-3000:]}")
    summary = json.loads((out / "summary.json").read_text())
    import pyarrow.parquet as pq

    board = pq.read_table(out / "leaderboard.parquet").to_pylist()
    return {
        "wall_seconds": wall, "model_calls": calls_of(out), "questions_run": summary["questions_run"],
        "n_done": summary["n_done"], "n_stopped": summary["n_stopped"], "n_failed": summary["n_failed"],
        "winner": summary["best"]["label"] if summary.get("best") else None,
        "nodes": sorted({r["node"] for r in board if r["node"]}),
        "leaderboard": [{k: r[k] for k in ("rank", "label", "status", "score", "overall_low", "overall_high",
                                           "n_questions", "node")} for r in board],
    }


def per_question_scores(out: Path) -> dict[str, dict[str, float]]:
    """label -> question id -> the leaderboard's per-question composite, for finished trials."""
    from ragray.adapters.sweep.score import composite

    weights = json.loads((out / "sweep.json").read_text())["scoring"]["weights"]
    labels = {t["id"]: t["label"] for t in json.loads((out / "sweep.json").read_text())["trials"]}
    scores = {}
    for trial in sorted((out / "trials").iterdir()):
        if (trial / "trial.json").is_file():
            qs = json.loads((trial / "trial.json").read_text())["questions"]
            scores[labels[trial.name]] = {q["question_id"]: c for q in qs if (c := composite(q, weights)) is not None}
    return scores


def decidability(grid: dict[str, Any], out: Path) -> dict[str, Any]:
    """How far the grid's winner is from each other configuration on the same questions: the paired
    difference of per-question scores with its 95% CI, and the questions a two-sided 5% test with
    80% power would need to tell that difference from zero (``(z_.975 + z_.8)^2 sd^2 / d^2``)."""
    import math
    import statistics

    scores = per_question_scores(out)
    best = grid["winner"]
    rows = []
    for label, s in scores.items():
        if label == best:
            continue
        common = sorted(set(s) & set(scores[best]))
        diffs = [scores[best][q] - s[q] for q in common]
        d, sd = statistics.fmean(diffs), statistics.stdev(diffs)
        half = 1.96 * sd / math.sqrt(len(diffs))
        rows.append({"label": label, "n": len(diffs), "difference": d, "low": d - half, "high": d + half,
                     "p": math.erfc(abs(d) / (sd / math.sqrt(len(diffs))) / math.sqrt(2)) if sd > 0 else 0.0,
                     "questions_to_decide": math.ceil((1.96 + 0.8416) ** 2 * sd**2 / d**2) if d > 0 else None})
    # Holm over the comparisons with the winner: decided = its difference is > 0 after correction
    rows.sort(key=lambda r: r["p"])
    going = True
    for i, r in enumerate(rows):
        going = going and r["p"] <= 0.05 / (len(rows) - i)
        r["decided"] = going and r["difference"] > 0
    rows.sort(key=lambda r: r["difference"])
    return {"winner": best, "vs_winner": rows, "test": "paired, normal approximation, Holm over the comparisons",
            "undecided": [r["label"] for r in rows if not r["decided"]]}


def seconds_per_question(out: Path) -> dict[str, float]:
    """Each trial's median seconds per question (its run log), by trial label."""
    import statistics

    labels = {t["id"]: t["label"] for t in json.loads((out / "sweep.json").read_text())["trials"]}
    return {labels[t.name]: statistics.median(json.loads(x)["question"]["seconds"]
                                              for x in (t / "progress.jsonl").read_text().splitlines() if x.strip())
            for t in sorted((out / "trials").iterdir()) if (t / "progress.jsonl").is_file()}


def threads_check(cluster: Any, work: Path, data: Path, corpus: Path) -> dict[str, Any]:
    """Two one-CPU trials at once, their models on every core of the host (ragray before the fix:
    ``generation.transformers.threads`` = the cores) vs on the one CPU each reserved (the default)."""
    cores = len(os.sched_getaffinity(0))
    grid = "retrieval: {retriever: [bm25], top_k: [2]}\ngeneration: {template: [numbered, plain]}"
    out: dict[str, Any] = {"questions": sum(1 for _ in data.open()), "trials": 2, "host_cores": cores}
    for name, extra in ((f"threads_{cores}_each", f", generation.transformers.threads={cores}"),
                        ("threads_reserved", "")):
        r = run_one(cluster, work, name, data, corpus, False, 0, grid=grid, extra=extra)
        out[name] = {"wall_seconds": r["wall_seconds"], "median_seconds_per_question": seconds_per_question(work / name)}
    out["speedup"] = out[f"threads_{cores}_each"]["wall_seconds"] / out["threads_reserved"]["wall_seconds"]
    return out


def compare(result: dict[str, Any], work: Path) -> None:
    """ASHA against the full grid on the same questions: what it saved, whether it chose the grid's
    winner, and, since the grid's top configurations can be within noise of each other, where
    ASHA's winner and the configurations it stopped stand in the grid (rank, paired difference to
    the grid's winner, and whether 200 questions decide it)."""
    if "grid" not in result:
        return
    result["decidability"] = decide = decidability(result["grid"], work / "grid")
    if "asha" not in result:
        return
    g, a = result["grid"], result["asha"]
    rank = {r["label"]: r["rank"] for r in g["leaderboard"]}
    gap = {r["label"]: r for r in decide["vs_winner"]}
    stopped = [r["label"] for r in a["leaderboard"] if r["status"] == "stopped"]
    result["asha_vs_grid"] = {
        "wall_saved": 1 - a["wall_seconds"] / g["wall_seconds"],
        "calls_saved": 1 - a["model_calls"] / g["model_calls"] if g["model_calls"] else None,
        "questions_saved": 1 - a["questions_run"] / g["questions_run"],
        "same_winner": a["winner"] == g["winner"],
        "asha_winner_grid_rank": rank.get(a["winner"]),
        "asha_winner_gap": gap[a["winner"]]["difference"] if a["winner"] in gap else 0.0,
        "asha_winner_tied_with_grid_winner": a["winner"] == g["winner"] or a["winner"] in decide["undecided"],
        "stopped_grid_ranks": sorted(rank[x] for x in stopped),
        # the grid's winner itself, or one 200 questions cannot tell from it, stopped early
        "stopped_but_tied_with_grid_winner": [x for x in stopped if x == g["winner"] or x in decide["undecided"]],
    }


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--questions", type=int, default=200)
    ap.add_argument("--grace", type=int, default=20, help="ASHA grace period (questions)")
    ap.add_argument("--name", default=None, help="results file suffix")
    ap.add_argument("--only", choices=["grid", "asha", "threads"], default=None)
    ap.add_argument("--threads-questions", type=int, default=10, help="questions of the threads check")
    ap.add_argument("--analyse", type=Path, default=None,
                    help="no model: add the winner's decidability and ASHA's regret to RESULT from the run "
                         "directory given with --work")
    ap.add_argument("--work", type=Path, default=None, help="the benchmark's run directory (with --analyse)")
    args = ap.parse_args(argv)
    if args.analyse:
        result = json.loads(args.analyse.read_text())
        compare(result, args.work)
        save_result(args.analyse, result)
        print(json.dumps(result.get("asha_vs_grid"), indent=1))
        return 0
    from tests.cluster._cluster import add_worker, start_head, stop_cluster

    source = SHARED_DATA / "squad_v11_dev.jsonl"
    rows = [json.loads(x) for x in source.read_text(encoding="utf-8").split("\n") if x.strip()]
    work = Path(tempfile.mkdtemp(prefix="bench-sweep-", dir=REPO / "runs" if (REPO / "runs").is_dir() else None))
    data = work / "questions.jsonl"
    data.write_text("".join(json.dumps(r) + "\n" for r in rows[OFFSET:OFFSET + args.questions]), encoding="utf-8")
    corpus = SHARED_DATA / "squad_v11_dev.corpus.jsonl"
    result: dict[str, Any] = {"questions": args.questions, "configurations": 12, "grace_questions": args.grace,
                              "reduction_factor": 3, "report_every": 10, "cluster": "2 nodes x 1 CPU, one host",
                              "data": f"squad_v11_dev[{OFFSET}:{OFFSET + args.questions}], global corpus"}
    out = REPO / "benchmarks" / "results" / (f"sweep-{args.name}.json" if args.name else "sweep.json")
    cluster = start_head(num_cpus=1, prefix="rgbench-", multi_node=True)
    try:
        add_worker(cluster, num_cpus=1)
        for kind in ("grid", "asha"):
            if args.only in (None, kind):
                result[kind] = run_one(cluster, work, f"{kind}", data, corpus, kind == "asha", args.grace)
                print(kind, json.dumps({k: v for k, v in result[kind].items() if k != "leaderboard"}), flush=True)
                save_result(out, {**result, "partial": True, "machine": machine_info(("torch", "transformers", "ray"))})
        if args.only in (None, "threads"):
            small = work / "threads.jsonl"
            small.write_text("".join(json.dumps(r) + "\n" for r in rows[OFFSET:OFFSET + args.threads_questions]),
                             encoding="utf-8")
            result["threads"] = threads_check(cluster, work, small, corpus)
            print("threads", json.dumps(result["threads"]), flush=True)
    finally:
        stop_cluster(cluster)
    compare(result, work)
    result["machine"] = machine_info(("torch", "transformers", "ray", "optuna"))
    save_result(out, result)
    print(json.dumps(result.get("asha_vs_grid"), indent=1))
    print(f"wrote {out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
