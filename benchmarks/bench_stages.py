"""Does the stage verdict point at the fix it names? (issue 66; pre-registered in
``benchmarks/protocol/stages.json``)

    python benchmarks/bench_stages.py run [--arm gold_last]  # ragray run (resumable)
    python benchmarks/bench_stages.py fix [--arm gold_last]  # the gold-to-top intervention, per wrong answer
    python benchmarks/bench_stages.py report --split tune    # figures of both arms (tune: any number of reads)
    python benchmarks/bench_stages.py report --split test    # figures of both arms (test: read once, recorded)

Arms: ``bm25`` runs at pure defaults (BM25 ranks each question's own ten paragraphs);
``gold_last`` (an amendment registered after bm25's tune read held no ranking verdict) runs the
same questions with bm25's order but the gold paragraphs moved last, in the given order
(``retrieval.retriever=given``): a ranking failure by construction for the rank-only baseline.

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
RUNS = REPO / "runs" / "bench_stages"
RUN_DIRS = {"bm25": RUNS / SET, "gold_last": RUNS / f"{SET}_gold_last"}
RECORD_DIR = REPO / "benchmarks" / "results" / "records" / "stages"
RECORDS = {"bm25": RECORD_DIR / f"{SET}.jsonl.gz", "gold_last": RECORD_DIR / f"{SET}_gold_last.jsonl.gz"}
#: the gold_last arm's questions (built from ../shared/data and the bm25 run; never in the repo)
GOLD_LAST_FILE = RUNS / f"{SET}_gold_last.jsonl"
RESULT = REPO / "benchmarks" / "results" / "stages.json"
#: the wrong-answer stages the intervention is scored on (memory: shown, not compared)
SCORED = ("ranking", "generation", "memory")
RESAMPLES = 10_000
DOCS = REPO / "docs" / "trust.md"
DOCS_BEGIN = "<!-- stages:begin (written by: python benchmarks/bench_stages.py report --split test) -->"
DOCS_END = "<!-- stages:end -->"


def _gold_last_file() -> Path:
    """The bm25 run's questions with each question's passages in bm25's order, gold moved last."""
    import pandas as pd

    from benchmarks.machine import SHARED_DATA

    rows = {r["id"]: r for r in map(json.loads, (SHARED_DATA / "hotpotqa_distractor_dev.jsonl").open(encoding="utf-8"))}
    passages = pd.read_parquet(RUN_DIRS["bm25"] / "passages.parquet")
    lines = []
    for qid in pd.read_parquet(RUN_DIRS["bm25"] / "questions.parquet")["question_id"]:
        row = rows[qid]
        by_id = {p["id"]: p for p in row["passages"]}
        ranked = passages[passages["question_id"] == qid].sort_values("retrieval_rank").to_dict("records")
        order = [p["passage_id"] for p in ranked if not p["is_gold"]] + [p["passage_id"] for p in ranked if p["is_gold"]]
        lines.append(json.dumps({**row, "passages": [by_id[i] for i in order]}) + "\n")
    GOLD_LAST_FILE.write_text("".join(lines), encoding="utf-8")
    return GOLD_LAST_FILE


def run_items(arm: str) -> None:
    """``ragray run`` (bm25: pure defaults; gold_last: the given order), resumable; the run's
    ``stage`` column is what is checked."""
    out = RUN_DIRS[arm]
    dataset = SET if arm == "bm25" else str(_gold_last_file())
    cmd = ["ragray", "run", "--dataset", dataset, "--limit", str(LIMIT), "--out", str(out), "--no-progress"]
    if arm == "gold_last":
        cmd += ["--set", "retrieval.retriever=given"]
    if (out / "config.yaml").exists():
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


def fix_items(arm: str) -> None:
    """Score and regenerate every wrong answer under the gold-to-top order; write the records."""
    import pandas as pd

    from ragray.config import load_config
    from ragray.generation import build_generator
    from ragray.metrics.answers import contains_gold

    run_dir = RUN_DIRS[arm]
    cfg = load_config(run_dir / "config.yaml", [])
    questions = pd.read_parquet(run_dir / "questions.parquet").to_dict("records")
    passages = pd.read_parquet(run_dir / "passages.parquet")
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
    RECORD_DIR.mkdir(parents=True, exist_ok=True)
    with gzip.open(RECORDS[arm], "wt", encoding="utf-8") as fh:
        for rec in out:
            fh.write(json.dumps(rec, sort_keys=True) + "\n")
    print(f"{len(out)} records ({sum('gain' in r for r in out)} scored) in {time.perf_counter() - started:.0f} s "
          f"-> {RECORDS[arm].relative_to(REPO)}")


def load_records() -> dict[str, list[dict[str, Any]]]:
    """Each arm's per-item records."""
    out = {}
    for arm, path in RECORDS.items():
        with gzip.open(path, "rt", encoding="utf-8") as fh:
            out[arm] = [json.loads(line) for line in fh]
    return out


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


def result(records: Mapping[str, Sequence[Mapping[str, Any]]]) -> dict[str, Any]:
    """``stages.json``'s figures (each arm's test and tune splits) with the protocol's provenance;
    the check recomputes everything but ``machine`` from the records."""
    reg = registered(BENCH)
    return {"benchmark": BENCH, "set": SET, "protocol": {"commit": reg["commit"], "committed": reg["committed"]},
            "test_reads": test_reads(BENCH),
            "arms": {arm: {"test": figures(recs, "test"), "tune": figures(recs, "tune")} for arm, recs in records.items()}}


def _num(x: float | None, digits: int = 2) -> str:
    return "-" if x is None else f"{x:+.{digits}f}"


ARM_WORDS = {"bm25": "at pure defaults (BM25 ranks each question's ten paragraphs)",
             "gold_last": "with the gold paragraphs moved last (amendment, registered before the test read)"}


def _arm_lines(arm: str, t: Mapping[str, Any]) -> list[str]:
    lines = [f"**{arm}**: {t['items']} test questions {ARM_WORDS[arm]}.", "",
             "| stage printed | questions | mean gain | median gain | fixed |", "|---|---|---|---|---|"]
    for stage in SCORED:
        g = t["per_stage"][stage]
        lines.append(f"| {stage} | {g['n']} | {_num(g['mean_gain'])} | {_num(g['median_gain'])} | {g['fixed']} of {g['n']} |")
    b = t["baseline_rank_only"]
    lines += [f"| rank-only baseline (ranking + generation) | {b['n']} | {_num(b['mean_gain'])} | "
              f"{_num(b['median_gain'])} | {b['fixed']} of {b['n']} |", ""]
    if "primary" in t:
        lo, hi = t["primary"]["ci95"]
        lines.append(f"Ranking minus generation, mean gain: {_num(t['primary']['difference'])} nats "
                     f"(95% bootstrap interval {_num(lo)} to {_num(hi)}; one-sided Mann-Whitney p "
                     f"{t['mann_whitney_p']:.3f}; fixed, one-sided Fisher p {t['fisher_p']:.3f}).")
    counts = ", ".join(f"{k} {v}" for k, v in t["stage_counts"].items() if v)
    return lines + [f"Verdict (pre-registered rule): **{t['decision']}**.", "",
                    f"Stages: {counts}; generation failures whose gold was already first (not scored): "
                    f"{t['generation_gold_already_first']}; the run's prompt reproduced its answer on "
                    f"{t['reproduces']['k']} of {t['reproduces']['n']} scored questions.", ""]


def docs_block(res: Mapping[str, Any]) -> str:
    """docs/trust.md's block: each arm's test figures, from ``stages.json`` alone."""
    lines = [f"Test split of the first {LIMIT} HotpotQA questions, read once ({res['test_reads'][0]['date'][:10]}; "
             f"pre-registered at {res['protocol']['commit']}). Wrong answers whose order the gold-to-top move "
             "changes, by the stage ragray printed; gain: log p(gold answer) with the gold passages first minus "
             "with the run's order (nats); fixed: the new greedy answer is right.", ""]
    for arm, splits in res["arms"].items():
        lines += _arm_lines(arm, splits["test"])
    right = {arm: splits["test"]["stage_counts"]["right"] for arm, splits in res["arms"].items()}
    items = {arm: splits["test"]["items"] for arm, splits in res["arms"].items()}
    lines.append(f"Post hoc (read after the test read, from the stage counts above): the same questions were "
                 f"answered right {right['bm25']} of {items['bm25']} times in BM25's order and {right['gold_last']} "
                 f"of {items['gold_last']} with the gold paragraphs last, next to the question.")
    return "\n".join(lines).rstrip("\n")


def report(split: str) -> None:
    records = load_records()
    if split == "tune":
        print(json.dumps({arm: figures(recs, "tune") for arm, recs in records.items()}, indent=2))
        return
    if test_reads(BENCH):
        raise SystemExit(f"the test split was read already ({test_reads(BENCH)[0]['date']}): it is read once")
    record_read(BENCH, "every pre-registered figure of the test split (benchmarks/bench_stages.py report --split test)")
    out = {**result(records), "machine": machine_info()}
    RESULT.write_text(json.dumps(out, indent=2) + "\n", encoding="utf-8")
    write_block(DOCS, DOCS_BEGIN, DOCS_END, docs_block(out))
    print(json.dumps({arm: splits["test"] for arm, splits in out["arms"].items()}, indent=2))


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("step", choices=["run", "fix", "report"])
    ap.add_argument("--split", choices=["tune", "test"], default="tune")
    ap.add_argument("--arm", choices=list(RUN_DIRS), default="bm25")
    args = ap.parse_args()
    {"run": lambda: run_items(args.arm), "fix": lambda: fix_items(args.arm),
     "report": lambda: report(args.split)}[args.step]()


if __name__ == "__main__":
    main()
