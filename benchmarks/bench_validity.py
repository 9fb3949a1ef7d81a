"""Validity of ragray's influence measures against gold passages, per data set (SPEC §11).

    python benchmarks/bench_validity.py [--questions 30] [--datasets hotpotqa squad pubmedqa]
        [--position-questions 0] [--runs runs/bench-validity] [--out benchmarks/results/validity_v1.json]

Per data set (``../shared/data``), the packaged SmolLM2-135M-Instruct (fp32, greedy), BM25:

- ``rouge_l``: ``influence.mode=loo`` — 32-token answers, influence = 1 − ROUGE-L (the default
  before this benchmark chose log-prob);
- ``semantic``: the same calls, influence = 1 − MiniLM cosine of the answers (no new model calls);
- ``short`` / ``short_semantic``: the same calls with every answer cut to its first 8 tokens —
  exactly what ``generation.max_tokens=8`` generates, since decoding is greedy — scored by ROUGE-L
  and by MiniLM;
- ``logprob``: ``influence.mode=logprob_share`` — the drop in the baseline answer's log-probability
  (what the default ``auto`` runs wherever the backend can score).

Each gets the run's validity panel (recovery@1 and AUC of gold vs non-gold, 95% bootstrap CIs,
over all questions with a gold passage retrieved and over correctly answered ones) beside the
controls that cost no model calls (retrieval rank, answer–passage embedding similarity, random),
and the alignment verdicts (misaligned vs the seed's divergent rate). ``--position-questions N``
adds a run with ``influence.position_control=reversed`` on the first N questions of each set
(``--questions 0`` runs only that). The run directories are kept under ``--runs``: an interrupted
benchmark resumes where it stopped, and data sets already in ``--out`` that a call does not redo
are kept.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from collections import defaultdict
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from benchmarks.machine import SHARED_DATA, machine_info, save_result
from ragray.config import ExperimentConfig, load_config
from ragray.metrics.influence import analyze_influence
from ragray.metrics.similarity import get_similarity
from ragray.metrics.validity import PanelColumn, question_scores, validity_panel
from ragray.report.rundata import load_run

#: data set -> (file, retrieval settings); PubMedQA abstracts are long: k = 5 keeps prompts < 2k tokens
DATASETS: dict[str, tuple[str, list[str]]] = {
    "hotpotqa": ("hotpotqa_distractor_dev.jsonl", ["retrieval.scope=per_question", "retrieval.top_k=10"]),
    "squad": ("squad_v11_dev.jsonl", ["retrieval.scope=global", "retrieval.top_k=10"]),
    "pubmedqa": ("pubmedqa_pqal.jsonl", ["retrieval.scope=global", "retrieval.top_k=5"]),
}
SHORT_TOKENS = 8


def _config(dataset: str, n: int, *extra: str) -> ExperimentConfig:
    file, retrieval = DATASETS[dataset]
    return load_config(None, [f"data.path={SHARED_DATA / file}", f"data.limit={n}", "retrieval.retriever=bm25",
                              *retrieval, "execution.executor=local", *extra])


def _run(config: ExperimentConfig, out: Path) -> dict[str, Any]:
    from ragray.pipeline import run_influence

    start = time.perf_counter()
    resume = (out / "progress.jsonl").is_file()
    result = run_influence(config, out, resume=resume, progress=True)
    return {"seconds": time.perf_counter() - start, "resumed_questions": result.n_resumed}


def reanalyze(data: Any, config: ExperimentConfig, similarity: Callable[[list[tuple[str, str]]], list[float]],
              transform: Callable[[str], str] = lambda a: a) -> tuple[list[dict], list[dict]]:
    """The run's questions and passages with influence recomputed from its calls by ``similarity``
    on the answers (after ``transform``): a different measure on the same generations."""
    answers: dict[str, dict[tuple[str, ...], str]] = defaultdict(dict)
    for c in data.table("calls"):
        if c["arm"] in ("baseline", "drop") and c["error"] is None and c["answer"] is not None:
            answers[c["question_id"]][tuple(c["removed_passage_ids"] or ())] = transform(c["answer"])
    by_q: dict[str, list[dict]] = defaultdict(list)
    for p in data.table("passages"):
        by_q[p["question_id"]].append(dict(p))
    questions, passages = [], []
    for q in data.table("questions"):
        rows = sorted(by_q[q["question_id"]], key=lambda p: p["retrieval_rank"])
        got = answers.get(q["question_id"], {})
        if q["error"] is not None or () not in got:
            questions.append(q)
            passages += rows
            continue
        pairs = [(got[()], got.get((p["passage_id"],), "")) for p in rows]
        sims = similarity(pairs)
        infl = [1.0 - s if (p["passage_id"],) in got else float("nan") for p, s in zip(rows, sims)]
        result = analyze_influence([p["retrieval_rank"] for p in rows], infl, config.influence)
        questions.append({**q, **result.columns()})
        passages += [{**p, "influence": v, "influence_rank": r}
                     for p, v, r in zip(rows, result.influence, result.influence_rank)]
    return questions, passages


def _alignment(questions: list[dict]) -> dict[str, Any]:
    scored = [q for q in questions if q.get("misaligned") is not None]
    measured = [q for q in questions if q.get("divergent") is not None]
    return {"n_scored": len(scored),
            "misaligned_rate": sum(q["misaligned"] for q in scored) / len(scored) if scored else None,
            "divergent_rate": sum(q["divergent"] for q in measured) / len(measured) if measured else None,
            "states": {s: sum(1 for q in questions if q["state"] == s) for s in {q["state"] for q in questions}}}


def _panel(questions: list[dict], passages: list[dict], label: str, seed: int) -> dict[str, Any]:
    return {"alignment": _alignment(questions), "validity": validity_panel(questions, passages, label, seed=seed)}


def bench_dataset(dataset: str, n: int, runs: Path, seed: int) -> dict[str, Any]:
    gen_cfg = _config(dataset, n, "influence.mode=loo")
    lp_cfg = _config(dataset, n, "influence.mode=logprob_share")
    timing = {"generate": _run(gen_cfg, runs / f"{dataset}-generate"),
              "logprob": _run(lp_cfg, runs / f"{dataset}-logprob")}
    gen, lp = load_run(runs / f"{dataset}-generate"), load_run(runs / f"{dataset}-logprob")
    semantic = get_similarity("semantic")
    rouge = get_similarity("rouge_l")
    from transformers import AutoTokenizer

    from ragray.generation.packaged import resolve_generator_model

    tok = AutoTokenizer.from_pretrained(resolve_generator_model(gen_cfg.generation.model))

    def short(answer: str) -> str:
        return tok.decode(tok.encode(answer, add_special_tokens=False)[:SHORT_TOKENS], skip_special_tokens=True)

    measures = {
        "rouge_l": (gen.table("questions"), gen.table("passages"), "drop-one rouge_l (32 tokens)"),
        "semantic": (*reanalyze(gen, gen_cfg, semantic.many), "drop-one semantic (32 tokens)"),
        "short": (*reanalyze(gen, gen_cfg, rouge.many, short), f"drop-one rouge_l ({SHORT_TOKENS} tokens)"),
        "short_semantic": (*reanalyze(gen, gen_cfg, semantic.many, short),
                           f"drop-one semantic ({SHORT_TOKENS} tokens)"),
        "logprob": (lp.table("questions"), lp.table("passages"), "drop-one log-prob"),
    }
    return {"questions": n, "settings": DATASETS[dataset][1], "timing": timing,
            "measures": {name: _panel(q, p, label, seed) for name, (q, p, label) in measures.items()}}


def bench_position(dataset: str, n: int, runs: Path, seed: int) -> dict[str, Any]:
    """``influence.position_control=reversed`` on the first ``n`` questions: how often influence
    follows the slot, and whether content influence finds gold better than one order alone."""
    cfg = _config(dataset, n, "influence.mode=loo", "influence.position_control=reversed")
    timing = _run(cfg, runs / f"{dataset}-reversed")
    data = load_run(runs / f"{dataset}-reversed")
    s = data.summary
    return {"questions": n, "timing": timing, "position": s["position"], "alignment": s["alignment"],
            "divergent_rate": s["divergent_rate"], "validity": s["validity"]}


def _auc_by_question(run_dir: Path) -> dict[str, float]:
    data = load_run(run_dir)
    rows: dict[str, list[dict]] = defaultdict(list)
    for p in data.table("passages"):
        rows[p["question_id"]].append(p)
    measure = PanelColumn("influence", "", "influence")
    out = {}
    for qid, ps in rows.items():
        got = question_scores(sorted(ps, key=lambda p: p["retrieval_rank"]), measure)
        if got is not None:
            out[qid] = got[1]
    return out


def paired_logprob_vs_rouge(runs: Path, datasets: list[str], seed: int, n_boot: int = 4000) -> dict[str, Any]:
    """AUC of log-prob minus ROUGE-L drop-one on the same questions: per data set and pooled,
    mean with a percentile-bootstrap 95% CI (the evidence for the default measure)."""
    rng = np.random.default_rng(seed)

    def ci(d: np.ndarray) -> dict[str, Any]:
        means = d[rng.integers(0, len(d), size=(n_boot, len(d)))].mean(axis=1)
        return {"n": len(d), "mean": float(d.mean()), "low": float(np.percentile(means, 2.5)),
                "high": float(np.percentile(means, 97.5))}

    per, pooled = {}, []
    for name in datasets:
        if not (runs / f"{name}-generate").is_dir() or not (runs / f"{name}-logprob").is_dir():
            continue
        gen, lp = _auc_by_question(runs / f"{name}-generate"), _auc_by_question(runs / f"{name}-logprob")
        diff = [lp[q] - gen[q] for q in gen if q in lp]
        per[name] = ci(np.array(diff))
        pooled += diff
    return {"per_dataset": per, "pooled": ci(np.array(pooled)) if pooled else None}


def _cell(m: dict[str, Any]) -> str:
    r, a = m["recovery_at_1"], m["auc"]
    if r["mean"] is None:
        return "–"
    return (f"{r['mean']:.2f} [{r['low']:.2f}, {r['high']:.2f}] / "
            f"{a['mean']:.2f} [{a['low']:.2f}, {a['high']:.2f}]")


def markdown_table(result: dict[str, Any], subset: str = "all") -> str:
    """The README's table: recovery@1 / AUC with 95% CIs per data set, measure and control."""
    rows = ["| measure | " + " | ".join(f"{d} (n = {{{d}}})" for d in result["datasets"]) + " |",
            "|---|" + "---|" * len(result["datasets"])]
    names: dict[str, str] = {}
    for d in result["datasets"].values():
        for name, panel in d["measures"].items():
            v = panel["validity"]
            if v.get("available"):
                names.setdefault(name, v["subsets"][subset]["measures"]["influence"]["label"])
                for c, m in v["subsets"][subset]["measures"].items():
                    if m["control"]:
                        names.setdefault(f"control:{c}", m["label"])
    ns = {}
    for key, label in sorted(names.items(), key=lambda kv: kv[0].startswith("control:")):  # controls last
        cells = []
        for dname, d in result["datasets"].items():
            setting, _, control = key.partition(":")
            panel = d["measures"]["rouge_l" if control else setting]["validity"]
            sub = panel["subsets"][subset] if panel.get("available") else None
            ns[dname] = sub["n"] if sub else 0
            m = sub["measures"].get(control or "influence") if sub else None
            cells.append(_cell(m) if m else "–")
        rows.append(f"| {label} | " + " | ".join(cells) + " |")
    return "\n".join(rows).format(**ns) + "\n"


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--questions", type=int, default=30)
    ap.add_argument("--datasets", nargs="+", default=list(DATASETS), choices=list(DATASETS))
    ap.add_argument("--runs", default="runs/bench-validity")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--position-questions", type=int, default=0,
                    help="also run reversed position control on this many questions of each data set")
    ap.add_argument("--out", default=str(Path(__file__).parent / "results" / "validity.json"))
    ap.add_argument("--table", choices=("all", "correct"), help="print the README table of --out and stop")
    args = ap.parse_args()
    out = Path(args.out)
    if args.table:
        print(markdown_table(json.loads(out.read_text()), args.table))
        return 0
    result: dict[str, Any] = {"machine": machine_info(("torch", "transformers", "sentence-transformers")),
                              "model": "SmolLM2-135M-Instruct (packaged, fp32, greedy)", "datasets": {},
                              "position_control": {}}
    if out.is_file():  # keep the data sets of an earlier call that this one does not redo
        earlier = json.loads(out.read_text())
        result["datasets"].update(earlier.get("datasets", {}))
        result["position_control"].update(earlier.get("position_control", {}))
    for name in args.datasets:
        if args.questions:
            result["datasets"][name] = bench_dataset(name, args.questions, Path(args.runs), args.seed)
            save_result(out, result)  # after each data set: a partial result survives an interruption
    result["paired_auc_logprob_minus_rouge_l"] = paired_logprob_vs_rouge(Path(args.runs), list(DATASETS), args.seed)
    save_result(out, result)
    for name in args.datasets:
        if args.position_questions:
            result["position_control"][name] = bench_position(name, args.position_questions, Path(args.runs),
                                                              args.seed)
            save_result(out, result)
    print(f"wrote {args.out}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
