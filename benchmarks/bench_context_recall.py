"""Does a context hold the gold answer? The SPEC's recall@k by cosine against the string rule
``ragray score`` prints beside it (``gold answer in a context``).

    python benchmarks/bench_context_recall.py [--n 200]

Known truth from ``../shared/data`` (SQuAD v1.1 dev and HotpotQA distractor dev, no text reaches
the repo): each question's context is its gold passages, which by construction hold the answer
span (SQuAD) or the supporting facts (HotpotQA). Reported per set: the share of questions whose
context contains a gold answer as whole words (the string rule) and the share that recall@k by
cosine (MiniLM, τ = 0.75, ``metrics.tau_recall``) counts as recalled. Writes
``benchmarks/results/context_recall.json`` (the committed run kept only the shares, not the
per-question outcomes: ``benchmarks/results/archive/context_recall.json``, not re-checkable).
"""

from __future__ import annotations

import argparse
import json
import random
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from benchmarks.machine import REPO, SHARED_DATA, machine_info, save_result

RESULT = REPO / "benchmarks" / "results" / "context_recall.json"
SETS = {"squad": "squad_v11_dev.jsonl", "hotpotqa": "hotpotqa_distractor_dev.jsonl"}


def measure(name: str, n: int) -> dict:
    from ragray.config import load_config
    from ragray.metrics.answers import contains_gold
    from ragray.metrics.quality import QualityItem, QualityScorer

    rows = [json.loads(line) for line in (SHARED_DATA / SETS[name]).read_text(encoding="utf-8").splitlines()]
    random.Random(0).shuffle(rows)
    items = []
    for r in rows:
        gold = set(r.get("gold_passage_ids") or ())
        contexts = tuple(p["text"] for p in r["passages"] if p["id"] in gold)
        if contexts and r.get("answers"):
            items.append(QualityItem(question=r["question"], answer=r["answers"][0], contexts=contexts,
                                     golds=tuple(r["answers"]), doc_ids=(), gold_ids=(), latency_s=None,
                                     prompt_tokens=None, completion_tokens=None, model=None))
        if len(items) == n:
            break
    config = load_config(None, [])
    start = time.perf_counter()
    scores = QualityScorer(config.metrics).score(items)
    string_rule = [any(contains_gold(c, i.golds) for c in i.contexts) for i in items]
    cosine = [s["recall_at_k_cosine"] for s in scores]
    return {"n": len(items), "string_rule": sum(string_rule) / len(items), "recall_at_k_cosine": sum(cosine) / len(items),
            "tau_recall": config.metrics.tau_recall, "encoder": config.metrics.encoder,
            "seconds": time.perf_counter() - start}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--n", type=int, default=200, help="questions per set")
    args = parser.parse_args()
    result = {"machine": machine_info(("sentence-transformers", "torch")),
              "sets": {name: measure(name, args.n) for name in SETS}}
    print(json.dumps(result["sets"], indent=1))
    save_result(RESULT, result)


if __name__ == "__main__":
    main()
