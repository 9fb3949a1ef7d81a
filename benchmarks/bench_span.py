"""Which part of the answer to score (``influence.answer_span``), measured on known truth.

    python benchmarks/bench_span.py [--spans full through_gold first_clause] [--runs /tmp/bench-span]

A small model answers and goes on inventing ("…is 31 metres tall, painted plain white, and shows a
red flash…": the tail copied from another lighthouse's passage). Scoring the whole answer lets the
tail decide which passage looks used. Each span runs ``ragray run`` at defaults otherwise on:

- **the demo set** (all 36 questions, BM25 top 10 of its corpus): the right answers' gold passages
  are known. Per span: how often the passage with the most credit is gold, how many "used" marks
  are gold, how many right answers whose gold passage the retriever ranked first are called
  MISALIGNED (a false alarm: the answer's evidence was ranked first);
- **HotpotQA** (the first 60 dev questions, each with its own 10 paragraphs, BM25's order): the
  same counts as the demo on the right answers, a held-out check of the demo's figures;
- **source tracing** (:mod:`ragray.data.conflicts`, the cases of ``bench_tracing``): a gold passage,
  a copy whose answer is replaced by another question's answer of the same kind, three distractors,
  in BM25's order (the default); the answer's content says which of the two it took. Per span: how often the
  passage with the most credit is that source. The tune split is the first 30 SQuAD and 20 HotpotQA
  cases ``bench_tracing``'s stage 1 found usable, the test split the next 90 and 50.

Every span runs the same generations (the call cache answers the baselines again), so the spans
differ only in what is scored. The states (measured / diffuse / context ignored) are counted too: a
span that leaves too little to score makes questions diffuse. The choice was made on the demo set
and the tune split; the test split reports it. Results: ``benchmarks/results/answer_span.json``.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from benchmarks.machine import REPO, SHARED_DATA, machine_info, save_result

SPLITS = {"tune": (0, 30, 0, 20), "test": (30, 120, 20, 70)}  # squad [a, b), hotpotqa [c, d) of usable cases


def tracing_cases(runs: Path) -> dict[str, Any]:
    """The usable tracing cases per split -> JSONL files under ``runs``; id -> the two candidates."""
    from benchmarks.bench_tracing import EXPORT, SETS, _read, cases_for

    stage1 = {r["id"]: r for r in _read(EXPORT / "stage1.jsonl")}
    usable = {}
    for name, candidates in (("squad", 700), ("hotpotqa", 400)):
        cases = cases_for(name, SHARED_DATA / SETS[name], candidates)
        usable[name] = [c for c in cases if stage1.get(c.record["id"], {}).get("taken")]
    meta = {}
    for split, (a, b, c, d) in SPLITS.items():
        chosen = usable["squad"][a:b] + usable["hotpotqa"][c:d]
        (runs / f"tracing_{split}.jsonl").write_text("".join(json.dumps(x.record) + "\n" for x in chosen))
        meta.update({x.record["id"]: {"answer": x.answer, "substitute": x.substitute,
                                      "original_id": x.original_id, "copy_id": x.copy_id} for x in chosen})
    return meta


def run(dataset: str, span: str, out: Path, extra: list[str]) -> Path:
    if not (out / "summary.json").exists():
        cmd = [sys.executable, "-m", "ragray.adapters.cli", "run", "--dataset", dataset, "--no-progress",
               "--set", f"influence.answer_span={span}", "--set", "generation.dtype=float32", "--out", str(out),
               *extra]
        subprocess.run(cmd, check=True, stdout=subprocess.DEVNULL, env={**os.environ, "PYTHONPATH": str(REPO)})
    return out


def _tables(run_dir: Path) -> tuple[Any, Any]:
    import pandas as pd

    return pd.read_parquet(run_dir / "questions.parquet"), pd.read_parquet(run_dir / "passages.parquet")


def _top_share(pp: Any, truth: Any) -> float:
    """The share of the passages tied at the top credit that are ``truth`` (ties share the hit, as
    in the validity panel's recovery@1: an all-tied question is not a hit for free)."""
    top = pp.credit == pp.credit.max()
    return float(truth[top].mean())


def _states(q: Any) -> dict[str, int]:
    return {str(k): int(v) for k, v in q.state.value_counts().items()}


def demo_truth(run_dir: Path) -> dict[str, Any]:
    """Right answers with a gold passage retrieved: the top-credit passage, used marks, false alarms."""
    q, p = _tables(run_dir)
    out = {"questions": len(q), "states": _states(q), "right": int((q.answer_correct == True).sum())}  # noqa: E712
    n = top = used_gold = used = gold_first = false_alarm = 0
    for _, r in q[(q.answer_correct == True) & (q.state == "measured")].iterrows():  # noqa: E712
        pp = p[p.question_id == r.question_id]
        if not pp.is_gold.any():
            continue
        n += 1
        top += _top_share(pp, pp.is_gold)
        used_gold += int((pp.used & pp.is_gold).sum())
        used += int(pp.used.sum())
        if pp[pp.retrieval_rank == 1].is_gold.any():
            gold_first += 1
            false_alarm += bool(r.misaligned)
    return {**out, "right_measured": n, "top_credit_gold": top, "used_marks": used, "used_marks_gold": used_gold,
            "right_gold_ranked_first": gold_first, "misaligned_of_those": false_alarm}


def tracing_truth(run_dir: Path, meta: dict[str, Any]) -> dict[str, Any]:
    """Cases whose answer names one of the two sources: is the top-credit passage that source?"""
    from ragray.data.conflicts import taken_source

    q, p = _tables(run_dir)
    traced = n = top = 0
    hits: dict[str, bool] = {}
    for _, r in q.iterrows():
        m = meta[r.question_id]
        taken = taken_source(r.baseline_answer or "", m["answer"], m["substitute"])
        if not taken:
            continue
        traced += 1
        if r.state != "measured":
            continue
        truth = m["original_id"] if taken == "original" else m["copy_id"]
        pp = p[p.question_id == r.question_id]
        n += 1
        hits[r.question_id] = _top_share(pp, pp.passage_id == truth) == 1.0
        top += hits[r.question_id]
    return {"questions": len(q), "states": _states(q), "traced": traced, "traced_measured": n,
            "top_credit_is_source": top, "hits": hits}


def paired(a: dict[str, bool], b: dict[str, bool]) -> dict[str, Any]:
    """Questions measured under both spans: b right where a was wrong, and the reverse (exact sign test)."""
    from ragray.metrics.stats import sign_test

    both = sorted(set(a) & set(b))
    better = sum(b[i] and not a[i] for i in both)
    worse = sum(a[i] and not b[i] for i in both)
    test = sign_test([1.0] * better + [-1.0] * worse)
    return {"n": len(both), "better": better, "worse": worse, "p": test["p_value"] if better + worse else None}


def main(argv: list[str] | None = None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--spans", nargs="+", default=["full", "through_gold", "first_clause"])
    ap.add_argument("--runs", type=Path, default=Path("/tmp/bench-span"))
    ap.add_argument("--out", type=Path, default=REPO / "benchmarks" / "results" / "answer_span.json")
    args = ap.parse_args(argv)
    args.runs.mkdir(parents=True, exist_ok=True)
    meta = tracing_cases(args.runs)
    hotpot = args.runs / "hotpotqa_60.jsonl"
    with open(SHARED_DATA / "hotpotqa_distractor_dev.jsonl", encoding="utf-8") as f:
        hotpot.write_text("".join(line for _, line in zip(range(60), f)))
    result: dict[str, Any] = {"spans": args.spans, "demo": {}, "hotpotqa": {}, "tracing": {s: {} for s in SPLITS}}
    for span in args.spans:
        result["demo"][span] = demo_truth(run("demo", span, args.runs / f"demo_{span}", ["--limit", "36"]))
        result["hotpotqa"][span] = demo_truth(run(str(hotpot), span, args.runs / f"hotpotqa_{span}", []))
        for split in SPLITS:
            data = str(args.runs / f"tracing_{split}.jsonl")
            result["tracing"][split][span] = tracing_truth(
                run(data, span, args.runs / f"tracing_{split}_{span}", []), meta)
    base = args.spans[0]
    for split in SPLITS:
        got = result["tracing"][split]
        for span in args.spans[1:]:
            got[f"{span}_vs_{base}"] = paired(got[base]["hits"], got[span]["hits"])
        for span in args.spans:
            got[span].pop("hits")
    result["machine"] = machine_info(("torch", "transformers"))
    print(json.dumps({k: v for k, v in result.items() if k != "machine"}, indent=1))
    save_result(args.out, result)


if __name__ == "__main__":
    main()
