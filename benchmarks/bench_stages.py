"""Does the stage verdict point at the fix it names? (issue 66; pre-registered in
``benchmarks/protocol/stages.json``)

    python benchmarks/bench_stages.py run                   # ragray run at pure defaults (resumable)
    python benchmarks/bench_stages.py fix                   # the gold-to-top intervention, per wrong answer
    python benchmarks/bench_stages.py report --split tune   # figures (tune: any number of reads)
    python benchmarks/bench_stages.py report --split test   # figures (test: read once, recorded)

ragray names the stage that failed a wrong answer (``ragray.metrics.stages``): RANKING when a gold
passage was retrieved below every passage the answer leaned on, GENERATION when the gold was
ranked above them (or used, or nothing stands out). The known truth the verdict promises: a
ranking failure is one a better order would help. So each wrong answer gets the fix a ranking
verdict names — the gold passages put first, nothing else changed — and the log-probability of
the gold answer is scored before and after, and the answer generated again. A verdict worth
printing separates the two: ranking-labelled answers gain more than generation-labelled ones. The
free baseline it must beat calls every wrong answer whose gold is below #1 a ranking failure.

Per-item records (ids, stages, ranks, log-probs, the new answer's correctness; no dataset text)
go to ``benchmarks/results/records/stages/hotpotqa.jsonl.gz``; ``report --split test`` writes
``benchmarks/results/stages.json``, which ``benchmarks/verify.py`` recomputes from the records.
"""

from __future__ import annotations

import argparse
import gzip
import hashlib
import json
import subprocess
import sys
import time
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from benchmarks.machine import REPO, machine_info, write_block
from benchmarks.protocol import read_before, record_read, registered, split_of, test_reads

BENCH = "stages"
SET = "hotpotqa"
LIMIT = 60
RUN_DIR = REPO / "runs" / "bench_stages" / SET
RECORDS = REPO / "benchmarks" / "results" / "records" / "stages" / f"{SET}.jsonl.gz"
RESULT = REPO / "benchmarks" / "results" / "stages.json"
#: the wrong-answer stages the intervention is scored on (memory: shown, not compared)
SCORED = ("ranking", "generation", "memory")
RESAMPLES = 10_000
DOCS = REPO / "docs" / "trust.md"
DOCS_BEGIN = "<!-- stages:begin (written by: python benchmarks/bench_stages.py report --split test) -->"
DOCS_END = "<!-- stages:end -->"


def run_items() -> None:
    """``ragray run`` at pure defaults, resumable; the run's ``stage`` column is what is checked."""
    cmd = ["ragray", "run", "--dataset", SET, "--limit", str(LIMIT), "--out", str(RUN_DIR), "--no-progress"]
    if (RUN_DIR / "config.yaml").exists():
        cmd.append("--resume")
    subprocess.run(cmd, check=True)


def gold_first(passages: Sequence[Mapping[str, Any]]) -> list[Mapping[str, Any]]:
    """The run's passages (retrieval order) with the gold ones moved first, each group in order."""
    ranked = sorted(passages, key=lambda p: int(p["retrieval_rank"]))
    return [p for p in ranked if p["is_gold"]] + [p for p in ranked if not p["is_gold"]]


def _ranks(passages: Sequence[Mapping[str, Any]], key: str) -> list[int]:
    return sorted(int(p["retrieval_rank"]) for p in passages if p.get(key))


def _sha(text: str) -> str:
    return hashlib.sha1(text.encode()).hexdigest()[:12]


def _prompts(cfg: Any) -> Any:
    from ragray.generation.prompts import get_template, system_message
    from ragray.types import Passage

    template = get_template(cfg.generation.template)
    decline = "never" if cfg.generation.decline == "auto" else cfg.generation.decline  # HotpotQA: all answerable
    system = system_message(template, cfg.generation.system_prompt, decline)

    def build(question: str, passages: Sequence[Mapping[str, Any]]) -> Any:
        rows = [Passage(id=str(p["passage_id"]), text=str(p["text"]), title=str(p.get("title") or "")) for p in passages]
        return template.build(question, rows, system)

    return build


def fix_items() -> None:
    """Score and regenerate every wrong answer under the gold-to-top order; write the records."""
    import pandas as pd

    from ragray.config import load_config
    from ragray.generation import build_generator
    from ragray.metrics.answers import contains_gold

    cfg = load_config(RUN_DIR / "config.yaml", [])
    questions = pd.read_parquet(RUN_DIR / "questions.parquet").to_dict("records")
    passages = pd.read_parquet(RUN_DIR / "passages.parquet")
    build = _prompts(cfg)
    gen = build_generator(cfg.generation)
    before = read_before(BENCH)
    out = []
    started = time.perf_counter()
    for q in questions:
        rows = passages[passages["question_id"] == q["question_id"]].to_dict("records")
        golds = [str(a) for a in q["gold_answers"]]
        rec: dict[str, Any] = {
            "id": str(q["question_id"]), "split": split_of(str(q["question_id"]), before), "stage": q["stage"],
            "answer_correct": q["answer_correct"], "context_dependent": q["context_dependent"],
            "gold_ranks": _ranks(rows, "is_gold"), "used_ranks": _ranks(rows, "used"),
            "answer_sha1": _sha(str(q["baseline_answer"] or "")),
        }
        order = gold_first(rows)
        ranked = sorted(rows, key=lambda p: int(p["retrieval_rank"]))
        rec["order_changes"] = [p["retrieval_rank"] for p in order] != [p["retrieval_rank"] for p in ranked]
        if q["stage"] in SCORED and rec["order_changes"] and golds:
            run_prompt, new_prompt = build(q["question"], ranked), build(q["question"], order)
            lp_run, lp_new = gen.logprobs([run_prompt, new_prompt], [golds[0], golds[0]])
            again, fixed = gen.generate([run_prompt, new_prompt])
            rec.update(logprob_run=lp_run, logprob_gold_first=lp_new, gain=lp_new - lp_run,
                       fixed=bool(contains_gold(fixed.text, golds)), reproduces=again.text == q["baseline_answer"])
        out.append(rec)
    RECORDS.parent.mkdir(parents=True, exist_ok=True)
    with gzip.open(RECORDS, "wt", encoding="utf-8") as fh:
        for rec in out:
            fh.write(json.dumps(rec, sort_keys=True) + "\n")
    print(f"{len(out)} records ({sum('gain' in r for r in out)} scored) in {time.perf_counter() - started:.0f} s "
          f"-> {RECORDS.relative_to(REPO)}")


def load_records() -> list[dict[str, Any]]:
    with gzip.open(RECORDS, "rt", encoding="utf-8") as fh:
        return [json.loads(line) for line in fh]


def _group(recs: Sequence[Mapping[str, Any]]) -> dict[str, Any]:
    import numpy as np

    gains = [r["gain"] for r in recs]
    return {"n": len(recs), "mean_gain": float(np.mean(gains)) if gains else None,
            "median_gain": float(np.median(gains)) if gains else None,
            "fixed": sum(bool(r["fixed"]) for r in recs)}


def _difference(a: Sequence[float], b: Sequence[float]) -> dict[str, Any]:
    import numpy as np

    rng = np.random.default_rng(0)
    x, y = np.asarray(a, float), np.asarray(b, float)
    draws = [rng.choice(x, x.size).mean() - rng.choice(y, y.size).mean() for _ in range(RESAMPLES)]
    lo, hi = np.percentile(draws, [2.5, 97.5])
    return {"difference": float(x.mean() - y.mean()), "ci95": [float(lo), float(hi)]}


def figures(records: Sequence[Mapping[str, Any]], split: str) -> dict[str, Any]:
    """Every pre-registered figure of ``split`` from the records."""
    from scipy.stats import fisher_exact, mannwhitneyu

    from ragray.metrics.stages import STAGES

    recs = [r for r in records if r["split"] == split]
    scored = {s: [r for r in recs if r["stage"] == s and "gain" in r] for s in SCORED}
    rank, gen = scored["ranking"], scored["generation"]
    out: dict[str, Any] = {
        "split": split, "items": len(recs),
        "stage_counts": {s: sum(r["stage"] == s for r in recs) for s in STAGES},
        "generation_gold_already_first": sum(r["stage"] == "generation" and not r["order_changes"] for r in recs),
        "per_stage": {s: _group(scored[s]) for s in SCORED},
        "reproduces": {"k": sum(bool(r.get("reproduces")) for r in recs if "gain" in r),
                       "n": sum("gain" in r for r in recs)},
        "baseline_rank_only": _group(rank + gen),
    }
    if min(len(rank), len(gen)) < 5:
        out["decision"] = "too few to judge"
        return out
    diff = _difference([r["gain"] for r in rank], [r["gain"] for r in gen])
    out["primary"] = diff
    out["mann_whitney_p"] = float(mannwhitneyu([r["gain"] for r in rank], [r["gain"] for r in gen],
                                               alternative="greater").pvalue)
    table = [[out["per_stage"]["ranking"]["fixed"], len(rank) - out["per_stage"]["ranking"]["fixed"]],
             [out["per_stage"]["generation"]["fixed"], len(gen) - out["per_stage"]["generation"]["fixed"]]]
    out["fisher_p"] = float(fisher_exact(table, alternative="greater")[1])
    lo, hi = diff["ci95"]
    out["decision"] = ("shown: a ranking verdict points at a reorder that helps more than a generation verdict"
                       if lo > 0 else "the verdict misleads" if hi < 0 else
                       "not shown on this set: the stage rule is not distinguishable from the rank-only baseline here")
    return out


def result(records: Sequence[Mapping[str, Any]]) -> dict[str, Any]:
    """``stages.json``'s figures (test split) with the protocol's provenance; the check recomputes
    everything but ``machine`` from the records."""
    reg = registered(BENCH)
    return {"benchmark": BENCH, "set": SET, "protocol": {"commit": reg["commit"], "committed": reg["committed"]},
            "test_reads": test_reads(BENCH), "test": figures(records, "test"), "tune": figures(records, "tune")}


def _num(x: float | None, digits: int = 2) -> str:
    return "-" if x is None else f"{x:+.{digits}f}"


def docs_block(res: Mapping[str, Any]) -> str:
    """docs/trust.md's block: the test split's figures, from ``stages.json`` alone."""
    t = res["test"]
    lines = [f"Test split: {t['items']} of the first {LIMIT} HotpotQA questions (read once, "
             f"{res['test_reads'][0]['date'][:10]}; pre-registered at {res['protocol']['commit']}). Wrong answers "
             f"whose order the gold-to-top move changes, by the stage ragray printed; gain: log p(gold answer) with "
             f"the gold passages first minus with the run's order (nats); fixed: the new greedy answer is right.",
             "", "| stage printed | questions | mean gain | median gain | fixed |", "|---|---|---|---|---|"]
    for stage in SCORED:
        g = t["per_stage"][stage]
        lines.append(f"| {stage} | {g['n']} | {_num(g['mean_gain'])} | {_num(g['median_gain'])} | {g['fixed']} of {g['n']} |")
    b = t["baseline_rank_only"]
    lines.append(f"| rank-only baseline (ranking + generation) | {b['n']} | {_num(b['mean_gain'])} | "
                 f"{_num(b['median_gain'])} | {b['fixed']} of {b['n']} |")
    lines.append("")
    if "primary" in t:
        lo, hi = t["primary"]["ci95"]
        lines.append(f"Ranking minus generation, mean gain: {_num(t['primary']['difference'])} nats "
                     f"(95% bootstrap interval {_num(lo)} to {_num(hi)}; one-sided Mann-Whitney p "
                     f"{t['mann_whitney_p']:.3f}; fixed, one-sided Fisher p {t['fisher_p']:.3f}).")
    counts = ", ".join(f"{k} {v}" for k, v in t["stage_counts"].items() if v)
    lines += [f"Verdict (pre-registered rule): **{t['decision']}**.", "",
              f"Stages on the test split: {counts}; generation failures whose gold was already first "
              f"(not scored): {t['generation_gold_already_first']}; the run's prompt reproduced its answer on "
              f"{t['reproduces']['k']} of {t['reproduces']['n']} scored questions."]
    return "\n".join(lines)


def report(split: str) -> None:
    records = load_records()
    if split == "tune":
        print(json.dumps(figures(records, "tune"), indent=2))
        return
    if test_reads(BENCH):
        raise SystemExit(f"the test split was read already ({test_reads(BENCH)[0]['date']}): it is read once")
    record_read(BENCH, "every pre-registered figure of the test split (benchmarks/bench_stages.py report --split test)")
    out = {**result(records), "machine": machine_info()}
    RESULT.write_text(json.dumps(out, indent=2) + "\n", encoding="utf-8")
    write_block(DOCS, DOCS_BEGIN, DOCS_END, docs_block(out))
    print(json.dumps(out["test"], indent=2))


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("step", choices=["run", "fix", "report"])
    ap.add_argument("--split", choices=["tune", "test"], default="tune")
    args = ap.parse_args()
    {"run": run_items, "fix": fix_items, "report": lambda: report(args.split)}[args.step]()


if __name__ == "__main__":
    main()
