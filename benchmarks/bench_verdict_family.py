"""How often ``ragray interpret`` calls explanations faithful when no explanation can be: the
verdicts of all K's of a run together, on known truth.

    python benchmarks/bench_verdict_family.py [--runs 100] [--questions 12] [--out ...]

Known truth, the scripted generator (no model; the pipeline is ragray's own, at its defaults but
for the cheap ``rouge_l`` similarity):

- ``noise``: each question's answer is a fixed pseudo-random function of which passages are left
  (each removal changes it with chance 1/3, whatever was removed): removing two or more units is a
  fresh draw for every set, so at K ≥ 2 no ranking can beat random removals and every verdict
  other than "not shown" (faithful, mixed, inverted) is a false alarm. At K = 1 a single unit's
  removal is a fixed fact an explainer may read (the scripted model's log-prob of its answer
  does, so ``logprob`` is rightly faithful there): top-1 is reported, not counted. Each run has
  its own draw (the units' names carry the run's number).
- ``used``: the answer is in one known passage: a faithful explanation ranks it first, so
  "faithful" is the right verdict (what a correction must not lose).

Per explainer (``loo``, ``logprob_drop``, ``surrogate``), each run's K's (top-1, top-3, top-20%) are
judged two ways: ``sign``, the rule before (recomputed from ``cases.parquet``: each K on its own, a
sign test of the random draws' median minus DEL_MOST's similarity at α), and ``rank_holm``, ragray's
verdicts now (the run's summary: each question's DEL_MOST ranked among its own random draws, the
K's tests Holm-adjusted together, :mod:`ragray.faithfulness.verdict`). Reported: the share of runs
with at least one false alarm at K ≥ 2 (the family-wise error rate, with a 95% Wilson interval),
each K's states, and on ``used`` the verdicts. The committed run kept only the counts, not each
run's verdicts: ``benchmarks/results/archive/verdict_family.json``, not re-checkable.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import re
import sys
import tempfile
import time
from collections import Counter
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from benchmarks.machine import REPO, machine_info, save_result  # noqa: E402
from ragray.config import load_config  # noqa: E402
from ragray.metrics.stats import min_questions, share_ci, sign_test  # noqa: E402
from ragray.generation.scripted import ScriptedGenerator  # noqa: E402
from ragray.pipeline import run_interpret  # noqa: E402

EXPLAINERS = ("loo", "logprob_drop", "surrogate")
CHEAP = ["faithfulness.similarity=rouge_l", "faithfulness.measures=[rouge_l,exact_match,token_jaccard,edit,bleu]",
         "faithfulness.attributions=[loo,logprob_drop,surrogate]", "generation.backend=scripted"]
FALSE = ("faithful", "mixed", "inverted")


class NoiseGenerator(ScriptedGenerator):
    """The answer: "tern" with every passage, else a pseudo-random function of the passages left."""

    def _answer(self, prompt: Any) -> str:
        units = sorted(set(re.findall(r"UNIT\w+", prompt[-1].content)))
        draw = hashlib.sha256(" ".join(units).encode()).digest()[0]
        return "tern" if len(units) == 10 or draw % 3 else f"gull{draw}"


def _row(qid: str, question: str, texts: list[str]) -> dict[str, Any]:
    return {"id": qid, "question": question, "answers": ["x"],
            "passages": [{"id": f"{qid}-p{j}", "title": "", "text": t} for j, t in enumerate(texts)]}


def noise_rows(run: int, n: int) -> list[dict[str, Any]]:
    return [_row(f"r{run}q{i}", f"Which bird nests on stack {i}?",
                 [f"A note on stack {j}: UNIT{run}x{i}x{j}." for j in range(10)]) for i in range(n)]


def used_rows(n: int) -> list[dict[str, Any]]:
    filler = [f"Filler passage {j} about the harbour wall and its stones." for j in range(10)]
    rows = []
    for i in range(n):
        texts = list(filler)
        texts[i % 10] = f"The ferry to Kell is the Tern{i}. ANSWER=tern{i} It sails at noon."
        rows.append(_row(f"used{i}", f"Which ferry sails to Kell on day {i}?", texts))
    return rows


def false_alarm(states: dict[str, str]) -> bool:
    """Whether a noise run's verdicts claim anything at K >= 2 (top-1 is reported, not counted)."""
    return any(state in FALSE for label, state in states.items() if label != "top-1")


def sign_rule(cases: list[dict[str, Any]], alpha: float) -> dict[str, str]:
    """Each K's state by the rule before: a sign test of (random median − similarity) per K at α."""
    need = min_questions(alpha)
    out = {}
    for label in dict.fromkeys(c["k_label"] for c in cases):
        rows = [c for c in cases if c["k_label"] == label and c.get("random_median") is not None]
        kept = [c for c in rows if not c["by_construction"]]
        most, least = (sign_test([c["random_median"] - c[f"sim_{arm}"] for c in kept]) for arm in ("most", "least"))

        def hurts(t: Any) -> int:
            return 0 if t["p_value"] >= alpha or t["b10"] == t["b01"] else (1 if t["b10"] > t["b01"] else -1)

        if not kept:
            out[label] = "by_construction" if rows else "undecided"
        elif len(kept) < need:
            out[label] = "undecided"
        elif hurts(most) > 0:
            out[label] = "mixed" if hurts(least) > 0 else "faithful"
        else:
            out[label] = "inverted" if hurts(most) < 0 else "not_shown"
    return out


def one_run(rows: list[dict[str, Any]], explainer: str, generator: Any, tmp: Path) -> dict[str, dict[str, str]]:
    """The K's states of one run: ragray's (``rank_holm``, its summary) and the rule before's (``sign``)."""
    import pyarrow.parquet as pq

    path = tmp / "rows.jsonl"
    path.write_text("".join(json.dumps(r) + "\n" for r in rows), encoding="utf-8")
    cfg = load_config(None, [f"data.path={path}", *CHEAP, f"faithfulness.explainer={explainer}"])
    res = run_interpret(cfg, tmp / "out", progress=False, generator=generator)
    cases = pq.read_table(res.out / "cases.parquet").to_pylist()
    return {"sign": sign_rule(cases, cfg.faithfulness.decision.alpha),
            "rank_holm": {label: k["verdict"]["state"] for label, k in res.summary.per_k.items()}}


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--runs", type=int, default=100)
    ap.add_argument("--questions", type=int, default=12)
    ap.add_argument("--used-questions", type=int, default=7)
    ap.add_argument("--out", default=str(REPO / "benchmarks" / "results" / "verdict_family.json"))
    args = ap.parse_args(argv)
    began = time.perf_counter()
    result: dict[str, Any] = {"benchmark": "verdict_family", "machine": machine_info(),
                              "workload": {"runs": args.runs, "questions": args.questions,
                                           "used_questions": args.used_questions, "settings": CHEAP},
                              "noise": {}, "used": {}}
    for explainer in EXPLAINERS:
        per_rule: dict[str, dict[str, Any]] = {r: {"runs_with_a_false_alarm": 0, "per_k": Counter()}
                                               for r in ("sign", "rank_holm")}
        for run in range(args.runs):
            with tempfile.TemporaryDirectory() as tmp:
                judged = one_run(noise_rows(run, args.questions), explainer, NoiseGenerator(), Path(tmp))
            for rule, states in judged.items():
                per_rule[rule]["runs_with_a_false_alarm"] += false_alarm(states)
                per_rule[rule]["per_k"].update(f"{label}: {states[label]}" for label in states)
        result["noise"][explainer] = {rule: {
            "family_wise_false_alarms": {"count": v["runs_with_a_false_alarm"], "of": args.runs,
                                         **share_ci(v["runs_with_a_false_alarm"], args.runs)},
            "states": dict(sorted(v["per_k"].items()))} for rule, v in per_rule.items()}
        with tempfile.TemporaryDirectory() as tmp:
            result["used"][explainer] = one_run(used_rows(args.used_questions), explainer, ScriptedGenerator(),
                                                Path(tmp))
        print(explainer, json.dumps(result["noise"][explainer]), json.dumps(result["used"][explainer]), flush=True)
    result["seconds"] = round(time.perf_counter() - began, 1)
    save_result(args.out, result)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
