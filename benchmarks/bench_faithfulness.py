"""Faithfulness benchmark: cost of ``ragray interpret`` vs the seed's naive loop, per mode and level.

    python benchmarks/bench_faithfulness.py [--questions 3] [--top-k 10] [--repeats 10]
        [--skip-naive] [--skip-levels] [--out benchmarks/results/faithfulness.json]

Workload: the first N HotpotQA distractor-dev questions (../shared/data), their 10 passages,
SmolLM2-135M-Instruct (packaged), greedy, max_tokens 32, K = top-1, top-3, top-20%, R draws.

- naive: the XAI-RAG seed's loop — every arm of the experiment is its own ``generate`` call on one
  prompt, nothing shared (no answer reuse between arms, no prefix reuse, no batching).
- ragray generate: :class:`FaithfulnessExperiment` as ``ragray interpret`` runs it (each distinct
  prompt once, one batched call per phase with prefix KV reuse).
- ragray logprob: ``faithfulness.mode=logprob`` — only the baseline is generated, every arm is a
  teacher-forced pass scoring the baseline answer.
- levels: explainer calls and wall time at passage level, sentence level flat and hierarchical,
  and token level hierarchical (token level flat is reported as its unit count only: it is the
  reason the hierarchical mode exists).

Same questions, same seed, one process; the 1-minute load average is recorded per section.
Agreement between the generate and naive runs is the share of identical cases (same prompts give
the same greedy answers, so it should be 1.0 up to batching numerics).
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from benchmarks.machine import SHARED_DATA, machine_info
from ragray.config import ExperimentConfig, load_config
from ragray.data import load_dataset
from ragray.faithfulness.answers import AnswerBook
from ragray.faithfulness.experiment import FaithfulnessExperiment
from ragray.faithfulness.units import Context
from ragray.generation import build_generator
from ragray.generation.prompts import get_template
from ragray.metrics.similarity import all_measures
from ragray.retrieval.stage import RetrievalStage

DATA = SHARED_DATA / "hotpotqa_distractor_dev.jsonl"


class NaiveBook(AnswerBook):
    """The seed's loop: one generate call per arm, no reuse of any kind."""

    def fill(self, ctx, ablations):
        self.calls.request(len(ablations))
        for ab in ablations:
            p = self.prompt(ctx, ab)
            (gen,) = self.generator.generate([p])
            self.calls.record(p, gen)
            if self.baseline is None:
                self.baseline = gen


def _overrides(args: argparse.Namespace) -> list[str]:
    return [f"data.path={DATA}", f"data.limit={args.questions}", f"retrieval.top_k={args.top_k}",
            f"faithfulness.random_repeats={args.repeats}", f"generation.max_tokens={args.max_tokens}"]


def _config(args: argparse.Namespace, *extra: str) -> ExperimentConfig:
    return load_config(None, [*_overrides(args), "faithfulness.k_values=[top-1,top-3,top-20%]", *extra])


def _run(config: ExperimentConfig, generator: Any, *, naive: bool = False) -> dict[str, Any]:
    fc = config.faithfulness
    exp = FaithfulnessExperiment(
        generator, get_template(config.generation.template),
        all_measures(tuple(dict.fromkeys((fc.similarity, *fc.measures)))), fc, seed=config.seed,
        book=NaiveBook if naive else AnswerBook,
    )
    load = os.getloadavg()[0]
    rows, cases = [], []
    start = time.perf_counter()
    for qh in RetrievalStage(config).run(load_dataset(config.data), progress=False):
        out = exp.run(qh)
        rows.append(out.question.as_dict())
        cases += [(c.question_id, c.k_label, c.case) for c in out.cases]
    wall = time.perf_counter() - start
    n = len(rows)
    return {
        "questions": n,
        "seconds": wall,
        "seconds_per_question": wall / n,
        "arm_calls_per_question": sum(q["calls_requested"] for q in rows) / n,
        "model_calls_per_question": sum(q["calls_generated"] for q in rows) / n,
        "score_passes_per_question": sum(q["score_passes"] for q in rows) / n,
        "explainer_calls_per_question": sum(q.get("explainer_calls") or 0 for q in rows) / n,
        "units_per_question": sum(q.get("n_units") or 0 for q in rows) / n,
        "units_flat_per_question": sum(q["n_units_flat"] for q in rows) / n,
        "errors": [q["error"] for q in rows if q["error"]],
        "cases": cases,
        "load_1min": load,
    }


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--questions", type=int, default=3)
    ap.add_argument("--top-k", type=int, default=10)
    ap.add_argument("--repeats", type=int, default=10)
    ap.add_argument("--max-tokens", type=int, default=32)
    ap.add_argument("--level-questions", type=int, default=2)
    ap.add_argument("--skip-naive", action="store_true")
    ap.add_argument("--skip-levels", action="store_true")
    ap.add_argument("--out", default=str(Path(__file__).parent / "results" / "faithfulness.json"))
    args = ap.parse_args()
    base = _config(args)
    gen = build_generator(base.generation)
    gen.generate([get_template("numbered").build("Warm up?", [])])
    results: dict[str, Any] = {"machine": machine_info(("torch", "transformers", "sentence-transformers")),
                               "workload": vars(args)}
    try:
        results["ragray_generate"] = _run(base, gen)
        print("ragray generate", json.dumps({k: v for k, v in results["ragray_generate"].items() if k != "cases"}))
        results["ragray_logprob"] = _run(_config(args, "faithfulness.mode=logprob"), gen)
        print("ragray logprob", json.dumps({k: v for k, v in results["ragray_logprob"].items() if k != "cases"}))
        if not args.skip_naive:
            naive_cfg = _config(args, "generation.transformers.prefix_reuse=false", "generation.transformers.batch_size=1")
            naive_gen = build_generator(naive_cfg.generation)
            try:
                results["naive"] = _run(naive_cfg, naive_gen, naive=True)
            finally:
                naive_gen.close()
            same = sum(a == b for a, b in zip(results["naive"]["cases"], results["ragray_generate"]["cases"]))
            results["naive"]["case_agreement_with_ragray"] = same / max(1, len(results["naive"]["cases"]))
            results["speedup_generate_vs_naive"] = (
                results["naive"]["seconds_per_question"] / results["ragray_generate"]["seconds_per_question"])
            print("naive", json.dumps({k: v for k, v in results["naive"].items() if k != "cases"}))
        results["speedup_logprob_vs_generate"] = (
            results["ragray_generate"]["seconds_per_question"] / results["ragray_logprob"]["seconds_per_question"])
        if not args.skip_levels:
            lv = argparse.Namespace(**{**vars(args), "questions": args.level_questions})
            levels = {}
            for name, extra in {
                "passage": ["faithfulness.level=passage"],
                "sentence_flat": ["faithfulness.level=sentence"],
                "sentence_hierarchical": ["faithfulness.level=sentence", "faithfulness.hierarchical=true"],
                "token_hierarchical": ["faithfulness.level=token", "faithfulness.hierarchical=true"],
            }.items():
                cfg = load_config(None, [*_overrides(lv), *extra, "faithfulness.k_values=[top-1]"])
                levels[name] = _run(cfg, gen)
                print(name, json.dumps({k: v for k, v in levels[name].items() if k != "cases"}))
            units = [len(Context.at_level(tuple(h.passage for h in qh.hits), "token"))
                     for qh in RetrievalStage(base).run(load_dataset(_config(lv).data), progress=False)]
            levels["token_flat_units_per_question"] = sum(units) / len(units)
            results["levels"] = levels
    finally:
        gen.close()
    Path(args.out).parent.mkdir(parents=True, exist_ok=True)
    Path(args.out).write_text(json.dumps(results, indent=2) + "\n", encoding="utf-8")
    print(f"wrote {args.out}")


if __name__ == "__main__":
    main()
